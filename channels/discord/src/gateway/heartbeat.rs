//! The heartbeat schedule of one Gateway connection, and how it notices a zombied connection
//! (a beat went unacknowledged until the next one was due).

use std::time::Duration;

use tokio::time::Instant;

/// What to do when a beat is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Send a heartbeat now.
    Send,
    /// The previous beat was never acknowledged: the connection is dead; reconnect.
    Zombie,
}

/// When the next beat is due and whether the last one was acknowledged.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    interval: Duration,
    next: Instant,
    awaiting_ack: bool,
}

impl Heartbeat {
    /// A schedule whose first beat comes after `interval × jitter` (jitter in `[0, 1)`), as
    /// Discord asks, so that many clients reconnecting at once do not beat in step.
    pub fn start(interval: Duration, jitter: f64, now: Instant) -> Heartbeat {
        Heartbeat { interval, next: now + interval.mul_f64(jitter.clamp(0.0, 1.0)), awaiting_ack: false }
    }

    /// When the next beat is due.
    pub fn due(&self) -> Instant {
        self.next
    }

    /// The beat that is due at `now`: send it (and schedule the next), or give up on a
    /// connection whose last beat was not acknowledged.
    pub fn beat(&mut self, now: Instant) -> Beat {
        if self.awaiting_ack {
            return Beat::Zombie;
        }
        self.awaiting_ack = true;
        self.next = now + self.interval;
        Beat::Send
    }

    /// The server acknowledged a heartbeat.
    pub fn acknowledged(&mut self) {
        self.awaiting_ack = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_beat_comes_after_a_fraction_of_the_interval_then_every_interval() {
        let now = Instant::now();
        let mut heart = Heartbeat::start(Duration::from_millis(1000), 0.25, now);
        assert_eq!(heart.due(), now + Duration::from_millis(250));
        assert_eq!(heart.beat(heart.due()), Beat::Send);
        assert_eq!(heart.due(), now + Duration::from_millis(1250));
    }

    #[test]
    fn a_beat_due_while_the_previous_one_is_unacknowledged_means_a_zombie() {
        let now = Instant::now();
        let mut heart = Heartbeat::start(Duration::from_millis(100), 0.0, now);
        assert_eq!(heart.beat(now), Beat::Send);
        heart.acknowledged();
        assert_eq!(heart.beat(heart.due()), Beat::Send);
        assert_eq!(heart.beat(heart.due()), Beat::Zombie);
    }
}
