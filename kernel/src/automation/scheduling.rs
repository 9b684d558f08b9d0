//! Scheduled jobs wired into the running kernel: the workspace's one scheduler (a
//! [`CronActor`], started only by the process that gets the scheduler lock) whose due jobs run
//! as turns through the [`Dispatcher`] — in the session they were made in, after its current
//! turn, the reply delivered like any reply — and the `cron` tool that goes with it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use actix::Addr;
use tokio::sync::{mpsc, oneshot};

use super::dispatch::{Dispatcher, RunRequest};
use crate::cron::actor::{CronActor, CronFire};
use crate::cron::handle::CronHandle;
use crate::cron::storage::{JobStorage, Lease};
use crate::cron::store::JobStore;
use crate::cron::timing::zone;
use crate::cron::tool::CronTool;
use crate::cron::{Tz, job::CronJob};
use crate::session::SessionKey;
use crate::turn::builtin::{BuiltinTool, TurnSource};

/// The scheduler this process runs; it stops scheduling (and lets another process take
/// over) when dropped with the process.
pub struct Scheduler {
    /// The running scheduler.
    actor: Addr<CronActor>,
    /// Held while this process is the workspace's scheduler (`None` when the caller holds
    /// the lease: a cluster's lead).
    _lease: Option<Lease>,
}

impl Scheduler {
    /// Starts the workspace's scheduler in this process when no other process runs one;
    /// due jobs become turns through `dispatcher`. `None` (logged) when another process
    /// schedules this workspace's jobs, or the lock cannot be taken.
    pub fn start(workspace: &Path, timezone: Tz, dispatcher: Dispatcher) -> Option<Scheduler> {
        let lease = match JobStore::new(workspace).try_scheduler_lease() {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                tracing::info!("another oxibot process runs this workspace's scheduled jobs");
                return None;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot take the scheduler lock; scheduled jobs run elsewhere or not at all");
                return None;
            }
        };
        let mut scheduler = Scheduler::start_leading(workspace, timezone, dispatcher, None);
        scheduler._lease = Some(lease);
        Some(scheduler)
    }

    /// Starts the scheduler of `workspace`'s jobs under a lease the caller holds (a cluster
    /// kernel's lead of the scheduler); stop it with [`crate::cron::actor::Halt`] when the
    /// lead ends.
    /// `first` (a cluster's record of firings) tells whether a due job's firing is the first
    /// for its due time; one fired already (before a failover) is not run again.
    pub fn start_leading(
        workspace: &Path,
        timezone: Tz,
        dispatcher: Dispatcher,
        first: Option<FirstFiring>,
    ) -> Scheduler {
        let (fire, due) = mpsc::unbounded_channel();
        let actor = CronActor::start(workspace, timezone, fire);
        actix::spawn(run_due_jobs(due, dispatcher, first));
        Scheduler { actor, _lease: None }
    }

    /// The scheduler's address.
    pub fn actor(&self) -> &Addr<CronActor> {
        &self.actor
    }
}

/// The configured timezone for schedules (UTC when unset or unknown, with a warning).
pub fn timezone(configured: Option<&str>) -> Tz {
    match configured {
        None => chrono_tz::UTC,
        Some(name) => zone(name).unwrap_or_else(|error| {
            tracing::warn!(%error, "agents.defaults.timezone is not a timezone; schedules use UTC");
            chrono_tz::UTC
        }),
    }
}

/// The `cron` tool for a kernel over `workspace`: talking to `scheduler` when this process
/// runs it, else editing the file (a scheduler elsewhere notices the change).
pub fn cron_tool(workspace: &Path, timezone: Tz, scheduler: Option<&Scheduler>) -> Arc<dyn BuiltinTool> {
    let handle = CronHandle::new(workspace, timezone);
    let handle = match scheduler {
        Some(scheduler) => handle.with_actor(scheduler.actor().clone()),
        None => handle,
    };
    Arc::new(CronTool::new(handle))
}

/// Whether a process runs `workspace`'s scheduled jobs (so a job added now will fire).
pub fn scheduler_running(workspace: &Path) -> bool {
    JobStore::new(workspace).scheduler_running()
}

/// Whether the firing of job `id` due at the given time (ms) is the first: a cluster's record.
pub type FirstFiring = Arc<dyn Fn(&str, i64) -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

async fn run_due_jobs(mut due: mpsc::UnboundedReceiver<CronFire>, dispatcher: Dispatcher, first: Option<FirstFiring>) {
    while let Some(fire) = due.recv().await {
        let CronFire { job, done, due_ms } = fire;
        if let (Some(first), Some(due_ms)) = (&first, due_ms)
            && !first(&job.id, due_ms).await
        {
            tracing::info!(job = %job.id, due_ms, "the job already fired for this due time (before a failover)");
            let _ = done.send(Ok(()));
            continue;
        }
        let Some(request) = turn_for(&job) else {
            let _ = done.send(Err("the job names no session to run in".to_owned()));
            continue;
        };
        let (answered, answer) = oneshot::channel();
        tracing::info!(job = %job.id, name = %job.name, session = %request.key, "running a scheduled job");
        if !dispatcher.run(RunRequest { done: Some(answered), ..request }) {
            let _ = done.send(Err("the kernel is shutting down".to_owned()));
            continue;
        }
        actix::spawn(async move {
            let result = answer.await.unwrap_or_else(|_| Err("the turn was dropped".to_owned()));
            let _ = done.send(result.map(|_| ()));
        });
    }
}

/// The turn a due job asks for.
fn turn_for(job: &CronJob) -> Option<RunRequest> {
    let target = job.payload.target()?;
    Some(RunRequest {
        key: SessionKey::from(target.session_key.as_str()),
        text: job.payload.message.clone(),
        source: TurnSource::Cron,
        job: Some(job.id.clone()),
        model: job.payload.extra.get("model").and_then(serde_json::Value::as_str).map(str::to_owned),
        deliver: true,
        done: None,
    })
}
