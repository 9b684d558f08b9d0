//! Where the outbox keeps its replies so that a kernel restart does not lose them: the
//! [`OutboxStore`] trait, what it keeps of a reply ([`StoredDelivery`]), and the one
//! implementation today, [`super::outbox_file::OutboxFile`] (a log file in the data dir).
//!
//! The contract: a reply is recorded as pending, durably, before its first attempt is sent;
//! it is recorded as settled once delivered or given up; at start the store hands back what a
//! previous run left pending, and the gateway resends it under the same outbound id. A store
//! shared by several kernels (a JetStream stream) hands each pending reply to one of them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use super::reply::Reply;
use crate::session::SessionKey;

/// Resolves once what was recorded is on disk (or failed to get there, with the reason).
pub type Written = oneshot::Receiver<Result<(), String>>;

/// Keeps the outbox's replies across restarts.
pub trait OutboxStore {
    /// The replies a previous run left pending, oldest first; each is handed out once.
    fn left_pending(&self) -> Vec<StoredDelivery>;
    /// Records `delivery` as pending; resolves once it would survive a crash.
    fn record_pending(&self, delivery: &StoredDelivery) -> Written;
    /// Records that delivery `id` needs no more attempts (delivered, or given up).
    fn record_settled(&self, id: u64);
    /// Resolves once everything recorded so far is on disk (shutdown).
    fn flushed(&self) -> Written;
}

/// A reply as the store keeps it: enough to resend it under its own id after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDelivery {
    /// Its outbound id, the same for every attempt, before and after a restart.
    pub id: u64,
    /// The channel plugin.
    pub channel: String,
    /// The chat.
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// Local paths of attachments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<String>,
    /// The channel's details.
    #[serde(default)]
    pub metadata: Value,
    /// The session to record the text in when it is delivered only after a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_late_in: Option<String>,
    /// When its first attempt was made, in milliseconds since the Unix epoch: the retry
    /// window runs from it, across restarts.
    pub since_ms: u64,
}

impl StoredDelivery {
    /// What the store keeps of `reply`, first tried at `since`.
    pub fn of(id: u64, reply: &Reply, since: SystemTime) -> StoredDelivery {
        StoredDelivery {
            id,
            channel: reply.channel.clone(),
            chat_id: reply.chat_id.clone(),
            content: reply.content.clone(),
            media: reply.media.clone(),
            metadata: reply.metadata.clone(),
            record_late_in: reply.record_late_in.as_ref().map(|key| key.as_str().to_owned()),
            since_ms: since.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
        }
    }

    /// The reply to resend. A stream it ended is gone with the previous run: it goes out
    /// whole.
    pub fn reply(&self) -> Reply {
        let mut reply = Reply::new(&self.channel, &self.chat_id, self.content.clone(), None, self.metadata.clone());
        reply.media = self.media.clone();
        reply.record_late_in = self.record_late_in.as_deref().map(SessionKey::from_text);
        reply
    }

    /// When its first attempt was made.
    pub fn since(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.since_ms)
    }
}

/// A store that keeps nothing: the outbox of unit tests.
#[derive(Debug, Default)]
pub struct Volatile;

impl OutboxStore for Volatile {
    fn left_pending(&self) -> Vec<StoredDelivery> {
        Vec::new()
    }

    fn record_pending(&self, _delivery: &StoredDelivery) -> Written {
        done()
    }

    fn record_settled(&self, _id: u64) {}

    fn flushed(&self) -> Written {
        done()
    }
}

/// A [`Written`] that is already resolved.
fn done() -> Written {
    let (tell, told) = oneshot::channel();
    let _ = tell.send(Ok(()));
    told
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_delivery_gives_back_its_reply_without_the_stream_it_ended() {
        let mut reply = Reply::new("matrix", "!room", "hello".into(), Some(7), serde_json::json!({"thread": "t"}));
        reply.media = vec!["/tmp/a.png".into()];
        reply.record_late_in = Some(SessionKey::new("matrix", "!room"));
        let since = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let stored = StoredDelivery::of(42, &reply, since);
        let line = serde_json::to_string(&stored).unwrap();
        let back: StoredDelivery = serde_json::from_str(&line).unwrap();
        assert_eq!(back, stored);
        assert_eq!(back.since(), since);
        let again = back.reply();
        assert_eq!((again.content.as_str(), again.stream_id, again.media.len()), ("hello", None, 1));
        assert_eq!(again.record_late_in, Some(SessionKey::new("matrix", "!room")));
        assert_eq!(again.metadata["thread"], "t");
    }
}
