//! Scheduled jobs: `<workspace>/cron/jobs.json` in nanobot's format, the scheduler that runs
//! them, and the `cron` tool the model schedules them with.
//!
//! Code map: [`job`] holds the file's types; [`expr`] reads 5-field cron expressions (Dream's
//! schedule uses it too) and [`timing`] computes next runs and reads typed schedules;
//! [`change`] holds every edit as a value that applies alike to the stored jobs and to the
//! scheduler's memory; [`storage`] is the compare-and-swap trait the jobs are kept behind, and
//! [`store`] its one implementation, the file, written under an advisory lock. The
//! scheduler is [`actor::CronActor`] (one timer, a heap of next runs), with its store thread
//! ([`worker`]) and an inotify watch ([`watch`]). [`handle::CronHandle`] edits jobs through
//! the scheduler or the file, and [`tool::CronTool`] is the model's `cron` tool on top of it.
//!
//! Who runs a due job is not decided here: the scheduler sends a [`actor::CronFire`] to the
//! channel it was started with and records the outcome the receiver answers.

pub mod actor;
pub mod change;
pub mod expr;
pub mod handle;
pub mod job;
pub mod storage;
pub mod store;
pub mod timing;
pub mod tool;
pub mod worker;

use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};

pub use actor::{CronActor, CronFire};
/// The timezone type every schedule is computed in.
pub use chrono_tz::Tz;
pub use handle::{CronHandle, NewJob};
pub use job::{CronJob, JobTarget};
pub use tool::CronTool;

use store::StoreError;
use timing::ScheduleError;

/// Why a job operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The jobs file could not be used.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The schedule is not one that can run.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// A job needs a message to run with.
    #[error("a job needs a message: what to do when it runs")]
    MissingMessage,
    /// No job has that id.
    #[error("no job with id {0}")]
    NotFound(String),
    /// The job is running already.
    #[error("job {0} is running already")]
    Running(String),
    /// The change is in force, but the jobs file could not be written yet (retried).
    #[error("the change is in force but could not be saved to the jobs file yet (see the log); it is retried")]
    NotSaved,
    /// The scheduler (or the store task) is gone.
    #[error("the scheduler is not running")]
    Gone,
}

/// A fresh 8-hex-digit id (nanobot's form).
pub fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_i64(chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default());
    format!("{:08x}", hasher.finish() as u32)
}

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Jobs soonest next run first; jobs that will not run last, by name.
pub fn sorted(mut jobs: Vec<CronJob>) -> Vec<CronJob> {
    jobs.sort_by(|a, b| {
        let key = |job: &CronJob| (job.due_at().is_none(), job.due_at().unwrap_or_default());
        key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
    });
    jobs
}
