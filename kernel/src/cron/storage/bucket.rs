//! A job store in memory with a revision counter, as a key-value bucket keeps one, for tests
//! of code that works over any [`JobStorage`]; it can let another writer get in first.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Map;

use super::{JobStorage, Lease, StoreError, Version};
use crate::cron::job::{CronJob, JobState, JobsFile, Payload, Schedule};

/// The jobs and their revision in memory; another writer adds a job of its own just before
/// each of the first `interleaved` replaces.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    /// The jobs and their revision.
    held: Mutex<Option<(JobsFile, u64)>>,
    /// How many more replaces another writer gets in before.
    pub(crate) interleaved: AtomicUsize,
}

/// A job running every minute, named by its id.
pub(crate) fn job(id: &str) -> CronJob {
    CronJob {
        id: id.into(),
        name: id.into(),
        enabled: true,
        schedule: Schedule::every(60_000),
        payload: Payload::default(),
        state: JobState::default(),
        created_at_ms: 0,
        updated_at_ms: 0,
        delete_after_run: false,
        missed: None,
        extra: Map::new(),
    }
}

impl Bucket {
    /// An empty bucket where another writer gets in before the first `writes` replaces.
    pub(crate) fn raced(writes: usize) -> Bucket {
        Bucket { interleaved: AtomicUsize::new(writes), ..Bucket::default() }
    }

    fn version_of(held: &Option<(JobsFile, u64)>) -> Option<Version> {
        held.as_ref().map(|(_, revision)| Version::new(revision.to_string()))
    }

    fn other_writer_adds(held: &mut Option<(JobsFile, u64)>) {
        let (mut jobs, revision) = held.take().unwrap_or_default();
        let n = revision + 1;
        jobs.jobs.push(job(&format!("other-{n}")));
        *held = Some((jobs, n));
    }
}

impl JobStorage for Bucket {
    fn read(&self) -> Result<Option<(JobsFile, Version)>, StoreError> {
        let held = self.held.lock().unwrap();
        Ok(held.as_ref().map(|(jobs, revision)| (jobs.clone(), Version::new(revision.to_string()))))
    }

    fn version(&self) -> Option<Version> {
        Bucket::version_of(&self.held.lock().unwrap())
    }

    fn replace(&self, expected: Option<&Version>, jobs: &JobsFile) -> Result<Version, StoreError> {
        let mut held = self.held.lock().unwrap();
        if self.interleaved.load(Ordering::SeqCst) > 0 {
            self.interleaved.fetch_sub(1, Ordering::SeqCst);
            Bucket::other_writer_adds(&mut held);
        }
        if Bucket::version_of(&held).as_ref() != expected {
            return Err(StoreError::Conflict);
        }
        let revision = held.as_ref().map_or(1, |(_, revision)| revision + 1);
        *held = Some((jobs.clone(), revision));
        Ok(Version::new(revision.to_string()))
    }

    fn try_scheduler_lease(&self) -> Result<Option<Lease>, StoreError> {
        Ok(Some(Lease::new(Box::new(()))))
    }

    fn scheduler_running(&self) -> bool {
        false
    }

    fn watched_file(&self) -> Option<(std::path::PathBuf, &'static str)> {
        None
    }
}
