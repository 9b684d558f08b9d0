//! Names in the buckets: a session key (`telegram:12345`) becomes a key-value key, which
//! allows only letters, digits and `-/_=.`; every other byte is written as `=XX` (hex).

/// The bucket of session ownership: one key per session, its value the owner's node name.
pub const SESSIONS_BUCKET: &str = "oxibot_sessions";

/// The bucket of channel ownership: one key per channel that runs on one kernel at a time,
/// its value the node running the channel's plugin.
pub const CHANNELS_BUCKET: &str = "oxibot_channels";

/// The bucket of leader keys (`scheduler`): one key per role, its value the leader's node name.
pub const LEADERS_BUCKET: &str = "oxibot_leaders";

/// The bucket of cron firings: one key per job and due time, made by the kernel that fires it,
/// so a job never fires twice for one due time, across a change of scheduler too.
pub const FIRED_BUCKET: &str = "oxibot_fired";

/// The bucket of the kernels in the cluster: one key per node, renewed by the node within the
/// TTL with what it runs (how many sessions), so a node that died drops out.
pub const NODES_BUCKET: &str = "oxibot_nodes";

/// The key of job `job`'s firing due at `due_ms`.
pub fn firing_key(job: &str, due_ms: i64) -> String {
    format!("{}.{due_ms}", session_key(job))
}

/// The leader key of the one scheduler of cron jobs and the heartbeat.
pub const SCHEDULER_KEY: &str = "scheduler";

/// The key-value key of session `key`: readable where it can be, never ambiguous.
pub fn session_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 8);
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("={byte:02X}"));
        }
    }
    out
}

/// The session key a key-value key (or subject token) was made from by [`session_key`];
/// `None` for one it cannot have made.
pub fn decode_key(encoded: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'=' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_key_decodes_to_the_session_key() {
        for key in ["telegram:12345", "a.b c", "α:1", "plain"] {
            assert_eq!(decode_key(&session_key(key)).as_deref(), Some(key));
        }
        assert_eq!(decode_key("bad=Z"), None);
    }

    #[test]
    fn session_keys_become_valid_bucket_keys_and_stay_apart() {
        assert_eq!(session_key("telegram:12345"), "telegram=3A12345");
        assert_eq!(session_key("cli:direct"), "cli=3Adirect");
        assert_ne!(session_key("a:b"), session_key("a=3Ab"));
        assert_eq!(session_key("α"), "=CE=B1");
    }
}
