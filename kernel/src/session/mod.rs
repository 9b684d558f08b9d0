//! Conversation sessions on disk: `<data dir>/sessions/<workspace id>/<base64url key>.jsonl`
//! (out of the model's reach, see [`location`]), byte for byte the format nanobot reads and
//! writes, kept cheap to update as sessions grow long.
//!
//! A session file is JSON lines. The first line is a metadata record
//! (`{"_type":"metadata","key":…,"created_at":…,"updated_at":…,"metadata":{…},
//! "last_consolidated":N}`), every other line is one [`ChatMessage`]. nanobot rewrites the whole
//! file on every save; oxibot does not, because a session of 10,000 messages would make every
//! turn cost megabytes of writing:
//!
//! - new messages are *appended*, all lines of a turn in one `write` call;
//! - the metadata line is padded with spaces to a fixed width (512 bytes to start with), so a
//!   changed `last_consolidated` or `metadata` is written *in place* over the old line, same
//!   length, with one `pwrite` at offset 0 (JSON readers, nanobot's included, ignore the
//!   trailing spaces); an append refreshes the line's `updated_at` at most once a second;
//! - a session's first write creates its file with one `write` of the metadata line and the
//!   messages, so the user's first message is in the file itself as soon as it returns;
//! - only when the metadata outgrows its width, when the file came from nanobot (no padding),
//!   or when the caller replaces the history ([`SessionStore::rewrite`]) is the whole file
//!   written again: into a temporary file in the same directory, flushed to disk, then
//!   renamed over the old one. A temporary file a kill left behind is recovered (when it is
//!   complete and newer) or removed on the next load.
//!
//! A process killed at any instant therefore leaves a file that loads: either the old or the
//! new whole file, or the old file plus whole appended lines, or (if the kill landed inside
//! an append) a torn last line, which [`SessionStore::load`] drops and cuts off the file.
//! A damaged line anywhere else is not a crash artefact and is reported, not guessed at.
//!
//! **Invariant:** one writer per session file. The store keeps no locks; the session actor
//! owns each [`Session`] and is the only one to hand it to the store.
//!
//! Besides messages the file holds the durable inbox and the turn journal as records of their
//! own `_type` (see [`journal`]); the kernel reaches all of it through [`SessionStorage`].
//!
//! What this module is not: it does not decide *when* to save, what a turn contains or how
//! history is consolidated; it only keeps the file and the in-memory [`Session`] in step.

mod format;
pub mod journal;
mod key;
pub mod location;
mod marks;
pub mod ownership;
mod recover;
mod repair;
mod replay;
mod storage;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::message::ChatMessage;

pub use format::{HEADER_WIDTH, IN_PLACE_LIMIT, now_timestamp};
pub use journal::{InboxState, PendingMessage, Record};
pub use key::SessionKey;
pub use repair::{INTERRUPTED_REPLY, INTERRUPTED_TOOL_RESULT, Repair, close_interrupted_turn};
pub use storage::SessionStorage;
pub use store::SessionStore;

/// One conversation: its messages and the metadata line of its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `channel:chat_id`, e.g. `cli:direct`.
    pub key: String,
    /// When the session was first created, ISO 8601 local time.
    pub created_at: String,
    /// When the session last changed, ISO 8601 local time.
    pub updated_at: String,
    /// Runtime state kept with the session (nanobot keeps `runtime_checkpoint` and
    /// `pending_user_turn` here); unknown keys round-trip untouched.
    pub metadata: Map<String, Value>,
    /// How many messages from the session's start the consolidator has already summarised
    /// away (an index from the session's start, as the file's metadata line keeps it).
    pub last_consolidated: usize,
    /// How many messages from the session's start are left on disk only: `messages[0]` is
    /// message `offset` of the session. Only archived messages are ever left out
    /// (`offset <= last_consolidated`); 0 for a session as loaded.
    pub offset: usize,
    /// The history from message `offset` on, oldest first. It grows at the end (the store's
    /// appends) and loses archived messages from the front; only [`Session::clear`] and an
    /// append the disk refused take messages back, and they tell `replay`.
    pub messages: Vec<ChatMessage>,
    /// The inbox and journal records still open (see [`journal`]), in file order.
    pub records: Vec<Record>,
    /// The inbox and channel message ids the user messages carry, for quick "is it there"
    /// answers ([`Session::may_carry`]); kept in step by the store's loads and appends.
    marks: marks::Marks,
    /// Top-level keys of the metadata line this version does not know, written back as read.
    header_extra: Map<String, Value>,
    /// What the file on disk looks like, so the store knows what it may overwrite in place.
    disk: DiskState,
    /// The request copies of the replayed messages ([`Session::replay_from`]).
    replay: replay::ReplayCopies,
}

/// The store's knowledge of a session's file, as of the last load or write.
#[derive(Debug, Clone, Copy, Default)]
struct DiskState {
    /// Byte length (newline included) of the metadata line at offset 0, or 0 when the file
    /// does not exist or does not start with a metadata line; 0 forces the next write to be a
    /// whole-file rewrite.
    header_width: usize,
    /// When this process last wrote the metadata line (none since the load): an append
    /// refreshes the line's `updated_at` at most once a second (see [`HEADER_REFRESH`]).
    header_written: Option<std::time::Instant>,
}

/// How stale an append may leave the file's `updated_at`: a turn appends several times, and
/// each refresh of the metadata line costs an open, a write and a close.
const HEADER_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// Two states are equal by the file they describe, whenever this process last wrote it.
impl PartialEq for DiskState {
    fn eq(&self, other: &DiskState) -> bool {
        self.header_width == other.header_width
    }
}

impl DiskState {
    /// Whether an append should write the metadata line again for its `updated_at`.
    fn header_due(&self) -> bool {
        self.header_written.is_none_or(|at| at.elapsed() >= HEADER_REFRESH)
    }
}

impl Session {
    /// An empty session, created now, with no file yet.
    pub fn new(key: impl Into<String>) -> Session {
        let now = now_timestamp();
        Session {
            key: key.into(),
            created_at: now.clone(),
            updated_at: now,
            metadata: Map::new(),
            last_consolidated: 0,
            offset: 0,
            messages: Vec::new(),
            records: Vec::new(),
            marks: marks::Marks::default(),
            header_extra: Map::new(),
            disk: DiskState::default(),
            replay: replay::ReplayCopies::default(),
        }
    }

    /// The messages not yet consolidated: what is replayed to the model.
    pub fn unconsolidated(&self) -> &[ChatMessage] {
        &self.messages[self.consolidated_in_memory()..]
    }

    /// `messages[from..]` as a request sends them, shared with the session's earlier and later
    /// requests: each message is copied into its request form once.
    pub fn replay_from(&mut self, from: usize) -> &[Arc<ChatMessage>] {
        self.replay.share(&self.messages, self.offset, from)
    }

    /// How many of `messages` (in memory) are consolidated: where the unconsolidated ones
    /// start in `messages`.
    pub fn consolidated_in_memory(&self) -> usize {
        self.last_consolidated.saturating_sub(self.offset).min(self.messages.len())
    }

    /// How many messages the session has, those left on disk included.
    pub fn message_count(&self) -> usize {
        self.offset + self.messages.len()
    }

    /// Lets the archived messages go from memory (they stay in the file): a session keeps
    /// only what a request can still use, however long its life. The store writes them back
    /// from the old file should it ever rewrite the whole file.
    pub fn forget_archived(&mut self) {
        let archived = self.consolidated_in_memory();
        if archived == 0 {
            return;
        }
        self.messages.drain(..archived);
        self.offset += archived;
        // Give the room back once most of it is unused, so the vector does not keep the
        // largest size the session ever had.
        if self.messages.capacity() > 2 * self.messages.len() + 64 {
            self.messages.shrink_to(self.messages.len() * 3 / 2);
        }
    }

    /// Whether the store holds this session's metadata line where it can be changed in place;
    /// when not (a new session, or a file nanobot wrote), the next append writes the whole
    /// file, metadata included, in one go.
    pub fn header_in_place(&self) -> bool {
        self.disk.header_width != 0
    }

    /// Whether some user message in memory may carry `value` under `key` (the inbox id or the
    /// channel's message id): `false` is certain, `true` means the messages must be searched.
    pub fn may_carry(&self, key: &str, value: &str) -> bool {
        !self.marks.in_step(self.message_count()) || self.marks.may_hold(key, value)
    }

    /// Brings the marks in step with the messages after the store changed them.
    fn catch_up_marks(&mut self) {
        self.marks.catch_up(&self.messages, self.offset);
    }

    /// Forgets the history (`/new`); persist with [`SessionStore::rewrite`].
    pub fn clear(&mut self) {
        self.marks = marks::Marks::default();
        self.replay = replay::ReplayCopies::default();
        self.messages.clear();
        self.compact_records();
        self.last_consolidated = 0;
        self.offset = 0;
        self.updated_at = now_timestamp();
    }
}

/// A session as loaded, and what had to be fixed in its file first.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    /// The session (a fresh empty one when no file existed).
    pub session: Session,
    /// The repair made to the file, if it needed one.
    pub repaired: Option<Repair>,
}

/// A session file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The file exists but could not be read.
    #[error("cannot read session file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file, its temporary copy or the sessions directory could not be written.
    #[error("cannot write session file {path}: {source}")]
    Write {
        /// The file that was being written.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line other than a torn last one is not a valid metadata record or message.
    #[error("session file {path} line {line} is damaged: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the JSON parser found.
        source: serde_json::Error,
    },
    /// A message or the metadata could not be turned into JSON.
    #[error("cannot encode session for {path}: {source}")]
    Encode {
        /// The file it was meant for.
        path: PathBuf,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// In cluster mode, this kernel does not hold the session's ownership (it expired, or
    /// another kernel took it): its write is refused, so a stale owner cannot write over the
    /// new owner's work.
    #[error("session {key} is not owned by this kernel (node {node}) any more; the write was refused")]
    NotOwner {
        /// The session key.
        key: String,
        /// This kernel's node name.
        node: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn unconsolidated_clamps_a_cursor_past_the_end() {
        let mut session = Session::new("cli:direct");
        session.messages.push(ChatMessage::text(Role::User, "hi"));
        session.last_consolidated = 5;
        assert!(session.unconsolidated().is_empty());
        session.last_consolidated = 0;
        assert_eq!(session.unconsolidated().len(), 1);
    }

    #[test]
    fn clear_forgets_messages_and_the_consolidation_cursor() {
        let mut session = Session::new("cli:direct");
        session.messages.push(ChatMessage::text(Role::User, "hi"));
        session.last_consolidated = 1;
        session.clear();
        assert!(session.messages.is_empty());
        assert_eq!(session.last_consolidated, 0);
    }
}
