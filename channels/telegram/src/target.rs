//! Which message a reply answers and in which forum topic it goes: read from an outbound
//! message's metadata, or remembered per chat from the last accepted message (streamed
//! replies start from `Delta`s, which carry no metadata).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

/// Where a reply goes within its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyTarget {
    /// The user's message to answer.
    pub message_id: Option<i64>,
    /// The forum topic (`message_thread_id`).
    pub thread: Option<i64>,
}

impl ReplyTarget {
    /// Reads `message_id` and `message_thread_id` (numbers or numeric strings).
    pub fn from_metadata(metadata: &Value) -> ReplyTarget {
        ReplyTarget { message_id: integer(&metadata["message_id"]), thread: integer(&metadata["message_thread_id"]) }
    }

    /// Adds the topic to a request, and when `quote` also the message it answers (a reply to
    /// a message that is gone is sent anyway).
    pub fn apply(&self, params: &mut Value, quote: bool) {
        if let Some(thread) = self.thread {
            params["message_thread_id"] = json!(thread);
        }
        if let (true, Some(message_id)) = (quote, self.message_id) {
            params["reply_parameters"] = json!({"message_id": message_id, "allow_sending_without_reply": true});
        }
    }
}

fn integer(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

/// The last accepted message of each chat, shared by the poller and the deliverer.
#[derive(Debug, Clone, Default)]
pub struct LastMessages(Arc<Mutex<HashMap<String, ReplyTarget>>>);

impl LastMessages {
    /// Remembers that `target` is the latest message of `chat_id`.
    pub fn remember(&self, chat_id: &str, target: ReplyTarget) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(chat_id.to_owned(), target);
    }

    /// The latest message of `chat_id` (none known: no target).
    pub fn of(&self, chat_id: &str) -> ReplyTarget {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(chat_id).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_read_from_numbers_or_numeric_strings() {
        assert_eq!(
            ReplyTarget::from_metadata(&json!({"message_id": 7, "message_thread_id": "3"})),
            ReplyTarget { message_id: Some(7), thread: Some(3) }
        );
        assert_eq!(ReplyTarget::from_metadata(&json!({})), ReplyTarget::default());
    }

    #[test]
    fn a_target_quotes_the_message_only_when_asked_and_always_keeps_the_topic() {
        let target = ReplyTarget { message_id: Some(7), thread: Some(3) };
        let mut params = json!({});
        target.apply(&mut params, true);
        assert_eq!(
            params,
            json!({"message_thread_id": 3, "reply_parameters": {"message_id": 7, "allow_sending_without_reply": true}})
        );
        let mut params = json!({});
        target.apply(&mut params, false);
        assert_eq!(params, json!({"message_thread_id": 3}));
    }
}
