//! A conversation's history kept in its wire form between model calls, so that a request
//! encodes only the messages added since the last one.
//!
//! A session's history only grows at the end, and the part replayed to the model only moves
//! forward (consolidation, the replay cap). [`HistoryCache`] keeps the Chat Completions
//! encoding of the replayed messages in one buffer with the end offset of each message, so the
//! next request appends the new messages and starts at a later offset; the buffer is shared
//! with the request ([`EncodedHistory`]) instead of copied.

use std::ops::Range;
use std::sync::Arc;

use crate::message::ChatMessage;

/// Messages already in the Chat Completions wire form (comma-separated objects), shared with
/// the cache that encoded them. See `Provider::chat_with_history`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodedHistory {
    /// The cache's buffer.
    buffer: Arc<Vec<u8>>,
    /// The bytes of these messages in it.
    range: Range<usize>,
    /// How many messages.
    count: usize,
    /// The sum of the caller's weights of these messages (see [`HistoryCache::encode`]).
    weight: u64,
}

impl EncodedHistory {
    /// The encoded messages, comma-separated, without brackets.
    pub(crate) fn json(&self) -> &[u8] {
        self.buffer.get(self.range.clone()).unwrap_or_default()
    }

    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds no message.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sum of the weights the cache was given for these messages.
    pub fn weight(&self) -> u64 {
        self.weight
    }
}

/// The wire form of one conversation's replayed messages, encoded once each.
#[derive(Debug, Default)]
pub struct HistoryCache {
    /// Encoded messages `first..first + ends.len()` of the caller's list, comma-separated.
    buffer: Arc<Vec<u8>>,
    /// Where each encoded message ends in `buffer` (its comma excluded).
    ends: Vec<usize>,
    /// `weights[i]` = the sum of the weights of the first `i` encoded messages.
    weights: Vec<u64>,
    /// The caller's index of the first encoded message.
    first: usize,
    /// How long the caller's list was at the last call (a shorter list starts over).
    seen: usize,
}

impl HistoryCache {
    /// The encoding of `messages[range]`, encoding only messages not encoded before; `weight`
    /// gives each message's share of [`EncodedHistory::weight`] (e.g. a token estimate).
    ///
    /// `messages` must be the same list at every call, only ever appended to, and `range`
    /// may only move forward; a list shorter than at the last call, or a range starting
    /// before the cached one, starts the cache over.
    pub fn encode(
        &mut self,
        messages: &[ChatMessage],
        range: Range<usize>,
        weight: impl Fn(&ChatMessage) -> u64,
    ) -> EncodedHistory {
        let Range { start, end } = range;
        let end = end.min(messages.len());
        let start = start.min(end);
        let cached_end = self.first + self.ends.len();
        if messages.len() < self.seen || start < self.first || start > cached_end || end < cached_end {
            self.clear(start);
        }
        self.seen = messages.len();
        self.drop_front(start);
        let buffer = Arc::make_mut(&mut self.buffer);
        for message in &messages[self.first + self.ends.len()..end] {
            let before = buffer.len();
            if super::openai::encode_messages(buffer, std::slice::from_ref(message)).is_err() {
                // A message that cannot be encoded (a map with non-string keys cannot occur in
                // a `Value`) would be a bug; fall back to starting over next time.
                buffer.truncate(before);
                self.seen = 0;
                break;
            }
            self.ends.push(buffer.len());
            let total = self.weights.last().copied().unwrap_or(0) + weight(message);
            self.weights.push(total);
        }
        let count = (self.first + self.ends.len()).min(end) - start;
        let offset = start - self.first;
        let from = if offset == 0 { 0 } else { self.ends[offset - 1] + 1 };
        let to = if count == 0 { from } else { self.ends[offset + count - 1] };
        let weight_at = |i: usize| if i == 0 { 0 } else { self.weights[i - 1] };
        EncodedHistory {
            buffer: Arc::clone(&self.buffer),
            range: from..to,
            count,
            weight: weight_at(offset + count) - weight_at(offset),
        }
    }

    /// Bytes the cache holds (for tests and benchmarks).
    pub fn buffer_len(&self) -> usize {
        self.buffer.len()
    }

    fn clear(&mut self, first: usize) {
        Arc::make_mut(&mut self.buffer).clear();
        self.ends.clear();
        self.weights.clear();
        self.first = first;
    }

    /// Forgets messages before `start` once they take up half the buffer (and at least 64 KiB),
    /// so the buffer stays about the size of what is replayed.
    fn drop_front(&mut self, start: usize) {
        let dead = start - self.first;
        if dead == 0 {
            return;
        }
        let dead_bytes = self.ends[dead - 1] + 1;
        let buffer_len = self.buffer.len();
        if dead_bytes < 64 * 1024 || dead_bytes * 2 < buffer_len {
            return;
        }
        if dead == self.ends.len() {
            self.clear(start);
            return;
        }
        let buffer = Arc::make_mut(&mut self.buffer);
        buffer.drain(..dead_bytes);
        self.ends.drain(..dead);
        for end in &mut self.ends {
            *end -= dead_bytes;
        }
        let dropped_weight = self.weights[dead - 1];
        self.weights.drain(..dead);
        for weight in &mut self.weights {
            *weight -= dropped_weight;
        }
        self.first = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    fn conversation(n: usize) -> Vec<ChatMessage> {
        (0..n)
            .map(|i| ChatMessage::text(if i % 2 == 0 { Role::User } else { Role::Assistant }, format!("message {i}")))
            .collect()
    }

    fn fresh(messages: &[ChatMessage], range: Range<usize>) -> Vec<u8> {
        let mut out = Vec::new();
        super::super::openai::encode_messages(&mut out, &messages[range]).unwrap();
        out
    }

    #[test]
    fn an_appended_history_encodes_as_a_fresh_one_would() {
        let mut messages = conversation(3);
        let mut cache = HistoryCache::default();
        let first = cache.encode(&messages, 0..3, |_| 1);
        assert_eq!(first.json(), fresh(&messages, 0..3));
        assert_eq!((first.len(), first.weight()), (3, 3));
        messages.extend(conversation(4));
        let second = cache.encode(&messages, 1..6, |_| 1);
        assert_eq!(second.json(), fresh(&messages, 1..6));
        assert_eq!((second.len(), second.weight()), (5, 5));
    }

    #[test]
    fn a_history_moving_forward_past_much_text_is_dropped_from_the_buffer() {
        let mut messages = Vec::new();
        let mut cache = HistoryCache::default();
        for round in 0..400 {
            messages.push(ChatMessage::text(Role::User, format!("{round} {}", "x".repeat(500))));
            let start = messages.len().saturating_sub(20);
            let encoded = cache.encode(&messages, start..messages.len(), |m| m.text_content().len() as u64);
            assert_eq!(encoded.json(), fresh(&messages, start..messages.len()), "round {round}");
            let expected: u64 = messages[start..].iter().map(|m| m.text_content().len() as u64).sum();
            assert_eq!(encoded.weight(), expected);
        }
        assert!(cache.buffer_len() < 200 * 1024, "the buffer kept {} bytes", cache.buffer_len());
    }

    #[test]
    fn a_shorter_list_or_an_earlier_start_starts_over() {
        let messages = conversation(6);
        let mut cache = HistoryCache::default();
        cache.encode(&messages, 2..6, |_| 1);
        let earlier = cache.encode(&messages, 0..6, |_| 1);
        assert_eq!(earlier.json(), fresh(&messages, 0..6));
        let other = conversation(2);
        let shorter = cache.encode(&other, 0..2, |_| 1);
        assert_eq!(shorter.json(), fresh(&other, 0..2));
    }

    #[test]
    fn an_empty_range_is_empty() {
        let messages = conversation(2);
        let mut cache = HistoryCache::default();
        let encoded = cache.encode(&messages, 2..2, |_| 1);
        assert!(encoded.is_empty());
        assert!(encoded.json().is_empty());
    }
}
