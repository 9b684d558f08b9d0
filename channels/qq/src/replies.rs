//! Sending messages through the REST API: the kernel's replies (in parts of at most 4000
//! characters, as text or Markdown) and the "processing" notice, each a passive reply to the
//! user's message (`msg_id`) with a `msg_seq` QQ has not seen for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use oxibot_plugin::Outbound;
use oxibot_plugin::chat::{self, Markup, Measure, PartsSent, SplitRules, leave_files_out, split};
use serde_json::{Value, json};

use crate::api::{Api, ApiError, Target};
use crate::config::MsgFormat;

/// QQ's messages: parts of at most 4000 characters (QQ documents no limit, and refuses
/// messages far longer).
pub const QQ: SplitRules = SplitRules { limit: 4000, measure: Measure::Chars, markup: Markup::Markdown };
/// How many chats' kinds are remembered; past that the list starts over.
const REMEMBERED_CHATS: usize = 1000;

/// The next `msg_seq`: QQ refuses a second reply to a message with a number it used for it,
/// so numbers only grow, from a start taken from the clock (a restarted channel does not
/// reuse the numbers of the one before).
fn next_msg_seq() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |elapsed| elapsed.as_secs() % 100_000_000);
    let _ = NEXT.compare_exchange(0, start.max(1), Ordering::Relaxed, Ordering::Relaxed);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Which chats are groups, as their messages said; cheap to clone, clones share it.
#[derive(Debug, Clone, Default)]
pub struct ChatKinds {
    inner: Arc<Mutex<HashMap<String, bool>>>,
}

impl ChatKinds {
    /// Notes whether `chat_id` is a group.
    pub fn note(&self, chat_id: &str, is_group: bool) {
        let mut kinds = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if kinds.len() >= REMEMBERED_CHATS && !kinds.contains_key(chat_id) {
            kinds.clear();
        }
        kinds.insert(chat_id.to_owned(), is_group);
    }

    /// Where a message to `chat_id` goes: a group when `metadata` or an earlier message says
    /// so, else the user of that openid.
    pub fn target(&self, chat_id: &str, metadata: &Value) -> Target {
        let known = self.inner.lock().unwrap_or_else(PoisonError::into_inner).get(chat_id).copied();
        if metadata["is_group"].as_bool().or(known).unwrap_or(false) {
            Target::Group(chat_id.to_owned())
        } else {
            Target::User(chat_id.to_owned())
        }
    }
}

/// Sends messages for the bot.
#[derive(Debug, Clone)]
pub struct Sender {
    /// The API.
    pub api: Api,
    /// `msgFormat`.
    pub format: MsgFormat,
}

impl Sender {
    /// Sends `text` to `target`, as a reply to message `msg_id` when given.
    pub async fn send(&self, target: &Target, text: &str, msg_id: Option<&str>) -> Result<(), ApiError> {
        let mut body = match self.format {
            MsgFormat::Plain => json!({"msg_type": 0, "content": text}),
            MsgFormat::Markdown => json!({"msg_type": 2, "markdown": {"content": text}}),
        };
        body["msg_seq"] = json!(next_msg_seq());
        if let Some(msg_id) = msg_id {
            body["msg_id"] = json!(msg_id);
        }
        self.api.send(target, &body).await
    }
}

/// Delivers the kernel's replies.
pub struct Replies {
    /// Sends them.
    pub sender: Sender,
    /// Which chats are groups.
    pub kinds: ChatKinds,
    /// Outbound id → parts already sent, for replies not delivered whole yet (kept on disk).
    pub sent: PartsSent,
}

impl chat::Replies for Replies {
    type Error = String;

    /// Sends every part of `outbound` not sent yet.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), String> {
        let parts = split(&outbound.content, QQ);
        leave_files_out(outbound, !parts.is_empty(), "qq")?;
        let target = self.kinds.target(&outbound.chat_id, &outbound.metadata);
        let msg_id = outbound.metadata["message_id"].as_str();
        let already = self.sent.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            self.sender.send(&target, part, msg_id).await.map_err(|error| error.to_string())?;
            self.sent.posted(outbound.id, index + 1, parts.len());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_seq_numbers_only_grow() {
        let (first, second) = (next_msg_seq(), next_msg_seq());
        assert!(first >= 1 && second > first);
    }

    #[test]
    fn a_chat_is_a_group_when_its_metadata_or_an_earlier_message_says_so() {
        let kinds = ChatKinds::default();
        assert_eq!(kinds.target("U1", &json!({})), Target::User("U1".into()));
        assert_eq!(kinds.target("G1", &json!({"is_group": true})), Target::Group("G1".into()));
        kinds.note("G2", true);
        assert_eq!(kinds.target("G2", &json!({})), Target::Group("G2".into()));
    }
}
