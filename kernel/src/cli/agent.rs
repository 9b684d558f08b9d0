//! `oxibot agent`: talk to the assistant, one message (`-m`) or interactively.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use oxibot_kernel::agent::runner::TurnEvent;
use oxibot_kernel::agent::{Agent, SessionManager, TurnReply};
use oxibot_kernel::memory::dream_actor::StartSchedule;
use oxibot_kernel::provider::Provider;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use super::kernel::{Setup, WorkspaceDefault};
use super::CommonArgs;

/// Options of `oxibot agent`.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// One message to send; interactive when absent.
    pub message: Option<String>,
    /// The session key.
    pub session: String,
}

/// Runs the command.
pub fn run(common: &CommonArgs, options: AgentOptions) -> anyhow::Result<ExitCode> {
    let setup = Setup::load_with(common, WorkspaceDefault::Configured)?;
    let provider = with_retry_override(Provider::from_config(&setup.config).context("cannot use the configured model")?)?;
    actix::System::new().block_on(async move {
        let host = setup.start_host()?;
        host.wait_settled(setup.startup_wait()).await;
        let mut agent = Agent::new(setup.config.clone(), setup.workspace.clone(), provider, host, true);
        agent.background_consolidation = options.message.is_none();
        let agent = Arc::new(agent);
        let manager = SessionManager::new(agent.clone());
        if options.message.is_none() {
            manager.memory().dream.do_send(StartSchedule);
        }
        let code = match &options.message {
            Some(message) => one_shot(&manager, &options, message).await,
            None => interactive(&manager, &options).await,
        };
        agent.host.shutdown().await;
        code
    })
}

/// Environment variable overriding the provider's retry delays (milliseconds, comma
/// separated), for tests and for impatient setups.
pub const RETRY_DELAYS_VAR: &str = "OXIBOT_PROVIDER_RETRY_DELAYS_MS";

fn with_retry_override(provider: Provider) -> anyhow::Result<Provider> {
    let Ok(text) = std::env::var(RETRY_DELAYS_VAR) else { return Ok(provider) };
    let delays = text
        .split(',')
        .map(|part| part.trim().parse::<u64>().map(Duration::from_millis))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{RETRY_DELAYS_VAR} must be comma-separated milliseconds, got {text:?}"))?;
    Ok(provider.with_retry_delays(delays))
}

async fn one_shot(manager: &SessionManager, options: &AgentOptions, message: &str) -> anyhow::Result<ExitCode> {
    match send(manager, &options.session, message).await {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            eprintln!("error: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

async fn interactive(manager: &SessionManager, options: &AgentOptions) -> anyhow::Result<ExitCode> {
    let tty = std::io::stdin().is_terminal();
    if tty {
        eprintln!("oxibot — type a message; /help for commands; exit, quit or Ctrl-D to leave; Ctrl-C stops a reply");
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        if tty {
            eprint!("\nyou › ");
        }
        let Some(line) = lines.next_line().await.context("cannot read from standard input")? else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if matches!(line, "exit" | "quit" | "/exit" | "/quit") {
            break;
        }
        let turn = send(manager, &options.session, line);
        tokio::pin!(turn);
        let outcome = loop {
            tokio::select! {
                outcome = &mut turn => break outcome,
                _ = tokio::signal::ctrl_c() => {
                    manager.stop(&options.session);
                }
            }
        };
        if let Err(error) = outcome {
            eprintln!("error: {error}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends one message, streaming the reply to stdout; returns the final reply.
async fn send(manager: &SessionManager, session: &str, text: &str) -> anyhow::Result<TurnReply> {
    let (events, mut rx) = mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        let mut printed = false;
        let show_tools = std::io::stderr().is_terminal();
        while let Some(event) = rx.recv().await {
            printed |= print_event(&event, show_tools);
        }
        printed
    });
    let reply = manager.send(session, text, events).await;
    let streamed = tokio::time::timeout(Duration::from_secs(1), printer).await.ok().and_then(Result::ok).unwrap_or(false);
    let reply = reply?;
    let mut out = std::io::stdout().lock();
    match &reply {
        TurnReply::Answer(_) if streamed => writeln!(out)?,
        other => writeln!(out, "{}", other.text())?,
    }
    out.flush()?;
    Ok(reply)
}

/// Shows one event; returns whether reply text went to stdout.
fn print_event(event: &TurnEvent, show_tools: bool) -> bool {
    match event {
        TurnEvent::Delta(text) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            true
        }
        TurnEvent::Restart => {
            eprintln!("\n[the connection to the model dropped; retrying]");
            false
        }
        TurnEvent::ToolStarted { name, arguments } if show_tools => {
            let preview: String = arguments.chars().take(80).collect();
            eprintln!("  ↳ {name} {preview}");
            false
        }
        _ => false,
    }
}
