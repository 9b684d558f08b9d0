//! Growing waits between attempts to reach Slack: 1 s, 2 s, 4 s, … up to 30 s.

use std::time::Duration;

/// The first wait.
const FIRST: Duration = Duration::from_secs(1);
/// The longest wait.
const LONGEST: Duration = Duration::from_secs(30);

/// The wait before the next attempt; doubles after each one until [`Backoff::reset`].
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { next: FIRST }
    }
}

impl Backoff {
    /// The wait to use now; the following one is twice as long (at most 30 s).
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(LONGEST);
        wait
    }

    /// Starts over from the first wait (after a connection that worked).
    pub fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_thirty_seconds_and_start_over_after_a_reset() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = (0..7).map(|_| backoff.next_wait().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.next_wait(), FIRST);
    }
}
