//! `FencedSessions`: a session store that writes only for sessions this kernel owns. Every
//! write first asks the [`Node`] for the session's fencing token (the ownership claim's
//! revision, trusted only within its TTL); without one the write is refused with
//! [`SessionError::NotOwner`]. Then the store checks it too: the write holds the session's
//! fence file (`fence_file.rs`), which refuses a token older than one that already wrote the
//! session, so a kernel that still trusts a stale token (a pause between its check and its
//! write, a slow clock, a TTL set longer than the bucket's) cannot write over a newer owner's
//! work. Reads pass: the next owner reads what the last one wrote.

use std::path::PathBuf;
use std::sync::Arc;

use super::fence_file::{self, FileToken};
use super::node::Node;
use crate::message::ChatMessage;
use crate::session::journal::Record;
use crate::session::{LoadedSession, Session, SessionError, SessionStorage};

/// A session store whose writes need this kernel's ownership of the session.
#[derive(Debug)]
pub struct FencedSessions<S> {
    /// Where the sessions are kept.
    inner: S,
    /// Whose claims are checked.
    node: Arc<Node>,
    /// Where the sessions' fence files are (next to the session files, shared like them).
    fences: PathBuf,
}

impl<S: SessionStorage> FencedSessions<S> {
    /// `inner`, fenced by `node`'s claims and by the fence files in `fences` (a directory
    /// every kernel sharing the sessions shares too).
    pub fn new(inner: S, node: Arc<Node>, fences: PathBuf) -> FencedSessions<S> {
        FencedSessions { inner, node, fences }
    }

    /// The token that allows writing session `key`, or why not.
    fn fence(&self, key: &str) -> Result<FileToken, SessionError> {
        let revision = self
            .node
            .fencing_token(key)
            .ok_or_else(|| SessionError::NotOwner { key: key.to_owned(), node: self.node.name().to_owned() })?;
        Ok((self.node.fencing_epoch(), revision))
    }

    /// Runs `write` of session `key` holding its fence with this kernel's token.
    fn write_fenced<T>(&self, key: &str, write: impl FnOnce() -> Result<T, SessionError>) -> Result<T, SessionError> {
        let token = self.fence(key)?;
        tracing::trace!(%key, ?token, "fenced write");
        let _held = fence_file::hold(&self.fences, key, token, self.node.name())?;
        write()
    }
}

impl<S: SessionStorage> SessionStorage for FencedSessions<S> {
    fn load(&self, key: &str) -> Result<LoadedSession, SessionError> {
        self.inner.load(key)
    }

    fn append_with_records(
        &self,
        session: &mut Session,
        messages: Vec<ChatMessage>,
        records: Vec<Record>,
    ) -> Result<(), SessionError> {
        let key = session.key.clone();
        self.write_fenced(&key, || self.inner.append_with_records(session, messages, records))
    }

    fn save_metadata(&self, session: &mut Session) -> Result<(), SessionError> {
        let key = session.key.clone();
        self.write_fenced(&key, || self.inner.save_metadata(session))
    }

    fn rewrite(&self, session: &mut Session) -> Result<(), SessionError> {
        let key = session.key.clone();
        self.write_fenced(&key, || self.inner.rewrite(session))
    }

    fn unanswered(&self) -> Vec<String> {
        self.inner.unanswered()
    }
}
