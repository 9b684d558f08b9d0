//! Helpers for channels that serve local clients themselves (a WebSocket or HTTP server):
//! fresh ids and the loopback check that decides whether a token is required.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `<prefix>-<process tag>-<n>`: the tag (process id and start time) keeps ids from colliding
/// with those of an earlier run, the counter keeps them apart within this one.
pub fn fresh_id(prefix: &str) -> String {
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

/// Whether `host` only accepts connections from this machine (`127.0.0.1`, `::1`,
/// `localhost`); a server bound anywhere else must require a token.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(address) => address.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_differ_and_carry_their_prefix() {
        let (a, b) = (fresh_id("api"), fresh_id("api"));
        assert_ne!(a, b);
        assert!(a.starts_with("api-"), "{a}");
    }

    #[test]
    fn only_loopback_addresses_and_localhost_count_as_local() {
        for host in ["127.0.0.1", "::1", "[::1]", "localhost", "LOCALHOST", "127.1.2.3"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["0.0.0.0", "192.168.1.4", "::", "example.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
