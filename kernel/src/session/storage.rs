//! `SessionStorage`: the one way the kernel's sessions reach their durable state — the
//! history, the metadata line, and the inbox and journal records. [`SessionStore`] (the
//! JSONL files) is today's only implementation; a store on another medium (a JetStream
//! stream per session, see `SCALE-OUT.md`) is a new implementation of this trait.
//!
//! **Invariant:** one writer per session: the caller (the session actor) owns each
//! [`Session`] and hands it to the store; the store keeps no locks and no session state.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use super::journal::{OPEN_INBOX_KEY, Record};
use super::location::header_of;
use super::{LoadedSession, Session, SessionError, SessionStore};
use crate::message::ChatMessage;

/// Where sessions are kept.
pub trait SessionStorage: Send + Sync + std::fmt::Debug {
    /// Session `key` as stored, repaired after a crash, or a new empty one.
    fn load(&self, key: &str) -> Result<LoadedSession, SessionError>;

    /// Adds `messages`, then `records`, to the session and the store, all or nothing.
    fn append_with_records(
        &self,
        session: &mut Session,
        messages: Vec<ChatMessage>,
        records: Vec<Record>,
    ) -> Result<(), SessionError>;

    /// Stores changed metadata or consolidation cursor.
    fn save_metadata(&self, session: &mut Session) -> Result<(), SessionError>;

    /// Replaces the stored session with `session` (its history changed).
    fn rewrite(&self, session: &mut Session) -> Result<(), SessionError>;

    /// The keys of the sessions that may hold a message accepted and never answered: those
    /// whose inbox is marked open ([`OPEN_INBOX_KEY`]), and those (written before the inbox
    /// existed) whose history ends with a user message.
    fn unanswered(&self) -> Vec<String>;

    /// Adds `messages` to the session and the store.
    fn append(&self, session: &mut Session, messages: Vec<ChatMessage>) -> Result<(), SessionError> {
        self.append_with_records(session, messages, Vec::new())
    }
}

impl SessionStorage for SessionStore {
    fn load(&self, key: &str) -> Result<LoadedSession, SessionError> {
        SessionStore::load(self, key)
    }

    fn append_with_records(
        &self,
        session: &mut Session,
        messages: Vec<ChatMessage>,
        records: Vec<Record>,
    ) -> Result<(), SessionError> {
        SessionStore::append_with_records(self, session, messages, records)
    }

    fn save_metadata(&self, session: &mut Session) -> Result<(), SessionError> {
        SessionStore::save_metadata(self, session)
    }

    fn rewrite(&self, session: &mut Session) -> Result<(), SessionError> {
        SessionStore::rewrite(self, session)
    }

    fn unanswered(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.dir()) else { return Vec::new() };
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|path| unanswered_key(&path))
            .collect()
    }
}

/// The key of the session file at `path` when it may hold an unanswered message; only its
/// first and last lines are read.
fn unanswered_key(path: &Path) -> Option<String> {
    let header = header_of(path)?;
    let key = header.get("key").and_then(Value::as_str)?.to_owned();
    if header["metadata"].get(OPEN_INBOX_KEY).and_then(Value::as_bool) == Some(true) {
        return Some(key);
    }
    let last: Value = serde_json::from_str(last_line(path).ok()?.trim()).ok()?;
    (last.get("role").and_then(Value::as_str) == Some("user")).then_some(key)
}

/// The file's last non-empty line (at most its last 1 MiB).
fn last_line(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(1 << 20)))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().to_owned())
}
