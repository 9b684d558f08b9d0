//! Joining an event payload Feishu cut into pieces: frames with the same `message_id`, `sum`
//! pieces numbered by `seq`, in any order.

use std::collections::{HashMap, VecDeque};

/// How many cut payloads may be waiting for pieces; the oldest is dropped past that.
const WAITING: usize = 64;

/// Payloads still missing pieces.
#[derive(Debug, Default)]
pub struct Fragments {
    parts: HashMap<String, Vec<Option<Vec<u8>>>>,
    order: VecDeque<String>,
}

impl Fragments {
    /// Adds piece `seq` of `sum` of payload `message_id`; returns the whole payload once every
    /// piece is in.
    pub fn add(&mut self, message_id: &str, sum: usize, seq: usize, piece: Vec<u8>) -> Option<Vec<u8>> {
        if sum <= 1 {
            return Some(piece);
        }
        if seq >= sum {
            return None;
        }
        if !self.parts.contains_key(message_id) {
            if self.order.len() >= WAITING
                && let Some(oldest) = self.order.pop_front()
            {
                self.parts.remove(&oldest);
            }
            self.parts.insert(message_id.to_owned(), vec![None; sum]);
            self.order.push_back(message_id.to_owned());
        }
        let parts = self.parts.get_mut(message_id)?;
        if let Some(slot) = parts.get_mut(seq) {
            *slot = Some(piece);
        }
        if parts.iter().any(Option::is_none) {
            return None;
        }
        let whole = self.parts.remove(message_id)?.into_iter().flatten().flatten().collect();
        self.order.retain(|id| id != message_id);
        Some(whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_payload_passes_and_pieces_are_joined_in_seq_order() {
        let mut fragments = Fragments::default();
        assert_eq!(fragments.add("m0", 1, 0, b"whole".to_vec()), Some(b"whole".to_vec()));
        assert_eq!(fragments.add("m1", 3, 2, b"c".to_vec()), None);
        assert_eq!(fragments.add("m1", 3, 0, b"a".to_vec()), None);
        assert_eq!(fragments.add("m1", 3, 1, b"b".to_vec()), Some(b"abc".to_vec()));
        assert_eq!(fragments.add("m1", 3, 9, b"x".to_vec()), None);
    }

    #[test]
    fn the_oldest_unfinished_payload_is_dropped_past_the_limit() {
        let mut fragments = Fragments::default();
        for n in 0..=WAITING {
            fragments.add(&format!("m{n}"), 2, 0, b"a".to_vec());
        }
        assert_eq!(fragments.add("m0", 2, 1, b"b".to_vec()), None, "m0 was forgotten and starts over");
        assert_eq!(fragments.add(&format!("m{WAITING}"), 2, 1, b"b".to_vec()), Some(b"ab".to_vec()));
    }
}
