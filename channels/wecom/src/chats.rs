//! The latest message callback of each chat, so a reply streamed as deltas (which carry only a
//! chat id) answers the message it belongs to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How many chats are remembered; past that the list starts over.
const REMEMBERED_CHATS: usize = 1000;

/// Chat id → request id of its latest message callback; cheap to clone, clones share it.
#[derive(Debug, Clone, Default)]
pub struct LatestCallbacks {
    inner: Arc<Mutex<HashMap<String, String>>>,
}

impl LatestCallbacks {
    /// Notes that the latest message of `chat_id` came with callback `req_id`.
    pub fn note(&self, chat_id: &str, req_id: &str) {
        let mut chats = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if chats.len() >= REMEMBERED_CHATS && !chats.contains_key(chat_id) {
            chats.clear();
        }
        chats.insert(chat_id.to_owned(), req_id.to_owned());
    }

    /// The request id of the latest message callback of `chat_id`.
    pub fn of(&self, chat_id: &str) -> Option<String> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).get(chat_id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_callback_of_a_chat_wins() {
        let latest = LatestCallbacks::default();
        assert_eq!(latest.of("ada"), None);
        latest.note("ada", "r1");
        latest.note("ada", "r2");
        latest.note("bo", "r3");
        assert_eq!((latest.of("ada").as_deref(), latest.of("bo").as_deref()), (Some("r2"), Some("r3")));
    }
}
