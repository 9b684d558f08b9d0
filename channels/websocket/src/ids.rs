//! Fresh ids for connections, chats and messages, unique across restarts of the channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// `<prefix>-<process tag>-<n>`: the tag (process id and start time) keeps ids from colliding
/// with those of an earlier run, the counter keeps them apart within this one.
pub fn fresh(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}-{}-{}", process_tag(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Set once per process: its id and the time it started, in hex.
fn process_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default();
        format!("{:x}{:x}", std::process::id(), started)
    })
}

#[cfg(test)]
mod tests {
    use super::fresh;

    #[test]
    fn fresh_ids_differ_and_carry_their_prefix() {
        let (a, b) = (fresh("ws"), fresh("ws"));
        assert_ne!(a, b);
        assert!(a.starts_with("ws-"), "{a}");
    }
}
