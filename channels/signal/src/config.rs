//! The `channels.signal` config section: the account, where its signal-cli daemon listens, and
//! who may talk to the bot in direct and group chats, with nanobot's camelCase keys (snake_case
//! accepted) and its defaults.

use oxibot_plugin::chat::{DmSection, SectionError, load_section};
use serde::Deserialize;
use serde_json::Value;

/// Whether a list lets everyone through or only the ids on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Everyone.
    Open,
    /// Only these ids (phone numbers, UUIDs, group ids); `"*"` on the list lets everyone in.
    Allowlist(Vec<String>),
}

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The bot's account, `+15550001111`.
    pub account: String,
    /// The daemon's base URL, `http://<daemonHost>:<daemonPort>`.
    pub daemon_url: String,
    /// Whether direct messages are taken at all.
    pub dm_enabled: bool,
    /// Whose direct messages count as allowed by the channel (others still reach the kernel,
    /// whose `allowFrom` or pairing decides).
    pub dm_policy: Policy,
    /// Whether group messages are taken at all.
    pub group_enabled: bool,
    /// Which groups the bot answers in.
    pub group_policy: Policy,
    /// Whether a group message must mention the bot (commands starting with `/` need not).
    pub require_mention: bool,
    /// How many earlier messages of a group are shown with a message that is answered.
    pub group_buffer: usize,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// `phoneNumber` is absent or empty.
    #[error("channels.signal.phoneNumber is missing")]
    MissingAccount,
    /// A policy key names no known policy.
    #[error("channels.signal.{0}.policy must be \"open\" or \"allowlist\", not {1:?}")]
    UnknownPolicy(&'static str, String),
    /// `groupMessageBufferSize` is zero.
    #[error("channels.signal.groupMessageBufferSize must be more than 0")]
    EmptyBuffer,
}

/// The section as written, before checks and defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Raw {
    #[serde(alias = "phone_number", alias = "account")]
    phone_number: String,
    #[serde(alias = "daemon_host")]
    daemon_host: Option<String>,
    #[serde(alias = "daemon_port")]
    daemon_port: Option<u16>,
    #[serde(alias = "group_message_buffer_size")]
    group_message_buffer_size: Option<usize>,
    dm: DmSection,
    group: RawGroup,
}

/// The `group` subsection.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawGroup {
    enabled: Option<bool>,
    policy: Option<String>,
    #[serde(alias = "allow_from")]
    allow_from: Vec<String>,
    #[serde(alias = "require_mention")]
    require_mention: Option<bool>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("signal", section)? };
        let account = raw.phone_number.trim().to_owned();
        if account.is_empty() {
            return Err(ConfigError::MissingAccount);
        }
        let host = raw.daemon_host.map(|h| h.trim().to_owned()).filter(|h| !h.is_empty());
        let host = host.unwrap_or_else(|| "localhost".to_owned());
        let port = raw.daemon_port.unwrap_or(8080);
        let daemon_url = if host.starts_with("http://") || host.starts_with("https://") {
            format!("{}:{port}", host.trim_end_matches('/'))
        } else {
            format!("http://{host}:{port}")
        };
        let group_buffer = raw.group_message_buffer_size.unwrap_or(20);
        if group_buffer == 0 {
            return Err(ConfigError::EmptyBuffer);
        }
        Ok(Config {
            account,
            daemon_url,
            dm_enabled: raw.dm.enabled.unwrap_or(true),
            dm_policy: policy("dm", raw.dm.policy.as_deref(), raw.dm.allow_from)?,
            group_enabled: raw.group.enabled.unwrap_or(false),
            group_policy: policy("group", raw.group.policy.as_deref(), raw.group.allow_from)?,
            require_mention: raw.group.require_mention.unwrap_or(true),
            group_buffer,
        })
    }
}

/// `"open"`, or `"allowlist"` (nanobot's default) with its list.
fn policy(section: &'static str, name: Option<&str>, allow_from: Vec<String>) -> Result<Policy, ConfigError> {
    match name.map(str::trim).unwrap_or("allowlist") {
        "open" => Ok(Policy::Open),
        "" | "allowlist" => Ok(Policy::Allowlist(allow_from)),
        other => Err(ConfigError::UnknownPolicy(section, other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_account_alone_gives_nanobots_defaults() {
        let config = Config::from_value(&json!({"phoneNumber": "+15550001111"})).unwrap();
        assert_eq!(config.daemon_url, "http://localhost:8080");
        assert!(config.dm_enabled && !config.group_enabled && config.require_mention);
        assert_eq!(config.dm_policy, Policy::Allowlist(vec![]));
        assert_eq!(config.group_policy, Policy::Allowlist(vec![]));
        assert_eq!(config.group_buffer, 20);
    }

    #[test]
    fn snake_case_keys_are_read_like_camel_case_ones() {
        let section = json!({"phone_number": "+1", "daemon_host": "127.0.0.1", "daemon_port": 9000,
                             "group_message_buffer_size": 5, "dm": {"enabled": false, "policy": "open"},
                             "group": {"enabled": true, "policy": "allowlist", "allow_from": ["g=="], "require_mention": false}});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.daemon_url, "http://127.0.0.1:9000");
        assert!(!config.dm_enabled && config.group_enabled && !config.require_mention);
        assert_eq!(config.dm_policy, Policy::Open);
        assert_eq!(config.group_policy, Policy::Allowlist(vec!["g==".into()]));
        assert_eq!(config.group_buffer, 5);
    }

    #[test]
    fn missing_or_malformed_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"daemonPort": 1})).unwrap_err();
        assert_eq!(error.to_string(), "channels.signal.phoneNumber is missing");
        let error = Config::from_value(&json!({"phoneNumber": "+1", "group": {"policy": "some"}})).unwrap_err();
        assert_eq!(error.to_string(), "channels.signal.group.policy must be \"open\" or \"allowlist\", not \"some\"");
        let error = Config::from_value(&json!({"phoneNumber": "+1", "daemonPort": "eighty"})).unwrap_err();
        assert!(error.to_string().contains("channels.signal.daemonPort"), "{error}");
        let error = Config::from_value(&json!({"phoneNumber": "+1", "groupMessageBufferSize": 0})).unwrap_err();
        assert!(error.to_string().contains("groupMessageBufferSize"), "{error}");
    }
}
