//! Growing waits between attempts to reach a chat service: the first wait, then `factor` times
//! longer after each failed attempt up to a cap, started over once a connection works.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wait before the next attempt to connect (or poll, or sign in).
///
/// ```
/// use std::time::Duration;
/// use oxibot_plugin::chat::Backoff;
///
/// let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// assert_eq!(backoff.next_wait(), Duration::from_secs(1));
/// assert_eq!(backoff.next_wait(), Duration::from_secs(2));
/// backoff.reset(); // the connection worked
/// assert_eq!(backoff.next_wait(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first wait (after a reset, the first non-zero one).
    initial: Duration,
    /// The longest wait.
    longest: Duration,
    /// How much longer each wait is than the one before (at least 1).
    factor: f64,
    /// Each wait is shortened by up to this fraction of itself, at random (0 to 1).
    jitter: f64,
    /// Whether the first attempt after a reset goes at once.
    at_once_after_reset: bool,
    /// The wait [`Backoff::next_wait`] returns next; `None` means "at once".
    next: Option<Duration>,
}

impl Backoff {
    /// Waits of 1 s, 2 s, 4 s, … up to a minute: what most chat services' own clients do.
    pub const UP_TO_A_MINUTE: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

    /// Waits of `initial`, then doubling up to `longest`; no jitter. A `const fn`, so a
    /// channel can name its schedule once as a constant.
    pub const fn new(initial: Duration, longest: Duration) -> Backoff {
        Backoff { initial, longest, factor: 2.0, jitter: 0.0, at_once_after_reset: false, next: Some(initial) }
    }

    /// Each wait is `factor` times the one before (values below 1 count as 1).
    pub fn factor(mut self, factor: f64) -> Backoff {
        self.factor = factor.max(1.0);
        self
    }

    /// Each wait is shortened by a random part of up to `fraction` of itself (0 to 1), so that
    /// many clients failing together do not retry in step.
    pub fn jitter(mut self, fraction: f64) -> Backoff {
        self.jitter = fraction.clamp(0.0, 1.0);
        self
    }

    /// The first attempt after a reset (and the very first) goes at once; the waits start
    /// with the second: for a connection that worked and then dropped.
    pub const fn at_once_after_reset(mut self) -> Backoff {
        self.at_once_after_reset = true;
        self.next = None;
        self
    }

    /// The wait to use now; the following one is longer, up to the cap.
    pub fn next_wait(&mut self) -> Duration {
        let Some(wait) = self.next else {
            self.next = Some(self.initial);
            return Duration::ZERO;
        };
        let grown = Duration::try_from_secs_f64(wait.as_secs_f64() * self.factor).unwrap_or(self.longest);
        self.next = Some(grown.min(self.longest));
        let wait = wait.min(self.longest);
        if self.jitter > 0.0 { wait.mul_f64(1.0 - self.jitter * jitter()) } else { wait }
    }

    /// Starts over from the first wait, after an attempt that worked.
    pub fn reset(&mut self) {
        self.next = if self.at_once_after_reset { None } else { Some(self.initial) };
    }
}

/// A number in `[0, 1)` that differs from one call (and process) to the next; good enough to
/// spread heartbeats and reconnects, not for anything secret.
pub fn jitter() -> f64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
    (mixed >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(backoff: &mut Backoff, count: usize) -> Vec<u64> {
        (0..count).map(|_| backoff.next_wait().as_secs()).collect()
    }

    #[test]
    fn waits_double_up_to_the_cap_and_start_over_after_a_reset() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        assert_eq!(secs(&mut backoff, 7), [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.next_wait(), Duration::from_secs(1));
    }

    #[test]
    fn the_usual_schedule_doubles_from_a_second_up_to_a_minute() {
        let mut backoff = Backoff::UP_TO_A_MINUTE;
        assert_eq!(secs(&mut backoff, 8), [1, 2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn a_backoff_that_goes_at_once_after_a_reset_waits_from_the_second_attempt() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60)).at_once_after_reset();
        assert_eq!(secs(&mut backoff, 9), [0, 1, 2, 4, 8, 16, 32, 60, 60]);
        backoff.reset();
        assert_eq!(secs(&mut backoff, 2), [0, 1]);
    }

    #[test]
    fn another_factor_grows_the_waits_by_it() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10)).factor(3.0);
        let millis: Vec<u128> = (0..4).map(|_| backoff.next_wait().as_millis()).collect();
        assert_eq!(millis, [100, 300, 900, 2700]);
    }

    #[test]
    fn jitter_only_ever_shortens_a_wait_and_by_at_most_its_fraction() {
        let mut backoff = Backoff::new(Duration::from_secs(8), Duration::from_secs(8)).jitter(0.5);
        for _ in 0..50 {
            let wait = backoff.next_wait();
            assert!(wait > Duration::from_secs(4) && wait <= Duration::from_secs(8), "{wait:?}");
        }
    }

    #[test]
    fn jitter_stays_between_zero_and_one() {
        for _ in 0..100 {
            let value = jitter();
            assert!((0.0..1.0).contains(&value), "{value}");
        }
    }
}
