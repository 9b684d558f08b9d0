//! The messages of each conversation's last request kept in their wire form, so that the next
//! request of the conversation encodes only the messages that are new or changed.
//!
//! A conversation's requests repeat almost all of the previous one: the history only grows at
//! its end, and its start only moves forward (consolidation, the replay cap). An entry keeps
//! the messages it encoded, their Chat Completions encoding in one buffer, and where each one
//! ends. A request is matched against the entry message by message: a message the request
//! shares with the entry (the same `Arc`, as a session's replayed history is) is the same
//! without a look; any other is compared on the fields the wire form is made of (far cheaper
//! than encoding). The bytes of the messages that match are reused, the rest are encoded and
//! kept for the next request. Nothing is trusted that was not compared or shared, so a body is
//! the same whether or not an entry was used.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::body;
use crate::message::ChatMessage;

/// Conversations kept; the one used longest ago goes first.
const CONVERSATIONS: usize = 64;

/// Dead bytes (of messages no longer replayed) are dropped from an entry's buffer once there
/// are at least this many and they are at least half of it.
const COMPACT_BYTES: usize = 64 * 1024;

/// The encoded messages of recent conversations, by the caller's key (a session key).
#[derive(Debug, Default)]
pub(crate) struct HistoryCache {
    /// The entries, behind one lock held only to take an entry out or put it back, never
    /// while encoding.
    entries: Mutex<Entries>,
}

/// The kept conversations.
#[derive(Debug, Default)]
struct Entries {
    /// Each conversation and the `clock` of its last use.
    by_key: HashMap<String, (u64, Conversation)>,
    /// Counts puts, to find the conversation used longest ago.
    clock: u64,
}

impl HistoryCache {
    /// Takes the entry of conversation `key` out of the cache (an empty one when there is
    /// none); [`HistoryCache::put`] puts it back once used.
    pub(crate) fn take(&self, key: &str) -> Conversation {
        self.lock().by_key.remove(key).map(|(_, entry)| entry).unwrap_or_default()
    }

    /// Keeps `entry` as conversation `key`'s, dropping the least recently used entry when the
    /// cache is full.
    pub(crate) fn put(&self, key: &str, entry: Conversation) {
        let mut entries = self.lock();
        entries.clock += 1;
        if entries.by_key.len() >= CONVERSATIONS && !entries.by_key.contains_key(key) {
            let oldest = entries.by_key.iter().min_by_key(|(_, (used, _))| *used).map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.by_key.remove(&oldest);
            }
        }
        let clock = entries.clock;
        entries.by_key.insert(key.to_owned(), (clock, entry));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `kept` and `new` have the same wire form: at once when they are one message, else
/// by comparing their fields.
fn same_message(kept: &Arc<ChatMessage>, new: &Arc<ChatMessage>) -> bool {
    Arc::ptr_eq(kept, new) || body::same_wire_form(kept, new)
}

/// One conversation's last encoded messages.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    /// The encoded messages (shared with the requests that sent them), to compare a request's
    /// messages with.
    messages: Vec<Arc<ChatMessage>>,
    /// Where each message's bytes end in `bytes` (its comma excluded).
    ends: Vec<usize>,
    /// The messages' wire form, comma-separated.
    bytes: Vec<u8>,
    /// Messages before this one are no longer sent; their bytes wait for [`COMPACT_BYTES`].
    first: usize,
}

impl Conversation {
    /// The wire form of `messages`, comma-separated, reusing what the entry holds of them;
    /// afterwards the entry holds exactly `messages`.
    pub(crate) fn encode(&mut self, messages: &[Arc<ChatMessage>]) -> serde_json::Result<&[u8]> {
        // Where the request starts in the entry: where it started last time, or later.
        let at = messages
            .first()
            .and_then(|head| self.messages.iter().skip(self.first).position(|kept| same_message(kept, head)));
        match at {
            Some(offset) => self.first += offset,
            None => self.first = self.messages.len(),
        }
        let shared =
            self.messages[self.first..].iter().zip(messages).take_while(|(kept, new)| same_message(kept, new)).count();
        self.keep(self.first + shared);
        self.compact();
        for message in &messages[shared..] {
            if let Err(error) = body::write_messages(&mut self.bytes, std::slice::from_ref(message)) {
                // Start over next time rather than keep a half-written message.
                *self = Conversation::default();
                return Err(error);
            }
            self.ends.push(self.bytes.len());
            self.messages.push(Arc::clone(message));
        }
        let start = self.start_byte();
        Ok(&self.bytes[start..])
    }

    /// Forgets every message from index `count` on.
    fn keep(&mut self, count: usize) {
        self.bytes.truncate(if count == 0 { 0 } else { self.ends[count - 1] });
        self.ends.truncate(count);
        self.messages.truncate(count);
    }

    /// Where the bytes of the first message sent begin.
    fn start_byte(&self) -> usize {
        if self.first == 0 { 0 } else { self.ends[self.first - 1] + 1 }
    }

    /// Drops the messages no longer sent once they take up half the buffer (and at least
    /// [`COMPACT_BYTES`]), so the buffer stays about the size of what is sent.
    fn compact(&mut self) {
        if self.first == self.messages.len() {
            // Nothing kept is sent any more (and there is no comma after the last message).
            self.keep(0);
            self.first = 0;
            return;
        }
        let dead = self.start_byte();
        if self.first == 0 || dead < COMPACT_BYTES || dead * 2 < self.bytes.len() {
            return;
        }
        self.bytes.drain(..dead);
        self.ends.drain(..self.first);
        self.messages.drain(..self.first);
        for end in &mut self.ends {
            *end -= dead;
        }
        self.first = 0;
    }

    /// Bytes the entry holds (for tests).
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn conversation(from: usize, n: usize) -> Vec<Arc<ChatMessage>> {
        (from..from + n)
            .map(|i| {
                Arc::new(ChatMessage::text(
                    if i % 2 == 0 { Role::User } else { Role::Assistant },
                    format!("message {i}"),
                ))
            })
            .collect()
    }

    fn fresh(messages: &[Arc<ChatMessage>]) -> Vec<u8> {
        let mut out = Vec::new();
        body::write_messages(&mut out, messages).unwrap();
        out
    }

    #[test]
    fn a_growing_conversation_encodes_as_a_fresh_one_would() {
        let mut messages = conversation(0, 3);
        let mut entry = Conversation::default();
        assert_eq!(entry.encode(&messages).unwrap(), fresh(&messages));
        messages.extend(conversation(3, 4));
        assert_eq!(entry.encode(&messages[1..]).unwrap(), fresh(&messages[1..]), "start moved forward");
        assert_eq!(entry.encode(&messages[1..]).unwrap(), fresh(&messages[1..]), "the same again");
    }

    #[test]
    fn a_changed_message_is_encoded_again_with_everything_after_it() {
        let mut messages = conversation(0, 6);
        let mut entry = Conversation::default();
        entry.encode(&messages).unwrap();
        messages[3] = Arc::new(ChatMessage::text(Role::Assistant, "changed"));
        assert_eq!(entry.encode(&messages).unwrap(), fresh(&messages));
        messages.truncate(2);
        assert_eq!(entry.encode(&messages).unwrap(), fresh(&messages), "a shorter list");
        let other = conversation(10, 3);
        assert_eq!(entry.encode(&other).unwrap(), fresh(&other), "another conversation altogether");
        assert!(entry.encode(&[]).unwrap().is_empty());
    }

    #[test]
    fn an_equal_copy_of_a_message_is_reused_and_a_changed_copy_is_not() {
        let messages = conversation(0, 4);
        let mut entry = Conversation::default();
        entry.encode(&messages).unwrap();
        let copies: Vec<Arc<ChatMessage>> = messages.iter().map(|m| Arc::new(ChatMessage::clone(m))).collect();
        assert_eq!(entry.encode(&copies).unwrap(), fresh(&messages), "equal copies encode as the originals");
        let mut changed = copies.clone();
        Arc::make_mut(&mut changed[1]).content = serde_json::Value::String("edited".into());
        assert_eq!(entry.encode(&changed).unwrap(), fresh(&changed));
        assert_ne!(fresh(&changed), fresh(&messages));
    }

    #[test]
    fn a_conversation_moving_forward_past_much_text_leaves_the_buffer() {
        let mut messages = Vec::new();
        let mut entry = Conversation::default();
        for round in 0..400 {
            messages.push(Arc::new(ChatMessage::text(Role::User, format!("{round} {}", "x".repeat(500)))));
            let start = messages.len().saturating_sub(20);
            assert_eq!(entry.encode(&messages[start..]).unwrap(), fresh(&messages[start..]), "round {round}");
        }
        assert!(entry.held_bytes() < 200 * 1024, "the buffer kept {} bytes", entry.held_bytes());
    }

    #[test]
    fn the_cache_keeps_a_bounded_number_of_conversations() {
        let cache = HistoryCache::default();
        let messages = conversation(0, 2);
        for key in 0..CONVERSATIONS + 10 {
            let mut entry = cache.take(&key.to_string());
            entry.encode(&messages).unwrap();
            cache.put(&key.to_string(), entry);
        }
        assert_eq!(cache.lock().by_key.len(), CONVERSATIONS);
        assert!(cache.take("0").messages.is_empty(), "the oldest conversation went first");
        assert_eq!(cache.take(&(CONVERSATIONS + 9).to_string()).messages.len(), 2);
    }
}
