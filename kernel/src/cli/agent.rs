//! `oxibot agent`: talk to the assistant, one message (`-m`) or interactively.

use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use oxibot_kernel::agent::{SessionManager, TurnReply, session_threads_for_this_machine};
use oxibot_kernel::automation::dispatch::Dispatcher;
use oxibot_kernel::automation::scheduling::{self, Scheduler};
use oxibot_kernel::automation::{Reach, builtin_tools, cron_where_jobs_run};
use oxibot_kernel::memory::dream_actor::StartSchedule;
use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_kernel::services::Services;
use tokio::signal::unix::SignalKind;

use super::CommonArgs;
use super::background;
use super::kernel::Setup;
use super::repl;
use super::stream::Style;
use super::turn::send;

/// Options of `oxibot agent`.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// One message to send; interactive when absent.
    pub message: Option<String>,
    /// The session key.
    pub session: String,
    /// Print replies as they come, without Markdown rendering, even on a terminal.
    pub no_markdown: bool,
}

/// Runs the command.
pub fn run(common: &CommonArgs, options: AgentOptions) -> anyhow::Result<ExitCode> {
    let style = Style::detect(options.no_markdown);
    let setup = Setup::load(common)?;
    // Declared before the system, so it is dropped (and flushes) after the system ends.
    let _telemetry = setup.start_telemetry();
    let provider = match Provider::from_config(&setup.settings.config.llm()) {
        Ok(provider) => with_retry_override(provider)?,
        Err(error) => return Err(without_provider(error)),
    };
    actix::System::new().block_on(async move {
        let host = setup.start_host()?;
        host.wait_settled(setup.startup_wait()).await;
        let services =
            Services::new(setup.settings.clone(), setup.workspace.clone(), &paths::data_dir(), provider, host, true)
                .with_nanobot_sessions(setup.nanobot_sessions())
                .with_background_consolidation(options.message.is_none());
        let services = Arc::new(services);
        let interactive = options.message.is_none();
        let (dispatcher, requests) = Dispatcher::channel();
        let timezone = scheduling::timezone(services.timezone().as_deref());
        // An interactive agent runs the workspace's scheduled jobs unless a gateway does; a
        // one-shot run ends with its answer, so it schedules nothing (and a helper's report
        // could not come back later).
        let scheduler =
            if interactive { Scheduler::start(services.workspace(), timezone, dispatcher.clone()) } else { None };
        // A one-shot run has one session: it runs on this thread, with no session threads.
        let session_threads = if interactive { session_threads_for_this_machine() } else { 0 };
        let manager = Rc::new(SessionManager::with_session_threads(services.clone(), session_threads));
        let mut extra = manager.memory().tools();
        extra.extend(cron_where_jobs_run(services.workspace(), timezone, scheduler.as_ref()));
        let reach = Reach { dispatcher: interactive.then_some(dispatcher), channels: false, extra };
        services.install_builtins(builtin_tools(&services, reach));
        if interactive {
            manager.memory().dream.do_send(StartSchedule);
            actix::spawn(background::serve(manager.clone(), requests));
        }
        answer_left_unanswered(&manager, &options.session).await;
        let code = match &options.message {
            Some(message) => one_shot(&manager, &options, style, message).await,
            None => repl::run(&manager, &options.session, style).await,
        };
        services.host().shutdown().await;
        drop(scheduler);
        code
    })
}

/// Answers, in order and before anything else, the messages of this session a previous run
/// accepted and never answered (it was killed mid-turn); each answer is printed.
async fn answer_left_unanswered(manager: &SessionManager, session: &str) {
    let pending = match manager.pending(session) {
        Ok(pending) => pending,
        Err(error) => {
            eprintln!("warning: cannot read the session's unanswered messages: {error}");
            return;
        }
    };
    for message in pending {
        tracing::info!(session, message = %message.id, "answering a message left unanswered by a previous run");
        let (events, mut progress) = tokio::sync::mpsc::unbounded_channel();
        actix::spawn(async move { while progress.recv().await.is_some() {} });
        match manager.answer_pending(session.into(), &message.id, events).await {
            Ok(reply) if !reply.text().is_empty() => println!("{}", reply.text()),
            Ok(_) => {}
            Err(error) => eprintln!("error: {error}"),
        }
    }
}

/// The error when no provider is usable, with a local model server offered when one answers.
fn without_provider(error: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
    let error = anyhow::Error::new(error).context("cannot use the configured model");
    match super::local_server::find().first() {
        Some(server) => error.context(format!(
            "no usable provider, but found {}: run `oxibot onboard --local` to use it",
            server.describe()
        )),
        None => error,
    }
}

/// Environment variable overriding the provider's retry delays (milliseconds, comma
/// separated), for tests and for impatient setups.
pub const RETRY_DELAYS_VAR: &str = "OXIBOT_PROVIDER_RETRY_DELAYS_MS";

pub fn with_retry_override(provider: Provider) -> anyhow::Result<Provider> {
    let Ok(text) = std::env::var(RETRY_DELAYS_VAR) else { return Ok(provider) };
    let delays = text
        .split(',')
        .map(|part| part.trim().parse::<u64>().map(Duration::from_millis))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{RETRY_DELAYS_VAR} must be comma-separated milliseconds, got {text:?}"))?;
    Ok(provider.with_retry_delays(delays))
}

async fn one_shot(
    manager: &SessionManager,
    options: &AgentOptions,
    style: Style,
    message: &str,
) -> anyhow::Result<ExitCode> {
    // On a terminal Ctrl-C stops the turn cleanly (the spinner is erased, the session
    // closed); elsewhere it ends the program as usual.
    let mut interrupts = if style.stderr_tty {
        Some(tokio::signal::unix::signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")?)
    } else {
        None
    };
    match send(manager, &options.session, message, style, interrupts.as_mut(), None).await {
        Ok(TurnReply::Stopped) if interrupts.is_some() => Ok(ExitCode::from(130)),
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            eprintln!("error: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}
