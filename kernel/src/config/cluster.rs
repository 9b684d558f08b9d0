//! The `cluster` section of `config.json`: cluster mode over NATS JetStream (issue 31), e.g.
//! `"cluster": {"nats": "nats://127.0.0.1:4222", "node": "kernel-a"}`. Absent, the kernel is
//! the single-host kernel it always was and no NATS code runs. Only the shape is checked here
//! (no I/O): a wrong value is an error naming the file and the key.

use serde::Deserialize;

/// How long a kernel's ownership of a session lasts without renewal, unless configured.
pub const DEFAULT_TTL_SECONDS: u64 = 10;

/// Shortest and longest ownership TTL accepted: under 2 s a busy host's renewals would miss;
/// over an hour a dead kernel's sessions would wait too long for another owner.
const TTL_RANGE: std::ops::RangeInclusive<u64> = 2..=3600;

/// `cluster`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterConfig {
    /// The NATS server(s) to connect to, comma-separated (`nats://host:port`, `tls://host:port`).
    pub nats: String,
    /// This kernel's name in the cluster, unique among its kernels (`kernel-a`).
    pub node: String,
    /// Seconds a kernel's ownership of a session (and the scheduler's lead) lasts without
    /// renewal: a kernel that dies loses its sessions after this long.
    #[serde(default = "default_ttl", alias = "ttl_seconds")]
    pub ttl_seconds: u64,
    /// Channels every kernel runs itself (a websocket or API channel behind a load balancer,
    /// each kernel on its own host); every other channel runs on one kernel at a time, the
    /// one that owns it (one Telegram poller per bot).
    #[serde(default, alias = "local_channels")]
    pub local_channels: Vec<String>,
}

fn default_ttl() -> u64 {
    DEFAULT_TTL_SECONDS
}

impl ClusterConfig {
    /// The server URLs, in the order written.
    pub fn servers(&self) -> Vec<&str> {
        self.nats.split(',').map(str::trim).collect()
    }

    /// Checks the values; `Err((key, problem))` names the key under `cluster`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for server in self.servers() {
            check_server(server).map_err(|problem| ("cluster.nats", problem))?;
        }
        check_node(&self.node).map_err(|problem| ("cluster.node", problem))?;
        if !TTL_RANGE.contains(&self.ttl_seconds) {
            return Err((
                "cluster.ttlSeconds",
                format!(
                    "{} is out of range: give {} to {} seconds",
                    self.ttl_seconds,
                    TTL_RANGE.start(),
                    TTL_RANGE.end()
                ),
            ));
        }
        Ok(())
    }
}

/// One server URL: `nats://` or `tls://`, then `host:port` with a numeric port.
fn check_server(server: &str) -> Result<(), String> {
    let expected = "expected nats://host:port (several separated by commas)";
    let Some(rest) = server.strip_prefix("nats://").or_else(|| server.strip_prefix("tls://")) else {
        return Err(format!("`{server}` is not a NATS URL: {expected}"));
    };
    let address = rest.rsplit_once('@').map_or(rest, |(_, address)| address);
    let port_ok = address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if port_ok { Ok(()) } else { Err(format!("`{server}` has no host and port: {expected}")) }
}

/// A node name: 1 to 64 letters, digits, `-` or `_` (it is written into keys and logs).
fn check_node(node: &str) -> Result<(), String> {
    let valid_chars = node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !node.is_empty() && node.len() <= 64 && valid_chars {
        Ok(())
    } else {
        Err(format!("`{node}` is not a node name: use 1 to 64 letters, digits, `-` or `_`"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn error_of(section: &str) -> String {
        let text = format!(r#"{{"cluster": {section}}}"#);
        Config::parse(&text, Path::new("/etc/oxibot/config.json")).unwrap_err().to_string()
    }

    #[test]
    fn a_cluster_section_is_read_with_its_default_ttl() {
        let text = r#"{"cluster": {"nats": "nats://127.0.0.1:4222, nats://10.0.0.2:4222", "node": "kernel-a"}}"#;
        let cluster = Config::parse(text, Path::new("c.json")).unwrap().cluster.unwrap();
        assert_eq!(cluster.servers(), ["nats://127.0.0.1:4222", "nats://10.0.0.2:4222"]);
        assert_eq!((cluster.node.as_str(), cluster.ttl_seconds), ("kernel-a", 10));
        assert!(cluster.local_channels.is_empty(), "every channel runs on one kernel unless told");
    }

    #[test]
    fn without_a_cluster_section_the_kernel_is_single_host() {
        assert!(Config::parse("{}", Path::new("c.json")).unwrap().cluster.is_none());
    }

    #[test]
    fn a_bad_url_names_the_file_and_the_key() {
        let text = error_of(r#"{"nats": "http://127.0.0.1:4222", "node": "a"}"#);
        assert!(text.contains("/etc/oxibot/config.json") && text.contains("cluster.nats"), "{text}");
        assert!(text.contains("nats://host:port"), "{text}");
        assert!(error_of(r#"{"nats": "nats://127.0.0.1", "node": "a"}"#).contains("no host and port"));
    }

    #[test]
    fn a_bad_node_name_or_ttl_names_its_key() {
        assert!(error_of(r#"{"nats": "nats://h:1", "node": "a b"}"#).contains("cluster.node"));
        assert!(error_of(r#"{"nats": "nats://h:1", "node": ""}"#).contains("cluster.node"));
        let ttl = error_of(r#"{"nats": "nats://h:1", "node": "a", "ttlSeconds": 1}"#);
        assert!(ttl.contains("cluster.ttlSeconds") && ttl.contains("out of range"), "{ttl}");
    }

    #[test]
    fn a_missing_node_or_a_typo_names_the_key() {
        let missing = error_of(r#"{"nats": "nats://h:1"}"#);
        assert!(missing.contains("cluster") && missing.contains("node"), "{missing}");
        let typo = error_of(r#"{"nats": "nats://h:1", "node": "a", "ttl": 5}"#);
        assert!(typo.contains("cluster") && typo.contains("ttl"), "{typo}");
    }
}
