//! Where the jobs are kept, behind a small compare-and-swap trait: a writer reads the jobs with
//! their [`Version`], edits them, and stores the result only if nobody wrote meanwhile (else it
//! reads again and retries). The workspace's `cron/jobs.json` ([`super::store::JobStore`]) is
//! today's one implementation; a shared store (a key-value bucket with revisions) is a second
//! implementation of [`JobStorage`], and nothing that schedules or edits jobs changes.
//!
//! The scheduler's *lease* is part of the trait too: one scheduler per store, held while it
//! runs and lost with its holder.

use std::fmt;

use chrono_tz::Tz;

use super::change::{Applied, Change};
use super::job::{CronJob, JobsFile};

mod error;
pub use error::StoreError;

/// How many times an edit is retried when another writer keeps getting in first.
const EDIT_TRIES: usize = 32;

/// One version of the stored jobs, as the store names it: any write, by anyone, gives a new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(String);

impl Version {
    /// A version named by the store (a file's identity and times, a bucket's revision).
    pub fn new(name: String) -> Version {
        Version(name)
    }
}

/// The scheduler's lease on a store: held while the scheduler runs, given up when dropped.
pub struct Lease {
    /// What keeps it (a locked file, a key renewed in the background).
    _held: Box<dyn Send + Sync>,
}

impl Lease {
    /// A lease kept alive by `held` (a locked file, a key renewed in the background).
    pub fn new(held: Box<dyn Send + Sync>) -> Lease {
        Lease { _held: held }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lease")
    }
}

/// Where the jobs are kept.
pub trait JobStorage: Send + Sync + fmt::Debug {
    /// The jobs and their version; `None` when nothing is stored yet. Stored jobs that cannot
    /// be read are kept aside by the store and reported as [`StoreError::Corrupt`] (the store
    /// then holds nothing).
    fn read(&self) -> Result<Option<(JobsFile, Version)>, StoreError>;

    /// The version stored now, without reading the jobs; `None` when nothing is stored.
    fn version(&self) -> Option<Version>;

    /// Stores `jobs` if the stored version is still `expected` (`None`: nothing is stored);
    /// answers the new version, or [`StoreError::Conflict`] when another writer got in first.
    fn replace(&self, expected: Option<&Version>, jobs: &JobsFile) -> Result<Version, StoreError>;

    /// The scheduler's lease, if no other scheduler holds it.
    fn try_scheduler_lease(&self) -> Result<Option<Lease>, StoreError>;

    /// Whether some scheduler (in this or another process) holds the lease.
    fn scheduler_running(&self) -> bool;

    /// The directory and file name to watch for changes from elsewhere, when the store is a
    /// local file; a store without one is looked at every few seconds.
    fn watched_file(&self) -> Option<(std::path::PathBuf, &'static str)>;

    /// The jobs (none when nothing is stored).
    fn load(&self) -> Result<JobsFile, StoreError> {
        Ok(self.read()?.map(|(jobs, _)| jobs).unwrap_or_default())
    }

    /// Edits the jobs with `edit` and stores them, retrying from a fresh read when another
    /// writer got in first; `edit` tells whether it changed anything (nothing is written then).
    fn edit(&self, edit: &mut dyn FnMut(&mut JobsFile) -> bool) -> Result<(), StoreError> {
        for _ in 0..EDIT_TRIES {
            let (mut jobs, version) = match self.read()? {
                Some((jobs, version)) => (jobs, Some(version)),
                None => (JobsFile::default(), None),
            };
            if !edit(&mut jobs) {
                return Ok(());
            }
            match self.replace(version.as_ref(), &jobs) {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(StoreError::Conflict)
    }

    /// Applies one change (stored only when it did something); `tz` is the default timezone
    /// of cron schedules.
    fn apply(&self, change: &Change, tz: Tz) -> Result<Applied, StoreError> {
        let mut applied = Applied::NotFound;
        self.edit(&mut |jobs| {
            applied = change.apply(&mut jobs.jobs, tz);
            matches!(applied, Applied::Changed(_) | Applied::Removed(_))
        })?;
        Ok(applied)
    }

    /// Adds a job, giving it a fresh id if its own is taken; answers with the job as stored.
    fn add(&self, mut job: CronJob, tz: Tz) -> Result<CronJob, StoreError> {
        while self.apply(&Change::Add(Box::new(job.clone())), tz)? == Applied::IdTaken {
            job.id = super::new_id();
        }
        Ok(job)
    }
}

/// A store in memory, for tests of code over any store.
#[cfg(test)]
pub(crate) mod bucket;

#[cfg(test)]
mod tests {
    use super::bucket::{Bucket, job};
    use super::*;

    #[test]
    fn an_edit_that_loses_the_race_reads_again_and_keeps_both_writers_jobs() {
        let bucket = Bucket::raced(3);
        bucket.add(job("mine"), chrono_tz::UTC).unwrap();
        let ids: Vec<String> = bucket.load().unwrap().jobs.into_iter().map(|job| job.id).collect();
        assert_eq!(ids, ["other-1", "other-2", "other-3", "mine"]);
    }

    #[test]
    fn a_store_that_never_lets_an_edit_through_gives_a_conflict_not_a_lost_edit() {
        let bucket = Bucket::raced(usize::MAX);
        let error = bucket.add(job("mine"), chrono_tz::UTC).unwrap_err();
        assert!(matches!(error, StoreError::Conflict), "{error}");
        assert!(bucket.load().unwrap().jobs.iter().all(|job| job.id != "mine"));
    }

    #[test]
    fn an_edit_that_changes_nothing_writes_nothing() {
        let bucket = Bucket::default();
        bucket.add(job("a"), chrono_tz::UTC).unwrap();
        let before = bucket.version();
        let applied = bucket.apply(&Change::Remove { id: "b".into() }, chrono_tz::UTC).unwrap();
        assert_eq!(applied, Applied::NotFound);
        assert_eq!(bucket.version(), before);
    }
}
