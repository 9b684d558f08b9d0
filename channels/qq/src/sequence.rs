//! The gateway's sequence numbers, and which of them are handled: a message event counts as
//! handled only once the kernel has accepted its message. Heartbeats and a Resume report the
//! last number up to which every event is handled, so after a drop QQ sends again what the
//! kernel does not have yet.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Sequence numbers seen and handled; cheap to clone, clones share them.
#[derive(Debug, Clone, Default)]
pub struct Sequence {
    inner: Arc<Mutex<Numbers>>,
}

#[derive(Debug, Default)]
struct Numbers {
    /// Seen and not handled yet.
    open: BTreeSet<u64>,
    /// The highest number seen.
    highest: Option<u64>,
}

impl Sequence {
    /// An event with number `seq` arrived.
    pub fn seen(&self, seq: u64) {
        let mut numbers = self.lock();
        numbers.open.insert(seq);
        numbers.highest = numbers.highest.max(Some(seq));
    }

    /// The event with number `seq` is handled.
    pub fn handled(&self, seq: u64) {
        self.lock().open.remove(&seq);
    }

    /// The last number up to which every event is handled; `None` before any.
    pub fn handled_up_to(&self) -> Option<u64> {
        let numbers = self.lock();
        match numbers.open.first() {
            Some(0 | 1) => None,
            Some(first) => Some(first - 1),
            None => numbers.highest,
        }
    }

    /// A new session starts numbering again.
    pub fn restart(&self) {
        *self.lock() = Numbers::default();
    }

    fn lock(&self) -> MutexGuard<'_, Numbers> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_stops_before_the_first_event_not_handled() {
        let sequence = Sequence::default();
        assert_eq!(sequence.handled_up_to(), None);
        for seq in 1..=4 {
            sequence.seen(seq);
        }
        sequence.handled(1);
        sequence.handled(3);
        sequence.handled(4);
        assert_eq!(sequence.handled_up_to(), Some(1), "2 is still with the kernel");
        sequence.handled(2);
        assert_eq!(sequence.handled_up_to(), Some(4));
        sequence.restart();
        assert_eq!(sequence.handled_up_to(), None);
    }
}
