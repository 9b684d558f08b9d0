//! The marks a session's user messages carry — their inbox ids and their channels' message ids
//! — kept as a set of hashes, so asking whether a message is already in the history costs a
//! look-up instead of a scan of every message (which grew with the session: at turn 900 the
//! two scans of each new message were 14 % of a turn's CPU).
//!
//! The set only ever says "certainly not there" or "look": a hash met by chance, or a message
//! archived since, costs the scan it replaces, never a wrong answer. It is in step with the
//! messages when it has seen every message up to the session's end; otherwise (messages
//! changed behind the store's back, an append rolled back) it is not trusted and the caller
//! scans.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::journal::{INBOUND_ID_KEY, INBOX_ID_KEY};
use crate::message::{ChatMessage, Role};

/// The keys whose values are marked.
const MARKED_KEYS: [&str; 2] = [INBOX_ID_KEY, INBOUND_ID_KEY];

/// Hashes of the marks of a session's user messages (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Marks {
    /// Each mark's hash, key and value together.
    hashes: HashSet<u64>,
    /// Where the messages seen end, counted from the session's start.
    seen_to: usize,
}

impl Marks {
    /// The marks of `messages`, which start at message `offset` of the session.
    pub(crate) fn of(messages: &[ChatMessage], offset: usize) -> Marks {
        let mut marks = Marks { hashes: HashSet::new(), seen_to: offset };
        marks.see(messages);
        marks
    }

    /// Takes in the messages from where the set ends to the end of `messages` (which start at
    /// message `offset`); starts over when the set is ahead of them or behind their start.
    pub(crate) fn catch_up(&mut self, messages: &[ChatMessage], offset: usize) {
        let end = offset + messages.len();
        if self.seen_to < offset || self.seen_to > end {
            *self = Marks::of(messages, offset);
            return;
        }
        self.see(&messages[self.seen_to - offset..]);
    }

    /// Whether the set has seen every message up to `end` (counted from the session's start).
    pub(crate) fn in_step(&self, end: usize) -> bool {
        self.seen_to == end
    }

    /// Whether some user message may carry `value` under `key`: `false` is certain.
    pub(crate) fn may_hold(&self, key: &str, value: &str) -> bool {
        self.hashes.contains(&hash(key, value))
    }

    fn see(&mut self, messages: &[ChatMessage]) {
        for message in messages.iter().filter(|m| m.role == Role::User) {
            for key in MARKED_KEYS {
                if let Some(value) = message.extra.get(key).and_then(Value::as_str) {
                    self.hashes.insert(hash(key, value));
                }
            }
        }
        self.seen_to += messages.len();
    }
}

/// Two sessions are equal by what they hold; the set is only a way to search them.
impl PartialEq for Marks {
    fn eq(&self, _other: &Marks) -> bool {
        true
    }
}

fn hash(key: &str, value: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (key, value).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(inbox: &str, inbound: &str) -> ChatMessage {
        let mut message = ChatMessage::text(Role::User, "hi");
        message.extra.insert(INBOX_ID_KEY.into(), inbox.into());
        message.extra.insert(INBOUND_ID_KEY.into(), inbound.into());
        message
    }

    #[test]
    fn a_mark_seen_may_be_there_and_one_never_seen_is_not() {
        let mut assistant = ChatMessage::text(Role::Assistant, "hello");
        assistant.extra.insert(INBOX_ID_KEY.into(), "m3".into());
        let marks = Marks::of(&[marked("m1", "tg-1"), assistant], 0);
        assert!(marks.may_hold(INBOX_ID_KEY, "m1") && marks.may_hold(INBOUND_ID_KEY, "tg-1"));
        assert!(!marks.may_hold(INBOX_ID_KEY, "tg-1"), "a value counts under its own key only");
        assert!(!marks.may_hold(INBOX_ID_KEY, "m3"), "only user messages are marked");
        assert!(marks.in_step(2));
    }

    #[test]
    fn catching_up_takes_in_the_new_messages_and_starts_over_when_the_set_is_ahead() {
        let mut messages = vec![marked("m1", "a")];
        let mut marks = Marks::of(&messages, 10);
        messages.push(marked("m2", "b"));
        assert!(!marks.in_step(12), "an append not seen yet");
        marks.catch_up(&messages, 10);
        assert!(marks.in_step(12) && marks.may_hold(INBOX_ID_KEY, "m2"));
        messages.truncate(1);
        marks.catch_up(&messages, 10);
        assert!(marks.in_step(11) && !marks.may_hold(INBOX_ID_KEY, "m2"), "a rolled-back append is forgotten");
    }
}
