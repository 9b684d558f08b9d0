//! A session's messages in the form a request sends them, made once per message and shared by
//! every request that replays the message: a turn takes its history by reference, where it
//! used to copy (and then free) every replayed message.

use std::sync::Arc;

use crate::message::ChatMessage;

/// Request copies ([`ChatMessage::for_request`]) of a run of a session's messages, in order.
///
/// Kept in step by [`super::Session`]: its messages only grow at the end, archived ones leave
/// from the front, and the two places that take messages back (a cleared session, an append
/// the disk refused) forget the copies of what they took.
#[derive(Debug, Clone, Default)]
pub(super) struct ReplayCopies {
    /// Number, from the session's start, of the message `copies[0]` is a copy of.
    first: usize,
    /// The copies.
    copies: Vec<Arc<ChatMessage>>,
}

/// A cache: two sessions with the same messages are equal whatever each has copied.
impl PartialEq for ReplayCopies {
    fn eq(&self, _: &ReplayCopies) -> bool {
        true
    }
}

impl ReplayCopies {
    /// Copies of `messages[from..]`, where `messages[0]` is message `offset` of the session:
    /// the kept copies where they cover it, new ones (kept for next time) for the rest.
    pub(super) fn share(&mut self, messages: &[ChatMessage], offset: usize, from: usize) -> &[Arc<ChatMessage>] {
        let start = offset + from;
        let end = offset + messages.len();
        if start < self.first || self.end() > end {
            // Not a later view of the same history: start over.
            self.copies.clear();
        }
        if self.copies.is_empty() {
            self.first = start;
        }
        let gone = start.saturating_sub(self.first).min(self.copies.len());
        self.copies.drain(..gone);
        self.first = start.max(self.first + gone);
        let copied = self.end() - offset;
        self.copies.extend(messages[copied..].iter().map(|message| Arc::new(message.for_request())));
        &self.copies
    }

    /// Forgets the copies of message `from` of the session and later (taken back).
    pub(super) fn forget_from(&mut self, from: usize) {
        self.copies.truncate(from.saturating_sub(self.first));
    }

    /// The number of the first message after the copies.
    fn end(&self) -> usize {
        self.first + self.copies.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn messages(from: usize, to: usize) -> Vec<ChatMessage> {
        (from..to).map(|i| ChatMessage::text(Role::User, format!("message {i}"))).collect()
    }

    fn texts(copies: &[Arc<ChatMessage>]) -> Vec<String> {
        copies.iter().map(|m| m.text_content()).collect()
    }

    #[test]
    fn a_message_is_copied_once_and_shared_by_every_later_request() {
        let mut session = messages(0, 4);
        let mut replay = ReplayCopies::default();
        let first = replay.share(&session, 0, 1).to_vec();
        session.extend(messages(4, 6));
        let second = replay.share(&session, 0, 1).to_vec();
        assert_eq!(texts(&second), texts(replay.share(&session, 0, 1)));
        assert_eq!(texts(&second), ["message 1", "message 2", "message 3", "message 4", "message 5"]);
        assert!(first.iter().zip(&second).all(|(a, b)| Arc::ptr_eq(a, b)), "the first request's copies are reused");
    }

    #[test]
    fn a_history_whose_start_moves_forward_drops_the_copies_before_it() {
        let session = messages(0, 10);
        let mut replay = ReplayCopies::default();
        replay.share(&session, 0, 2);
        let later = replay.share(&session[4..], 4, 3);
        assert_eq!(texts(later), ["message 7", "message 8", "message 9"]);
        assert_eq!(replay.first, 7);
    }

    #[test]
    fn messages_taken_back_and_replaced_are_copied_anew() {
        let mut session = messages(0, 5);
        let mut replay = ReplayCopies::default();
        replay.share(&session, 0, 0);
        session.truncate(3);
        replay.forget_from(3);
        session.push(ChatMessage::text(Role::Assistant, "another"));
        assert_eq!(texts(replay.share(&session, 0, 0)), ["message 0", "message 1", "message 2", "another"]);
    }

    #[test]
    fn a_shorter_or_earlier_history_starts_over() {
        let mut replay = ReplayCopies::default();
        replay.share(&messages(0, 8), 0, 4);
        let cleared = vec![ChatMessage::text(Role::User, "after /new")];
        assert_eq!(texts(replay.share(&cleared, 0, 0)), ["after /new"]);
    }
}
