//! `CronHandle`: how the `cron` tool (and anything else in the kernel) edits jobs. With a
//! scheduler in the same process it tells the [`CronActor`] directly; without one (an
//! `oxibot agent` session while a gateway runs elsewhere, or none at all) it edits the file
//! under the lock, and a running scheduler notices through inotify.

use std::path::Path;
use std::sync::Arc;

use actix::Addr;
use chrono_tz::Tz;
use serde_json::Map;

use super::actor::{AddJob, CronActor, EnableJob, ListJobs, RemoveJob, Saved};
use super::change::{Applied, Change};
use super::job::{CronJob, JobState, JobTarget, MissedPolicy, Payload, Schedule, ScheduleKind};
use super::storage::JobStorage;
use super::store::JobStore;
use super::timing::{ScheduleError, check, first_run};
use super::{CronError, new_id, now_ms, sorted};

/// Longest default name, taken from the start of the message (as nanobot does).
const NAME_CHARS: usize = 30;

/// A job as asked for, before it has an id and a first run.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// A label; the start of the message when `None`.
    pub name: Option<String>,
    /// The instruction the turn starts with.
    pub message: String,
    /// When it runs.
    pub schedule: Schedule,
    /// The session it runs in.
    pub target: JobTarget,
    /// Delete a one-shot job after its run (instead of disabling it).
    pub delete_after_run: bool,
    /// What to do about a missed run (`None`: the default for its kind).
    pub missed: Option<MissedPolicy>,
}

impl NewJob {
    /// The job to store: checked, with a fresh id and its first run after `now_ms`.
    pub fn into_job(self, now_ms: i64, tz: Tz) -> Result<CronJob, CronError> {
        let message = self.message.trim();
        if message.is_empty() {
            return Err(CronError::MissingMessage);
        }
        check(&self.schedule, tz)?;
        let next = first_run(&self.schedule, now_ms, tz).ok_or_else(|| match self.schedule.kind {
            ScheduleKind::At => ScheduleError::InPast {
                time: super::timing::format_ms(self.schedule.at_ms.unwrap_or_default(), tz),
                now: super::timing::format_ms(now_ms, tz),
            },
            _ => ScheduleError::Incomplete(self.schedule.kind.as_str().to_owned()),
        })?;
        let name = match self.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            Some(name) => name.to_owned(),
            None => message.chars().take(NAME_CHARS).collect(),
        };
        Ok(CronJob {
            id: new_id(),
            name,
            enabled: true,
            schedule: self.schedule,
            payload: Payload::turn(message, &self.target),
            state: JobState { next_run_at_ms: Some(next), ..JobState::default() },
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            delete_after_run: self.delete_after_run,
            missed: self.missed,
            extra: Map::new(),
        })
    }
}

/// Edits jobs through the scheduler when one runs in this process, else through the store.
#[derive(Clone)]
pub struct CronHandle {
    /// Where the jobs are kept.
    store: Arc<dyn JobStorage>,
    /// Default timezone of cron schedules and naive times.
    tz: Tz,
    /// The scheduler in this process, if any.
    actor: Option<Addr<CronActor>>,
}

impl CronHandle {
    /// A handle on `<workspace>/cron/jobs.json` with no scheduler in this process; `timezone`
    /// is the configured one (`agents.defaults.timezone`, UTC when unset).
    pub fn new(workspace: &Path, timezone: Tz) -> CronHandle {
        CronHandle { store: Arc::new(JobStore::new(workspace)), tz: timezone, actor: None }
    }

    /// The same handle telling `actor` (the scheduler started on the same workspace).
    pub fn with_actor(mut self, actor: Addr<CronActor>) -> CronHandle {
        self.actor = Some(actor);
        self
    }

    /// The default timezone.
    pub fn timezone(&self) -> Tz {
        self.tz
    }

    /// Adds a job; answers with it as stored.
    pub async fn add(&self, job: NewJob) -> Result<CronJob, CronError> {
        let job = job.into_job(now_ms(), self.tz)?;
        if let Some(actor) = &self.actor {
            let job = actor.send(AddJob(job)).await.map_err(|_| CronError::Gone)?;
            return saved(actor).await.map(|()| job);
        }
        let (store, tz) = (self.store.clone(), self.tz);
        blocking(move || Ok(store.add(job, tz)?)).await
    }

    /// Every job, soonest next run first.
    pub async fn list(&self) -> Result<Vec<CronJob>, CronError> {
        if let Some(actor) = &self.actor {
            return actor.send(ListJobs).await.map_err(|_| CronError::Gone);
        }
        let store = self.store.clone();
        blocking(move || Ok(sorted(store.load()?.jobs))).await
    }

    /// Removes a job; answers with it.
    pub async fn remove(&self, id: &str) -> Result<CronJob, CronError> {
        if let Some(actor) = &self.actor {
            let job = actor.send(RemoveJob(id.to_owned())).await.map_err(|_| CronError::Gone)??;
            return saved(actor).await.map(|()| job);
        }
        self.apply(Change::Remove { id: id.to_owned() }).await
    }

    /// Enables or disables a job; answers with it.
    pub async fn set_enabled(&self, id: &str, enabled: bool) -> Result<CronJob, CronError> {
        if let Some(actor) = &self.actor {
            let job = actor.send(EnableJob { id: id.to_owned(), enabled }).await.map_err(|_| CronError::Gone)??;
            return saved(actor).await.map(|()| job);
        }
        self.apply(Change::SetEnabled { id: id.to_owned(), enabled, now_ms: now_ms() }).await
    }

    async fn apply(&self, change: Change) -> Result<CronJob, CronError> {
        let (store, tz) = (self.store.clone(), self.tz);
        blocking(move || match store.apply(&change, tz)? {
            Applied::Changed(job) | Applied::Removed(job) => Ok(job),
            Applied::NotFound | Applied::IdTaken => Err(CronError::NotFound(change.id().to_owned())),
        })
        .await
    }
}

/// Runs file work off the async thread (the lock may be held by another process).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CronError> + Send + 'static,
) -> Result<T, CronError> {
    tokio::task::spawn_blocking(work).await.map_err(|_| CronError::Gone)?
}

/// Waits until the scheduler's changes so far are in the jobs file.
async fn saved(actor: &Addr<CronActor>) -> Result<(), CronError> {
    match actor.send(Saved).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(CronError::NotSaved),
        Err(_) => Err(CronError::Gone),
    }
}
