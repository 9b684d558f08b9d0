//! Where the WebSocket goes on from after a drop or a restart: the server's connection id and a
//! sequence number. After a drop, the channel asks for the events after the last one it read
//! (the posts it read are still queued in this process). The point kept on disk
//! (`websocket-resume.json` in the media directory) is more careful: the first event whose post
//! the kernel has not accepted yet, so a restarted channel gets that post again, as long as the
//! server still holds the events of the dead connection.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use oxibot_plugin::chat::write_atomically;
use oxibot_plugin::warn;
use serde_json::{Value, json};

/// The file's name inside the media directory.
pub const FILE_NAME: &str = "websocket-resume.json";

/// A connection to resume and the sequence number to resume it from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePoint {
    /// The server's id of the connection.
    pub connection_id: String,
    /// The sequence number of the first event wanted.
    pub next_seq: u64,
}

/// What the channel read and what the kernel accepted, shared by the WebSocket side and the
/// submitter; cheap to clone.
#[derive(Debug, Clone)]
pub struct Progress {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    /// The file kept on disk.
    path: PathBuf,
    /// The connection, once a `hello` named it.
    connection_id: Option<String>,
    /// One past the last event read.
    next_seq: u64,
    /// Events whose posts wait for the kernel.
    pending: BTreeSet<u64>,
}

impl Progress {
    /// Progress kept in `dir`, starting from the point saved there by an earlier run, if any.
    pub fn open(dir: &Path) -> Progress {
        let path = dir.join(FILE_NAME);
        let saved = load(&path);
        let inner = Inner {
            path,
            connection_id: saved.as_ref().map(|point| point.connection_id.clone()),
            next_seq: saved.map_or(0, |point| point.next_seq),
            pending: BTreeSet::new(),
        };
        Progress { inner: Arc::new(Mutex::new(inner)) }
    }

    /// Where a new socket resumes from: after the last event read.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        let inner = self.lock();
        let connection_id = inner.connection_id.clone()?;
        Some(ResumePoint { connection_id, next_seq: inner.next_seq })
    }

    /// A `hello` arrived; says whether it resumed the connection known before.
    pub fn hello(&self, connection_id: Option<String>, seq: u64) -> bool {
        let mut inner = self.lock();
        let resumed = connection_id.is_some() && inner.connection_id == connection_id;
        if !resumed {
            // The events of another connection can never be asked for again.
            inner.pending.clear();
            inner.connection_id = connection_id;
            inner.next_seq = seq + 1;
            inner.save();
        }
        resumed
    }

    /// Event `seq` was read.
    pub fn read(&self, seq: u64) {
        let mut inner = self.lock();
        inner.next_seq = inner.next_seq.max(seq + 1);
    }

    /// The post of event `seq` waits for the kernel.
    pub fn queued(&self, seq: u64) {
        self.lock().pending.insert(seq);
    }

    /// The post of event `seq` is done with (accepted, or left out).
    pub fn done(&self, seq: u64) {
        let mut inner = self.lock();
        inner.pending.remove(&seq);
        inner.save();
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Keeps the first event not done with; failures are only logged (a restart then starts a
    /// new connection).
    fn save(&self) {
        let Some(connection_id) = &self.connection_id else { return };
        let next_seq = self.pending.first().copied().unwrap_or(self.next_seq);
        let text = json!({"connectionId": connection_id, "sequenceNumber": next_seq}).to_string();
        if let Err(error) = write_atomically(&self.path, text.as_bytes()) {
            warn!("cannot keep the websocket position in {}: {error}", self.path.display());
        }
    }
}

/// The point saved by an earlier run; an unreadable file counts as none.
fn load(path: &Path) -> Option<ResumePoint> {
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let connection_id = saved["connectionId"].as_str().filter(|id| !id.is_empty())?.to_owned();
    Some(ResumePoint { connection_id, next_seq: saved["sequenceNumber"].as_u64()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-mm-resume-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_drop_resumes_after_the_last_event_read_but_a_restart_from_the_first_post_not_accepted() {
        let dir = temp_dir("points");
        let progress = Progress::open(&dir);
        assert_eq!(progress.resume_point(), None);
        assert!(!progress.hello(Some("c1".into()), 0));
        progress.read(1);
        progress.queued(1);
        progress.read(2);
        progress.queued(2);
        progress.read(3);
        progress.done(2);
        assert_eq!(progress.resume_point(), Some(ResumePoint { connection_id: "c1".into(), next_seq: 4 }));
        assert_eq!(Progress::open(&dir).resume_point(), Some(ResumePoint { connection_id: "c1".into(), next_seq: 1 }));
        progress.done(1);
        assert_eq!(Progress::open(&dir).resume_point(), Some(ResumePoint { connection_id: "c1".into(), next_seq: 4 }));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_hello_of_another_connection_starts_over() {
        let dir = temp_dir("new");
        let progress = Progress::open(&dir);
        progress.hello(Some("c1".into()), 0);
        progress.read(5);
        progress.queued(5);
        assert!(progress.hello(Some("c1".into()), 9), "the same id resumes");
        assert!(!progress.hello(Some("c2".into()), 0));
        assert_eq!(Progress::open(&dir).resume_point(), Some(ResumePoint { connection_id: "c2".into(), next_seq: 1 }));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
