//! The outbox on disk: `<data dir>/outbox.jsonl`, one JSON line per change —
//! `{"pending": {…}}` before a reply's first attempt, `{"settled": <id>}` once it is delivered
//! or given up. Lines are appended and flushed to disk by one writer thread, which takes every
//! line queued meanwhile into the same write and the same `fsync` (so a burst of replies
//! costs one disk flush, and the actix thread never waits on the disk). At open, and when
//! settled lines pile up, the file is rewritten with only the pending replies (atomically).
//!
//! A crash can tear the last line only: it is dropped. Any other line that does not parse
//! makes the whole file corrupt: it is moved aside and reported (the policy of
//! [`crate::fsutil`]), the gateway starts with an empty outbox, and never writes over it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::outbox_store::{OutboxStore, StoredDelivery, Written};
use crate::fsutil::{self, CorruptFile, write_atomic};

/// The file's name in the data dir.
pub const FILE_NAME: &str = "outbox.jsonl";
/// Settled lines the file may gather before it is rewritten with the pending replies only.
const REWRITE_AFTER: usize = 1024;

/// One line of the file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    /// A reply about to be sent for the first time.
    Pending(StoredDelivery),
    /// A reply delivered or given up.
    Settled(u64),
}

/// Work for the writer thread.
enum Job {
    /// A line to append; who waits until it is on disk.
    Append(Line, Option<oneshot::Sender<Result<(), String>>>),
    /// Someone waits until everything queued before is on disk.
    Flush(oneshot::Sender<Result<(), String>>),
}

/// The outbox kept in a file of the data dir.
pub struct OutboxFile {
    /// The writer thread's queue; `None` when the file cannot be written (left in place).
    jobs: Option<mpsc::Sender<Job>>,
    /// Why the file cannot be written, when it cannot.
    unwritable: Option<String>,
    /// What the previous run left pending, until the gateway takes it.
    left: RefCell<Vec<StoredDelivery>>,
}

impl OutboxFile {
    /// Opens the outbox at `path` (usually `<data dir>/outbox.jsonl`): reads what a previous
    /// run left pending, rewrites the file with only that, and starts its writer thread.
    pub fn open(path: &Path) -> OutboxFile {
        let pending = match read(path) {
            Ok(pending) => pending,
            Err(unusable) => {
                let reason = unusable.to_string();
                tracing::error!(file = %path.display(), error = %reason, "the outbox file cannot be used; replies a previous run left pending are not resent");
                match unusable {
                    Unusable::Corrupt(CorruptFile::MovedAside { .. }) => Vec::new(),
                    _ => return OutboxFile::unwritable(reason),
                }
            }
        };
        if !pending.is_empty() {
            tracing::info!(replies = pending.len(), "replies a previous run left pending will be resent");
        }
        match Writer::start(path, &pending) {
            Ok(jobs) => OutboxFile { jobs: Some(jobs), unwritable: None, left: RefCell::new(pending) },
            Err(error) => {
                let reason = format!("cannot write {}: {error}", path.display());
                tracing::error!(%reason, "the outbox is kept in memory only; a restart loses pending replies");
                OutboxFile { left: RefCell::new(pending), ..OutboxFile::unwritable(reason) }
            }
        }
    }

    fn unwritable(reason: String) -> OutboxFile {
        OutboxFile { jobs: None, unwritable: Some(reason), left: RefCell::default() }
    }

    /// Queues the job `job` makes of a waiter; the waiter is told at once when there is no
    /// writer.
    fn queue(&self, job: impl FnOnce(oneshot::Sender<Result<(), String>>) -> Job) -> Written {
        let (tell, told) = oneshot::channel();
        let Some(jobs) = &self.jobs else {
            let _ = tell.send(Err(self.unwritable.clone().unwrap_or_default()));
            return told;
        };
        if let Err(mpsc::SendError(Job::Append(_, Some(tell)) | Job::Flush(tell))) = jobs.send(job(tell)) {
            let _ = tell.send(Err("the outbox writer stopped".to_owned()));
        }
        told
    }
}

impl OutboxStore for OutboxFile {
    fn left_pending(&self) -> Vec<StoredDelivery> {
        std::mem::take(&mut *self.left.borrow_mut())
    }

    fn record_pending(&self, delivery: &StoredDelivery) -> Written {
        let line = Line::Pending(delivery.clone());
        self.queue(|tell| Job::Append(line, Some(tell)))
    }

    fn record_settled(&self, id: u64) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(Job::Append(Line::Settled(id), None));
        }
    }

    fn flushed(&self) -> Written {
        self.queue(Job::Flush)
    }
}

/// Why the file could not be read.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    /// It exists but could not be read.
    #[error("cannot read it: {0}")]
    Read(io::Error),
    /// A line other than the last did not parse.
    #[error(transparent)]
    Corrupt(CorruptFile),
}

/// The replies pending in the file at `path`, oldest first (none when there is no file).
fn read(path: &Path) -> Result<Vec<StoredDelivery>, Unusable> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(Unusable::Read(error)),
    };
    let pending = parse(&bytes).map_err(|reason| Unusable::Corrupt(fsutil::move_aside(path, reason)))?;
    let mut pending: Vec<StoredDelivery> = pending.into_values().collect();
    pending.sort_by_key(|d| (d.since_ms, d.id));
    Ok(pending)
}

/// The pending replies the lines in `bytes` leave, by id; why not, when a line that is not a
/// torn last one does not parse.
fn parse(bytes: &[u8]) -> Result<HashMap<u64, StoredDelivery>, String> {
    let mut pending = HashMap::new();
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.len() - 1;
    for (number, text) in lines.iter().enumerate() {
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Line>(text) {
            Ok(Line::Pending(delivery)) => {
                pending.insert(delivery.id, delivery);
            }
            Ok(Line::Settled(id)) => {
                pending.remove(&id);
            }
            // The last line without its newline: a write a crash cut short.
            Err(_) if number == last => tracing::info!("dropped the outbox's last line, cut short by a crash"),
            Err(error) => return Err(format!("line {}: {error}", number + 1)),
        }
    }
    Ok(pending)
}

/// The writer thread's state: the file and the replies pending in it.
struct Writer {
    path: PathBuf,
    file: File,
    pending: HashMap<u64, StoredDelivery>,
    /// Lines in the file now.
    lines: usize,
}

impl Writer {
    /// Rewrites `path` with `pending` and starts the thread that appends to it.
    fn start(path: &Path, pending: &[StoredDelivery]) -> io::Result<mpsc::Sender<Job>> {
        let pending: HashMap<u64, StoredDelivery> = pending.iter().map(|d| (d.id, d.clone())).collect();
        let file = rewrite(path, &pending)?;
        let mut writer = Writer { path: path.to_path_buf(), file, lines: pending.len(), pending };
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new().name("outbox-writer".into()).spawn(move || writer.run(&queue))?;
        Ok(jobs)
    }

    /// Writes batches until every sender is gone.
    fn run(&mut self, queue: &mpsc::Receiver<Job>) {
        while let Ok(first) = queue.recv() {
            let batch: Vec<Job> = std::iter::once(first).chain(queue.try_iter()).collect();
            let mut bytes = Vec::new();
            let mut waiting = Vec::new();
            for job in batch {
                match job {
                    Job::Append(line, tell) => {
                        self.note(&line, &mut bytes);
                        waiting.extend(tell);
                    }
                    Job::Flush(tell) => waiting.push(tell),
                }
            }
            let outcome = self.append(&bytes).map_err(|e| format!("cannot write {}: {e}", self.path.display()));
            if let Err(error) = &outcome {
                tracing::warn!(%error, "the outbox could not record a change");
            }
            for tell in waiting {
                let _ = tell.send(outcome.clone());
            }
        }
    }

    /// Adds `line` to `bytes` and to what is pending.
    fn note(&mut self, line: &Line, bytes: &mut Vec<u8>) {
        match line {
            Line::Pending(delivery) => {
                self.pending.insert(delivery.id, delivery.clone());
            }
            Line::Settled(id) => {
                if self.pending.remove(id).is_none() {
                    return;
                }
            }
        }
        if serde_json::to_writer(&mut *bytes, line).is_ok() {
            bytes.push(b'\n');
            self.lines += 1;
        }
    }

    /// Appends `bytes` and flushes them to disk; rewrites the file once settled lines pile up.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        if self.lines > REWRITE_AFTER && self.lines > 4 * self.pending.len() {
            self.file = rewrite(&self.path, &self.pending)?;
            self.lines = self.pending.len();
        }
        Ok(())
    }
}

/// Replaces `path` with the `pending` replies' lines; returns it open for appending.
fn rewrite(path: &Path, pending: &HashMap<u64, StoredDelivery>) -> io::Result<File> {
    let mut ordered: Vec<&StoredDelivery> = pending.values().collect();
    ordered.sort_by_key(|d| (d.since_ms, d.id));
    let mut bytes = Vec::new();
    for delivery in ordered {
        serde_json::to_writer(&mut bytes, &Line::Pending(delivery.clone())).map_err(io::Error::other)?;
        bytes.push(b'\n');
    }
    write_atomic(path, &bytes)?;
    OpenOptions::new().append(true).open(path)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::gateway::router::reply::Reply;
    use crate::testing::TempDir;

    fn delivery(id: u64, text: &str) -> StoredDelivery {
        let reply = Reply::new("loopback", "c1", text.to_owned(), None, serde_json::json!({}));
        StoredDelivery::of(id, &reply, UNIX_EPOCH + Duration::from_secs(id))
    }

    fn written(told: Written) -> Result<(), String> {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(told).unwrap()
    }

    #[test]
    fn a_pending_reply_outlives_the_store_and_a_settled_one_does_not() {
        let dir = TempDir::new("outbox-file");
        let path = dir.path().join(FILE_NAME);
        {
            let store = OutboxFile::open(&path);
            written(store.record_pending(&delivery(1, "first"))).unwrap();
            written(store.record_pending(&delivery(2, "second"))).unwrap();
            store.record_settled(1);
            written(store.flushed()).unwrap();
        }
        let store = OutboxFile::open(&path);
        let left = store.left_pending();
        assert_eq!(left, vec![delivery(2, "second")]);
        assert!(store.left_pending().is_empty(), "handed out once");
        let lines = fs::read_to_string(&path).unwrap();
        assert_eq!(lines.lines().count(), 1, "rewritten with the pending reply only: {lines}");
    }

    #[test]
    fn a_last_line_cut_short_is_dropped_and_the_rest_kept() {
        let dir = TempDir::new("outbox-torn");
        let path = dir.path().join(FILE_NAME);
        let whole = serde_json::to_string(&Line::Pending(delivery(5, "kept"))).unwrap();
        fs::write(&path, format!("{whole}\n{{\"pending\": {{\"id\": 6, \"chan")).unwrap();
        assert_eq!(OutboxFile::open(&path).left_pending(), vec![delivery(5, "kept")]);
        assert!(fsutil::corrupt_copies(&path).is_empty());
    }

    #[test]
    fn a_line_that_does_not_parse_moves_the_file_aside_as_it_was() {
        let dir = TempDir::new("outbox-corrupt");
        let path = dir.path().join(FILE_NAME);
        let whole = serde_json::to_string(&Line::Pending(delivery(5, "kept"))).unwrap();
        let text = format!("garbage\n{whole}\n");
        fs::write(&path, &text).unwrap();
        let store = OutboxFile::open(&path);
        assert!(store.left_pending().is_empty());
        let copies = fsutil::corrupt_copies(&path);
        assert_eq!(copies.len(), 1);
        assert_eq!(fs::read_to_string(&copies[0]).unwrap(), text, "kept as it was");
        written(store.record_pending(&delivery(7, "new"))).unwrap();
        assert!(fs::read_to_string(&path).unwrap().contains("new"), "a fresh file is started");
    }

    #[test]
    fn settled_lines_do_not_pile_up() {
        let dir = TempDir::new("outbox-rewrite");
        let path = dir.path().join(FILE_NAME);
        let store = OutboxFile::open(&path);
        for id in 1..=2 * REWRITE_AFTER as u64 {
            drop(store.record_pending(&delivery(id, "x")));
            store.record_settled(id);
        }
        written(store.flushed()).unwrap();
        let lines = fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= REWRITE_AFTER + 2, "{lines} lines");
    }
}
