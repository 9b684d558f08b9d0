//! `FencedSessions`: a session store that writes only for sessions this kernel owns. Every
//! write first asks the [`Node`] for the session's fencing token (the ownership claim's
//! revision, trusted only within its TTL); without one the write is refused with
//! [`SessionError::NotOwner`]. Reads pass: the next owner reads what the last one wrote.
//!
//! The check happens in this kernel, not in the store: with session files on storage all
//! kernels share, the token bounds a stale owner's writes to the window its clock trusts
//! (see `claim.rs`). A store that checks the token itself (a JetStream stream per session,
//! appended with the expected last sequence) is the step after this one.

use std::sync::Arc;

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
}

impl<S: SessionStorage> FencedSessions<S> {
    /// `inner`, fenced by `node`'s claims.
    pub fn new(inner: S, node: Arc<Node>) -> FencedSessions<S> {
        FencedSessions { inner, node }
    }

    /// The token that allows writing session `key`, or why not.
    fn fence(&self, key: &str) -> Result<u64, SessionError> {
        self.node
            .fencing_token(key)
            .ok_or_else(|| SessionError::NotOwner { key: key.to_owned(), node: self.node.name().to_owned() })
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
        let token = self.fence(&session.key)?;
        tracing::trace!(key = %session.key, token, "fenced append");
        self.inner.append_with_records(session, messages, records)
    }

    fn save_metadata(&self, session: &mut Session) -> Result<(), SessionError> {
        self.fence(&session.key)?;
        self.inner.save_metadata(session)
    }

    fn rewrite(&self, session: &mut Session) -> Result<(), SessionError> {
        self.fence(&session.key)?;
        self.inner.rewrite(session)
    }

    fn unanswered(&self) -> Vec<String> {
        self.inner.unanswered()
    }
}
