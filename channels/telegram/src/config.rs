//! The `channels.telegram` section of config.json: camelCase keys as nanobot writes them, with
//! snake_case accepted too; unknown keys (`enabled`, `allowFrom`, …) belong to the kernel.

use std::path::PathBuf;
use std::time::Duration;

use oxibot_plugin::chat::{expand_tilde, load_section, media_dir};
use oxibot_plugin::warn;
use serde::Deserialize;
use serde_json::Value;

use crate::error::TelegramError;

/// Where the Bot API lives unless `apiBase` says otherwise.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";
/// How long one `getUpdates` call waits for news unless `pollTimeout` says otherwise.
const DEFAULT_POLL_TIMEOUT_SECS: u64 = 30;
/// Telegram holds a long poll for at most this long.
const MAX_POLL_TIMEOUT_SECS: u64 = 50;
/// How long a submitted message may wait for the kernel's acceptance before Telegram is asked
/// for it again.
const DEFAULT_ACCEPT_TIMEOUT_SECS: u64 = 60;

/// Which group messages reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Only messages that mention the bot or reply to it (the default).
    Mention,
    /// Every message in the group.
    Open,
}

/// The channel's settings, with defaults filled in.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bot token from @BotFather.
    pub token: String,
    /// The Bot API's base URL, without a trailing slash.
    pub api_base: String,
    /// How long one `getUpdates` call may wait for news.
    pub poll_timeout: Duration,
    /// Where downloaded attachments go.
    pub media_dir: PathBuf,
    /// Which group messages reach the kernel.
    pub group_policy: GroupPolicy,
    /// Whether replies quote the user's message.
    pub reply_to_message: bool,
    /// How long a submitted message waits for acceptance before it is fetched again.
    pub accept_timeout: Duration,
    /// An HTTP(S) proxy for every request to Telegram.
    pub proxy: Option<String>,
}

/// The section as written; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawConfig {
    token: Option<String>,
    #[serde(alias = "api_base")]
    api_base: Option<String>,
    #[serde(alias = "poll_timeout")]
    poll_timeout: Option<u64>,
    #[serde(alias = "media_dir")]
    media_dir: Option<String>,
    #[serde(alias = "group_policy")]
    group_policy: Option<String>,
    #[serde(alias = "reply_to_message")]
    reply_to_message: Option<bool>,
    #[serde(alias = "accept_timeout")]
    accept_timeout: Option<u64>,
    proxy: Option<String>,
}

impl Config {
    /// Reads the section; fails when it is malformed or has no token.
    pub fn from_value(section: &Value) -> Result<Config, TelegramError> {
        let raw: RawConfig = load_section("telegram", section)?;
        let token =
            raw.token.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).ok_or_else(|| {
                TelegramError::Config("`token` is missing (the bot token from @BotFather)".to_owned())
            })?;
        let api_base =
            non_empty(raw.api_base).unwrap_or_else(|| DEFAULT_API_BASE.to_owned()).trim_end_matches('/').to_owned();
        // A zero timeout would turn the long poll into a busy loop.
        let poll_timeout = raw.poll_timeout.unwrap_or(DEFAULT_POLL_TIMEOUT_SECS).clamp(1, MAX_POLL_TIMEOUT_SECS);
        let media_dir = match non_empty(raw.media_dir) {
            Some(dir) => expand_tilde(dir),
            None => media_dir("telegram"),
        };
        Ok(Config {
            token,
            api_base,
            poll_timeout: Duration::from_secs(poll_timeout),
            media_dir,
            group_policy: group_policy(raw.group_policy.as_deref()),
            reply_to_message: raw.reply_to_message.unwrap_or(true),
            accept_timeout: Duration::from_secs(raw.accept_timeout.unwrap_or(DEFAULT_ACCEPT_TIMEOUT_SECS).max(1)),
            proxy: non_empty(raw.proxy),
        })
    }
}

/// `"open"` opens groups; anything else keeps the safe default (unknown values are logged).
fn group_policy(value: Option<&str>) -> GroupPolicy {
    match value.map(str::trim) {
        Some(policy) if policy.eq_ignore_ascii_case("open") => GroupPolicy::Open,
        None | Some("") => GroupPolicy::Mention,
        Some(policy) if policy.eq_ignore_ascii_case("mention") => GroupPolicy::Mention,
        Some(other) => {
            warn!("unknown groupPolicy {other:?}; answering only mentions in groups");
            GroupPolicy::Mention
        }
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nanobots_camel_case_section_is_read_with_its_extra_keys_ignored() {
        let section = json!({"enabled": true, "token": " 123:abc ", "allowFrom": ["42"], "proxy": null, "apiBase": "http://127.0.0.1:9/",
                             "pollTimeout": 1, "mediaDir": "/tmp/m", "groupPolicy": "open", "replyToMessage": false});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.token, "123:abc");
        assert_eq!(config.api_base, "http://127.0.0.1:9");
        assert_eq!(config.poll_timeout, Duration::from_secs(1));
        assert_eq!(config.media_dir, PathBuf::from("/tmp/m"));
        assert_eq!(config.group_policy, GroupPolicy::Open);
        assert!(!config.reply_to_message);
        assert_eq!(config.proxy, None);
    }

    #[test]
    fn snake_case_keys_are_accepted_too() {
        let section = json!({"token": "t", "api_base": "http://x", "poll_timeout": 5, "media_dir": "/m", "group_policy": "mention", "accept_timeout": 2});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(
            (config.api_base.as_str(), config.poll_timeout, config.group_policy),
            ("http://x", Duration::from_secs(5), GroupPolicy::Mention)
        );
        assert_eq!(config.media_dir, PathBuf::from("/m"));
        assert_eq!(config.accept_timeout, Duration::from_secs(2));
    }

    #[test]
    fn defaults_are_the_public_api_thirty_second_polls_mentions_only_and_replies() {
        let config = Config::from_value(&json!({"token": "t"})).unwrap();
        assert_eq!(config.api_base, DEFAULT_API_BASE);
        assert_eq!(config.poll_timeout, Duration::from_secs(30));
        assert_eq!(config.group_policy, GroupPolicy::Mention);
        assert!(config.reply_to_message);
        assert!(config.media_dir.ends_with("media/telegram"), "{}", config.media_dir.display());
    }

    #[test]
    fn a_missing_token_is_a_config_error_that_says_so() {
        let error = Config::from_value(&json!({"enabled": true})).unwrap_err();
        assert!(error.to_string().contains("`token` is missing"), "{error}");
        assert!(Config::from_value(&json!({"token": "  "})).is_err());
    }

    #[test]
    fn an_unknown_group_policy_falls_back_to_mentions() {
        assert_eq!(group_policy(Some("allowlist")), GroupPolicy::Mention);
        assert_eq!(group_policy(Some("OPEN")), GroupPolicy::Open);
    }

    #[test]
    fn a_poll_timeout_is_kept_between_one_second_and_telegrams_limit() {
        let config = Config::from_value(&json!({"token": "t", "pollTimeout": 600})).unwrap();
        assert_eq!(config.poll_timeout, Duration::from_secs(50));
        let config = Config::from_value(&json!({"token": "t", "pollTimeout": 0})).unwrap();
        assert_eq!(config.poll_timeout, Duration::from_secs(1));
    }
}
