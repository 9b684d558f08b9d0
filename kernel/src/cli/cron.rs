//! `oxibot cron list|add|remove|enable|disable|run`: scheduled jobs from the shell. Every
//! edit goes through `<workspace>/cron/jobs.json` under its lock; a running gateway notices
//! it at once.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use chrono_tz::Tz;
use clap::{Args, Subcommand};
use oxibot_kernel::agent::SessionManager;
use oxibot_kernel::cron::change::{Applied, Change};
use oxibot_kernel::cron::job::{CronJob, JobTarget, MissedPolicy, RunRecord};
use oxibot_kernel::cron::storage::JobStorage as _;
use oxibot_kernel::cron::store::{JobStore, StoreError};
use oxibot_kernel::cron::timing::{ScheduleInput, describe, format_ms, zone};
use oxibot_kernel::cron::{NewJob, now_ms, sorted};
use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_kernel::services::Services;
use oxibot_kernel::session::location::most_recent;
use oxibot_kernel::session::{SessionKey, SessionStore};

use super::CommonArgs;
use super::agent::with_retry_override;
use super::kernel::Setup;
use super::stream::Style;
use super::turn::send;

/// The `cron` subcommands.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// List every job: id, name, schedule, next run and how its last run went.
    List {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Add a job: a message the assistant acts on, in a session, on a schedule.
    ///
    /// Give exactly one of --every, --cron or --at. Examples:
    ///   oxibot cron add -m "Summarise my inbox" --cron "0 8 * * 1-5" --tz Europe/Berlin
    ///   oxibot cron add -m "Stretch!" --every 3600 --session telegram:12345
    ///   oxibot cron add -m "Call the dentist" --at 2026-12-01T09:00
    #[command(verbatim_doc_comment)]
    Add {
        /// What the assistant is asked to do when the job runs.
        #[arg(short, long)]
        message: String,
        /// A label (default: the start of the message).
        #[arg(short, long)]
        name: Option<String>,
        #[command(flatten)]
        schedule: ScheduleArgs,
        /// The IANA timezone of --cron, and of an --at without an offset [default:
        /// agents.defaults.timezone, else UTC].
        #[arg(long, value_name = "ZONE")]
        tz: Option<String>,
        /// The chat the job runs in and replies to (`channel:chat_id`, e.g. `telegram:12345`)
        /// [default: the chat a person wrote from most recently; `cli:direct` when none has].
        #[arg(short, long)]
        session: Option<String>,
        /// A run missed while no gateway was running: `once` runs it at start, `skip` drops it
        /// [default: once for --at, skip otherwise].
        #[arg(long, value_name = "POLICY")]
        missed: Option<MissedPolicy>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Remove a job.
    Remove {
        /// The job's id (see `oxibot cron list`).
        id: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Enable a job (its next run counts from now).
    Enable {
        /// The job's id.
        id: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Disable a job (it stays listed and does not run).
    Disable {
        /// The job's id.
        id: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Run a job now, in this process, and print the reply (it is not sent to the job's chat).
    ///
    /// The turn runs in the job's session like `oxibot agent -m`; the run is recorded in the
    /// job's history. A one-shot job is then disabled (or deleted), as after a scheduled run.
    Run {
        /// The job's id.
        id: String,
        /// Print the reply as it comes, without Markdown styling, even on a terminal.
        #[arg(long)]
        no_markdown: bool,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// When a job runs: exactly one of the three.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ScheduleArgs {
    /// Run every SECS seconds.
    #[arg(long, value_name = "SECS")]
    every: Option<i64>,
    /// Run on a 5-field cron expression (minute hour day-of-month month day-of-week).
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// Run once at an ISO time (`2026-12-01T09:00`; without an offset, in
    /// agents.defaults.timezone).
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
}

/// Runs a `cron` subcommand.
pub fn run(command: CronCommand) -> anyhow::Result<ExitCode> {
    match command {
        CronCommand::List { common } => list(&Jobs::open(&common)?),
        CronCommand::Add { message, name, schedule, tz, session, missed, common } => {
            let input = ScheduleInput {
                every_seconds: schedule.every,
                cron_expr: schedule.cron.as_deref(),
                tz: tz.as_deref(),
                at: schedule.at.as_deref(),
                delay: None,
            };
            let jobs = Jobs::open(&common)?;
            let destination = session.unwrap_or_else(|| jobs.default_destination());
            add(&jobs, message, name, input, &destination, missed)
        }
        CronCommand::Remove { id, common } => {
            let jobs = Jobs::open(&common)?;
            let Some(job) = jobs.edit(Change::Remove { id: id.clone() })? else { return Ok(not_found(&id)) };
            println!("Removed job '{}' ({}).", job.name, job.id);
            Ok(ExitCode::SUCCESS)
        }
        CronCommand::Enable { id, common } => enable(&Jobs::open(&common)?, &id, true),
        CronCommand::Disable { id, common } => enable(&Jobs::open(&common)?, &id, false),
        CronCommand::Run { id, no_markdown, common } => run_now(&common, &id, no_markdown),
    }
}

/// The jobs file of the configured workspace, with the timezones to read and show times in.
struct Jobs {
    store: JobStore,
    /// `agents.defaults.timezone` (UTC when unset): for cron fields and naive times.
    tz: Tz,
    /// Whether a timezone is configured (else times are shown in the machine's local time).
    configured: bool,
    /// The workspace's session directory, where the most recent chat is found.
    sessions: SessionStore,
}

impl Jobs {
    fn open(common: &CommonArgs) -> anyhow::Result<Jobs> {
        let setup = Setup::load(common)?;
        Jobs::of(&setup)
    }

    fn of(setup: &Setup) -> anyhow::Result<Jobs> {
        let configured = setup.settings.config.agents.defaults.timezone.as_deref().filter(|t| !t.trim().is_empty());
        let tz = match configured {
            Some(name) => zone(name).with_context(|| "agents.defaults.timezone".to_owned())?,
            None => chrono_tz::UTC,
        };
        let sessions = SessionStore::for_workspace(&setup.workspace, &paths::data_dir());
        Ok(Jobs { store: JobStore::new(&setup.workspace), tz, configured: configured.is_some(), sessions })
    }

    /// Where a job replies when `--session` is not given: the chat a person wrote from most
    /// recently, which hears the reply whenever a gateway runs; `cli:direct` when no chat has
    /// talked to the assistant yet (the reply then waits in that session, and we say so).
    fn default_destination(&self) -> String {
        if let Some(chat) = most_recent(self.sessions.dir(), reaches_a_person) {
            eprintln!("Replies go to {chat}, the chat used most recently (--session chooses another).");
            return chat;
        }
        eprintln!(
            "No chat has talked to the assistant yet, so replies stay in the session cli:direct: \
             read them with `oxibot agent --session cli:direct`, or give --session telegram:<chat id> \
             (any channel:chat) to have them sent."
        );
        "cli:direct".to_owned()
    }

    /// Applies a change; `None` when no job has its id.
    fn edit(&self, change: Change) -> anyhow::Result<Option<CronJob>> {
        match self.store.apply(&change, self.tz)? {
            Applied::Changed(job) | Applied::Removed(job) => Ok(Some(job)),
            Applied::NotFound | Applied::IdTaken => Ok(None),
        }
    }

    /// A time as the user reads it: in the configured timezone, else the machine's.
    fn show(&self, ms: i64) -> String {
        if self.configured {
            return format_ms(ms, self.tz);
        }
        match chrono::DateTime::from_timestamp_millis(ms) {
            Some(t) => t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string(),
            None => format!("{ms} ms"),
        }
    }

    fn zone_label(&self) -> String {
        if self.configured { self.tz.name().to_owned() } else { "local".to_owned() }
    }
}

fn list(jobs: &Jobs) -> anyhow::Result<ExitCode> {
    let loaded = jobs.store.load();
    let copies = jobs.store.corrupt_copies();
    let code = match loaded {
        Ok(file) if file.jobs.is_empty() => {
            println!("No scheduled jobs.");
            ExitCode::SUCCESS
        }
        Ok(file) => {
            print_table(jobs, &sorted(file.jobs));
            ExitCode::SUCCESS
        }
        Err(error @ (StoreError::Corrupt { .. } | StoreError::CorruptInPlace { .. })) => {
            println!("No jobs listed: {error}");
            ExitCode::FAILURE
        }
        Err(error) => return Err(error.into()),
    };
    if !copies.is_empty() {
        println!();
        println!("Unreadable jobs files kept aside (fix one and move it back to {}):", jobs.store.path().display());
        for copy in copies {
            println!("  {}", copy.display());
        }
    }
    Ok(code)
}

fn print_table(jobs: &Jobs, list: &[CronJob]) {
    let rows: Vec<[String; 6]> = list
        .iter()
        .map(|job| {
            let next = match job.due_at() {
                Some(at) => jobs.show(at),
                None if !job.runs_turn() => format!("({}: not run by oxibot)", job.payload.kind),
                None if !job.enabled => "disabled".to_owned(),
                None => "-".to_owned(),
            };
            let last = match (&job.state.last_status, job.state.last_run_at_ms) {
                (Some(status), Some(at)) => format!("{} {}", status.as_str(), jobs.show(at)),
                _ => "-".to_owned(),
            };
            let replies_to = job.payload.target().map_or_else(|| "-".to_owned(), |target| target.session_key);
            [job.id.clone(), clip(&job.name, 28), describe(&job.schedule, jobs.tz), replies_to, next, last]
        })
        .collect();
    let header = [
        "ID".to_owned(),
        "NAME".to_owned(),
        "SCHEDULE".to_owned(),
        "REPLIES TO".to_owned(),
        format!("NEXT RUN ({})", jobs.zone_label()),
        "LAST RUN".to_owned(),
    ];
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

/// Whether a reply to session `key` is delivered to a person by a channel: not the terminal's
/// own sessions, the heartbeat's, nor the api channel's (whose replies answer a request).
fn reaches_a_person(key: &str) -> bool {
    let key = SessionKey::from_text(key);
    key.as_str().contains(':') && !matches!(key.channel(), "cli" | "heartbeat" | "cron" | "api" | "system")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut clipped: String = text.chars().take(max - 1).collect();
    clipped.push('…');
    clipped
}

fn add(
    jobs: &Jobs,
    message: String,
    name: Option<String>,
    input: ScheduleInput,
    session: &str,
    missed: Option<MissedPolicy>,
) -> anyhow::Result<ExitCode> {
    let now = now_ms();
    let built = input.build(now, jobs.tz)?;
    let new =
        NewJob { name, message, schedule: built, target: JobTarget::session(session), delete_after_run: false, missed };
    let job = jobs.store.add(new.into_job(now, jobs.tz)?, jobs.tz)?;
    let next = job.state.next_run_at_ms.map_or_else(|| "-".to_owned(), |at| jobs.show(at));
    println!(
        "Added job '{}' (id: {}), {}, replying to {session}; next run {next}.",
        job.name,
        job.id,
        describe(&job.schedule, jobs.tz)
    );
    Ok(ExitCode::SUCCESS)
}

fn enable(jobs: &Jobs, id: &str, enabled: bool) -> anyhow::Result<ExitCode> {
    let change = Change::SetEnabled { id: id.to_owned(), enabled, now_ms: now_ms() };
    let Some(job) = jobs.edit(change)? else { return Ok(not_found(id)) };
    match (enabled, job.state.next_run_at_ms) {
        (false, _) => println!("Disabled job '{}' ({}).", job.name, job.id),
        (true, Some(next)) => println!("Enabled job '{}' ({}); next run {}.", job.name, job.id, jobs.show(next)),
        (true, None) => {
            println!("Enabled job '{}' ({}), but it has no run ahead (a time that has passed).", job.name, job.id)
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn not_found(id: &str) -> ExitCode {
    eprintln!("error: no job with id {id} (see `oxibot cron list`)");
    ExitCode::FAILURE
}

/// Runs the job's turn here, like `oxibot agent -m`, and records the run.
fn run_now(common: &CommonArgs, id: &str, no_markdown: bool) -> anyhow::Result<ExitCode> {
    let setup = Setup::load(common)?;
    let jobs = Jobs::of(&setup)?;
    let Some(job) = jobs.store.load()?.jobs.into_iter().find(|job| job.id == id) else { return Ok(not_found(id)) };
    if !job.runs_turn() {
        anyhow::bail!("job {id} is a nanobot '{}' job, which oxibot does not run", job.payload.kind);
    }
    let session = job.payload.target().map_or_else(|| "cli:direct".to_owned(), |target| target.session_key);
    let style = Style::detect(no_markdown);
    let provider = with_retry_override(
        Provider::from_config(&setup.settings.config.llm()).context("cannot use the configured model")?,
    )?;
    let started_ms = now_ms();
    let started = Instant::now();
    let outcome = actix::System::new().block_on(async {
        let host = setup.start_host()?;
        host.wait_settled(setup.startup_wait()).await;
        let services =
            Services::new(setup.settings.clone(), setup.workspace.clone(), &paths::data_dir(), provider, host, true)
                .with_nanobot_sessions(setup.nanobot_sessions())
                .with_background_consolidation(false);
        let manager = SessionManager::new(Arc::new(services));
        let reply = send(&manager, &session, &job.payload.message, style, None, None).await;
        manager.services().host().shutdown().await;
        anyhow::Ok(reply.map(|_| ()).map_err(|error| format!("{error:#}")))
    })?;
    let duration = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let run = RunRecord::new(started_ms, duration, outcome.clone());
    jobs.store.apply(&Change::Ran { id: job.id.clone(), run, due_ms: None, now_ms: now_ms() }, jobs.tz)?;
    match outcome {
        Ok(()) => {
            eprintln!("Recorded the run of job '{}' ({}): ok.", job.name, job.id);
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {error}");
            eprintln!("Recorded the run of job '{}' ({}): error.", job.name, job.id);
            Ok(ExitCode::FAILURE)
        }
    }
}
