//! [`RepeatGuard`]: refuses the same URL or query more than twice within one turn, so a model
//! stuck in a loop is told to stop instead of fetching forever.
//!
//! The plugin does not see turns: `CallContext` carries the session key but no turn id. A turn
//! is approximated as a burst of calls from one session: calls belong to the same turn while
//! each comes within [`TURN_GAP`] of that session's previous call, and a longer pause (the
//! user reading and answering) starts a new turn with fresh counts. Calls without a session key
//! share one anonymous session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The pause after which a session's next call counts as a new turn.
pub const TURN_GAP: Duration = Duration::from_secs(120);
/// How often the same URL or query may be asked for within a turn.
pub const MAX_REPEATS: u32 = 2;

/// Counts of each URL and query per session within the current turn.
#[derive(Debug, Default)]
pub struct RepeatGuard {
    /// Session key → its current turn's counts; a mutex because calls run concurrently.
    sessions: Mutex<HashMap<String, TurnCounts>>,
}

/// One session's current turn.
#[derive(Debug)]
struct TurnCounts {
    /// When the session last made a call.
    last: Instant,
    /// How often each key was asked for.
    counts: HashMap<String, u32>,
}

impl RepeatGuard {
    /// Records a call for `key` (say `web_fetch https://…`) in `session`, or refuses it when
    /// it was already made [`MAX_REPEATS`] times this turn; the error is for the model.
    pub fn admit(&self, session: Option<&str>, key: &str) -> Result<(), String> {
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.retain(|_, turn| now.duration_since(turn.last) <= TURN_GAP);
        let turn = sessions
            .entry(session.unwrap_or_default().to_owned())
            .or_insert_with(|| TurnCounts { last: now, counts: HashMap::new() });
        turn.last = now;
        let count = turn.counts.entry(key.to_owned()).or_insert(0);
        if *count >= MAX_REPEATS {
            return Err(format!(
                "refused: {key} was already done {MAX_REPEATS} times in this turn; use the results you have, \
                 try something different, or answer the user"
            ));
        }
        *count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_third_identical_call_in_a_turn_is_refused() {
        let guard = RepeatGuard::default();
        assert!(guard.admit(Some("cli:1"), "web_fetch https://a").is_ok());
        assert!(guard.admit(Some("cli:1"), "web_fetch https://a").is_ok());
        let refused = guard.admit(Some("cli:1"), "web_fetch https://a").unwrap_err();
        assert!(refused.contains("already done 2 times"), "{refused}");
        assert!(guard.admit(Some("cli:1"), "web_fetch https://b").is_ok(), "other URLs are fine");
        assert!(guard.admit(Some("cli:2"), "web_fetch https://a").is_ok(), "other sessions are fine");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_longer_than_the_turn_gap_starts_a_new_turn() {
        let guard = RepeatGuard::default();
        for _ in 0..MAX_REPEATS {
            guard.admit(Some("cli:1"), "web_search tea").unwrap();
            tokio::time::advance(Duration::from_secs(60)).await;
        }
        assert!(guard.admit(Some("cli:1"), "web_search tea").is_err(), "60 s apart is the same turn");
        tokio::time::advance(TURN_GAP + Duration::from_secs(1)).await;
        assert!(guard.admit(Some("cli:1"), "web_search tea").is_ok());
    }
}
