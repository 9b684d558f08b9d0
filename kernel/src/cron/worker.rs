//! The scheduler's store thread: it owns the file side of the jobs, applies the scheduler's
//! changes to it (several at a time when they queue up), and reads the file again when
//! another process changed it, so the scheduler's event loop never waits on disk.
//!
//! It keeps the store's last good content. An edit from elsewhere is merged: the jobs are read,
//! the changes not yet written are applied on top, and the scheduler gets the result (a write
//! that loses the race to another writer reads again and merges the same way). A file that no
//! longer parses is moved aside by the store and replaced by the last good content; a file
//! that disappeared is written back, so a running scheduler never loses its jobs.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use chrono_tz::Tz;

use super::change::{Change, fill_next_run};
use super::job::{CronJob, JobsFile};
use super::storage::{JobStorage, Version};
use super::store::StoreError;

/// How long to wait before retrying a write that failed (a full disk, say).
const RETRY: Duration = Duration::from_secs(10);
/// How many times one sync reads again after losing a write to another writer.
const SYNC_TRIES: usize = 8;

/// Now in µs since the epoch (the scheduler's clock; jobs count in ms, timers in µs).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// What the scheduler asks of the thread.
pub enum Command {
    /// Apply a change; `seq` numbers the scheduler's changes from 1.
    Apply {
        /// The change's number.
        seq: u64,
        /// The change.
        change: Change,
    },
    /// The `cron/` directory changed: read the file again if someone else wrote it.
    Check,
    /// Answer once every earlier command is done and written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// What the thread tells the scheduler.
#[derive(Debug)]
pub enum Report {
    /// Changes up to `through` are in the thread's copy, and written when `saved` (else a
    /// write failed and is being retried).
    Applied {
        /// The last change applied.
        through: u64,
        /// Whether they are in the file (written, flushed and renamed into place).
        saved: bool,
    },
    /// Someone else changed the file: these are the jobs now, with the scheduler's changes
    /// up to `through` applied.
    Loaded {
        /// The last change included.
        through: u64,
        /// Every job.
        jobs: Vec<CronJob>,
    },
}

/// The thread's state.
pub struct Worker {
    /// Where the jobs are kept.
    pub store: Arc<dyn JobStorage>,
    /// Default timezone of cron schedules.
    pub tz: Tz,
    /// Now, for next runs of jobs another process wrote without one.
    pub clock: Clock,
    /// The file's content as last read or written, with `pending` applied.
    pub cache: JobsFile,
    /// The version of the store `cache` was read from or written as.
    pub stamp: Option<Version>,
    /// Changes in `cache` that are not on disk yet.
    pub pending: Vec<Change>,
    /// The number of the last change applied.
    pub applied: u64,
    /// Sends reports to the scheduler.
    pub report: Box<dyn Fn(Report) + Send>,
}

impl Worker {
    /// Serves commands until the scheduler goes away, then writes what is still pending.
    pub fn run(mut self, commands: Receiver<Command>) {
        let mut held: Option<Command> = None;
        loop {
            let command = match held.take() {
                Some(command) => command,
                None if self.pending.is_empty() => match commands.recv() {
                    Ok(command) => command,
                    Err(_) => break,
                },
                None => match commands.recv_timeout(RETRY) {
                    Ok(command) => command,
                    Err(RecvTimeoutError::Timeout) => {
                        self.sync();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            match command {
                Command::Apply { seq, change } => {
                    self.take(seq, &change);
                    // Changes that queued up meanwhile go into the same write.
                    loop {
                        match commands.try_recv() {
                            Ok(Command::Apply { seq, change }) => self.take(seq, &change),
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.sync();
                    (self.report)(Report::Applied { through: self.applied, saved: self.pending.is_empty() });
                }
                Command::Check => self.sync(),
                Command::Flush(done) => {
                    self.sync();
                    let _ = done.send(());
                }
            }
        }
        if !self.pending.is_empty() {
            self.sync();
        }
    }

    fn take(&mut self, seq: u64, change: &Change) {
        change.apply(&mut self.cache.jobs, self.tz);
        self.pending.push(change.clone());
        self.applied = seq;
    }

    /// Brings store and copy together: reads the store when someone else wrote it (merging
    /// the pending changes), writes when there is something to write.
    fn sync(&mut self) {
        for _ in 0..SYNC_TRIES {
            match self.try_sync() {
                Err(StoreError::Conflict) => continue,
                Err(error) => tracing::error!(%error, "cannot save the cron jobs; will retry"),
                Ok(()) => {}
            }
            return;
        }
        tracing::warn!("the cron jobs kept changing while the scheduler saved its own changes; will retry");
    }

    /// One attempt of [`Worker::sync`]; a [`StoreError::Conflict`] when another writer got in
    /// between its read and its write.
    fn try_sync(&mut self) -> Result<(), StoreError> {
        let mut rewrite = !self.pending.is_empty();
        let mut reload = false;
        if self.store.version() != self.stamp {
            match self.store.read() {
                Ok(Some((file, version))) => {
                    self.cache = file;
                    self.stamp = Some(version);
                    for change in &self.pending {
                        change.apply(&mut self.cache.jobs, self.tz);
                    }
                    let now = (self.clock)() / 1000;
                    for job in &mut self.cache.jobs {
                        rewrite |= fill_next_run(job, now, self.tz);
                    }
                    reload = true;
                }
                Ok(None) if self.cache.jobs.is_empty() => self.stamp = None,
                Ok(None) => {
                    tracing::warn!("the cron jobs disappeared from their store; writing the scheduler's jobs back");
                    self.stamp = None;
                    rewrite = true;
                }
                // Moved aside and logged by the store; the last good jobs take its place.
                Err(StoreError::Corrupt { .. }) => {
                    self.stamp = None;
                    rewrite = true;
                }
                Err(error) => return Err(error),
            }
        }
        if rewrite {
            let version = self.store.replace(self.stamp.as_ref(), &self.cache)?;
            self.stamp = Some(version);
            self.pending.clear();
        }
        if reload {
            (self.report)(Report::Loaded { through: self.applied, jobs: self.cache.jobs.clone() });
        }
        Ok(())
    }
}
