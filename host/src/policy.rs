//! Timeouts and the restart policy: exponential backoff and a restart-intensity limit.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How plugins are restarted after they die.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    /// More restarts than this within `window` marks the plugin failed.
    pub max_restarts: usize,
    /// The window over which restarts are counted.
    pub window: Duration,
    /// Delay before the second consecutive restart; it doubles for each one after that.
    /// The first restart after a healthy run is immediate.
    pub backoff_base: Duration,
    /// Upper bound on the delay.
    pub backoff_max: Duration,
    /// A plugin that ran this long without dying is healthy again (backoff resets).
    pub stable_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 5,
            window: Duration::from_secs(60),
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            stable_after: Duration::from_secs(30),
        }
    }
}

/// What to do after a plugin instance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again after this delay.
    RestartAfter(Duration),
    /// Stop trying: too many restarts within the window.
    GiveUp {
        /// Restarts counted in the window.
        restarts: usize,
    },
}

/// The restart history of one plugin.
#[derive(Debug, Default)]
pub struct RestartTracker {
    /// When recent restarts happened, oldest first.
    recent: VecDeque<Instant>,
    /// Failures in a row without a stable run in between.
    consecutive: u32,
}

impl RestartTracker {
    /// Decides what to do after an instance that ran for `ran_for` ended at `now`.
    pub fn record_death(&mut self, policy: &RestartPolicy, ran_for: Duration, now: Instant) -> Verdict {
        if ran_for >= policy.stable_after {
            self.consecutive = 0;
        }
        while self.recent.front().is_some_and(|t| now.duration_since(*t) > policy.window) {
            self.recent.pop_front();
        }
        if self.recent.len() >= policy.max_restarts {
            return Verdict::GiveUp { restarts: self.recent.len() };
        }
        self.recent.push_back(now);
        self.consecutive += 1;
        Verdict::RestartAfter(backoff(policy, self.consecutive))
    }
}

fn backoff(policy: &RestartPolicy, consecutive: u32) -> Duration {
    if consecutive <= 1 {
        return Duration::ZERO;
    }
    let factor = 1u32.checked_shl(consecutive - 2).unwrap_or(u32::MAX);
    policy.backoff_base.saturating_mul(factor).min(policy.backoff_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_restart_is_immediate_then_delays_double_up_to_the_cap() {
        let policy = RestartPolicy { max_restarts: 100, ..RestartPolicy::default() };
        let mut tracker = RestartTracker::default();
        let now = Instant::now();
        let delays: Vec<_> = (0..8)
            .map(|_| match tracker.record_death(&policy, Duration::ZERO, now) {
                Verdict::RestartAfter(d) => d.as_millis(),
                Verdict::GiveUp { .. } => panic!("gave up too early"),
            })
            .collect();
        assert_eq!(delays, [0, 100, 200, 400, 800, 1600, 3200, 5000]);
    }

    #[test]
    fn too_many_restarts_in_the_window_gives_up() {
        let policy = RestartPolicy::default();
        let mut tracker = RestartTracker::default();
        let now = Instant::now();
        for _ in 0..policy.max_restarts {
            assert!(matches!(tracker.record_death(&policy, Duration::ZERO, now), Verdict::RestartAfter(_)));
        }
        assert_eq!(tracker.record_death(&policy, Duration::ZERO, now), Verdict::GiveUp { restarts: 5 });
    }

    #[test]
    fn restarts_outside_the_window_are_forgotten_and_a_stable_run_resets_backoff() {
        let policy = RestartPolicy::default();
        let mut tracker = RestartTracker::default();
        let start = Instant::now();
        for _ in 0..policy.max_restarts {
            tracker.record_death(&policy, Duration::ZERO, start);
        }
        let later = start + policy.window + Duration::from_secs(1);
        assert_eq!(tracker.record_death(&policy, policy.stable_after, later), Verdict::RestartAfter(Duration::ZERO));
    }
}
