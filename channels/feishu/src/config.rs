//! The `channels.feishu` config section: the app's credentials, which service (Feishu or Lark)
//! and where its open API lives, and nanobot's chat settings, with nanobot's camelCase keys
//! (snake_case accepted too) and its defaults.

use std::path::PathBuf;

use oxibot_plugin::chat::{SectionError, expand_tilde, load_section, media_dir};
use oxibot_plugin::util::non_empty;
use serde::Deserialize;
use serde_json::Value;

/// Feishu's open API (`domain: "feishu"`, the default).
pub const FEISHU_BASE: &str = "https://open.feishu.cn";
/// Lark's open API (`domain: "lark"`).
pub const LARK_BASE: &str = "https://open.larksuite.com";
/// The reaction put on a message once the kernel has it, unless the config says otherwise.
pub const DEFAULT_REACT_EMOJI: &str = "THUMBSUP";

/// Which group messages reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Only messages that mention the bot (or everyone).
    Mention,
    /// Every message the bot can see.
    Open,
}

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The app's id (`cli_…`).
    pub app_id: String,
    /// The app's secret.
    pub app_secret: String,
    /// The open API base URL (long connection endpoint, tokens, messages), without a trailing
    /// slash: `apiBase`, else the one of `domain`.
    pub api_base: String,
    /// Which group messages are submitted.
    pub group_policy: GroupPolicy,
    /// Whether replies quote the user's message (and, in groups, open a thread for it).
    pub reply_to_message: bool,
    /// Whether replies are shown while they are written, by updating their card.
    pub streaming: bool,
    /// Whether each topic of a group is its own session (`<chat>:<root message>`).
    pub topic_isolation: bool,
    /// The reaction added to a message the kernel accepted; `None` adds none.
    pub react_emoji: Option<String>,
    /// Where pictures, files, voice and videos users send are saved.
    pub media_dir: PathBuf,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.feishu.{0} is missing")]
    Missing(&'static str),
    /// `domain` names no known service.
    #[error("channels.feishu.domain must be \"feishu\" or \"lark\", not {0:?}")]
    UnknownDomain(String),
    /// `groupPolicy` names no known policy.
    #[error("channels.feishu.groupPolicy must be \"mention\" or \"open\", not {0:?}")]
    UnknownGroupPolicy(String),
}

/// The section as written, before checks and defaults. `enabled`, `allowFrom` (the kernel's),
/// and nanobot's `encryptKey`, `verificationToken` (webhook mode only), `doneEmoji`,
/// `toolHintPrefix`, `name`, `instanceId` and `identityKey` are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default, alias = "app_id")]
    app_id: String,
    #[serde(default, alias = "app_secret")]
    app_secret: String,
    #[serde(default, deserialize_with = "non_empty")]
    domain: Option<String>,
    #[serde(default, alias = "api_base", deserialize_with = "non_empty")]
    api_base: Option<String>,
    #[serde(default, alias = "group_policy", deserialize_with = "non_empty")]
    group_policy: Option<String>,
    #[serde(default, alias = "reply_to_message")]
    reply_to_message: bool,
    #[serde(default)]
    streaming: Option<bool>,
    #[serde(default, alias = "topic_isolation")]
    topic_isolation: Option<bool>,
    #[serde(default, alias = "react_emoji")]
    react_emoji: Option<String>,
    #[serde(default, alias = "media_dir", deserialize_with = "non_empty")]
    media_dir: Option<String>,
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let raw: Raw = if section.is_null() { Raw::default() } else { load_section("feishu", section)? };
        let domain_base = match raw.domain.as_deref().map(str::trim).unwrap_or("feishu") {
            "feishu" => FEISHU_BASE,
            "lark" => LARK_BASE,
            other => return Err(ConfigError::UnknownDomain(other.to_owned())),
        };
        let group_policy = match raw.group_policy.as_deref().map(str::trim).unwrap_or("mention") {
            "mention" => GroupPolicy::Mention,
            "open" => GroupPolicy::Open,
            other => return Err(ConfigError::UnknownGroupPolicy(other.to_owned())),
        };
        let api_base = raw.api_base.map(|base| base.trim().trim_end_matches('/').to_owned());
        Ok(Config {
            app_id: required(raw.app_id, "appId")?,
            app_secret: required(raw.app_secret, "appSecret")?,
            api_base: api_base.filter(|base| !base.is_empty()).unwrap_or_else(|| domain_base.to_owned()),
            group_policy,
            reply_to_message: raw.reply_to_message,
            streaming: raw.streaming.unwrap_or(true),
            topic_isolation: raw.topic_isolation.unwrap_or(true),
            react_emoji: react_emoji(raw.react_emoji),
            media_dir: raw.media_dir.map_or_else(|| media_dir("feishu"), expand_tilde),
        })
    }
}

fn required(value: String, key: &'static str) -> Result<String, ConfigError> {
    let value = value.trim().to_owned();
    if value.is_empty() { Err(ConfigError::Missing(key)) } else { Ok(value) }
}

/// The emoji type; absent means the default, empty means none.
fn react_emoji(configured: Option<String>) -> Option<String> {
    let emoji = configured.unwrap_or_else(|| DEFAULT_REACT_EMOJI.to_owned()).trim().to_owned();
    (!emoji.is_empty()).then_some(emoji)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credentials_alone_give_nanobots_defaults_on_feishu() {
        let config = Config::from_value(&json!({"appId": "cli_1", "appSecret": "s"})).unwrap();
        assert_eq!(config.api_base, FEISHU_BASE);
        assert_eq!(config.group_policy, GroupPolicy::Mention);
        assert!(!config.reply_to_message);
        assert!(config.streaming && config.topic_isolation);
        assert_eq!(config.react_emoji.as_deref(), Some("THUMBSUP"));
        assert!(config.media_dir.ends_with("media/feishu"), "{}", config.media_dir.display());
    }

    #[test]
    fn the_lark_domain_and_snake_case_keys_are_read() {
        let section = json!({"app_id": "cli_1", "app_secret": "s", "domain": "lark", "group_policy": "open", "reply_to_message": true,
                             "streaming": false, "topic_isolation": false, "react_emoji": "", "media_dir": "/tmp/m"});
        let config = Config::from_value(&section).unwrap();
        assert_eq!(config.api_base, LARK_BASE);
        assert_eq!(config.group_policy, GroupPolicy::Open);
        assert!(config.reply_to_message && !config.streaming && !config.topic_isolation);
        assert_eq!(config.react_emoji, None);
        assert_eq!(config.media_dir, PathBuf::from("/tmp/m"));
    }

    #[test]
    fn an_api_base_overrides_the_domain() {
        let config = Config::from_value(
            &json!({"appId": "a", "appSecret": "s", "domain": "lark", "apiBase": "http://127.0.0.1:9/"}),
        )
        .unwrap();
        assert_eq!(config.api_base, "http://127.0.0.1:9");
    }

    #[test]
    fn missing_credentials_and_unknown_names_are_refused_with_the_key_named() {
        let error = Config::from_value(&json!({"appId": "a"})).unwrap_err();
        assert_eq!(error.to_string(), "channels.feishu.appSecret is missing");
        let error = Config::from_value(&json!({"appId": "a", "appSecret": "s", "domain": "slack"})).unwrap_err();
        assert!(
            error.to_string().contains("channels.feishu.domain") && error.to_string().contains("\"slack\""),
            "{error}"
        );
        let error = Config::from_value(&json!({"appId": "a", "appSecret": "s", "groupPolicy": "all"})).unwrap_err();
        assert!(error.to_string().contains("channels.feishu.groupPolicy"), "{error}");
    }

    #[test]
    fn nanobots_other_keys_are_accepted_and_ignored() {
        let section = json!({"enabled": true, "appId": "a", "appSecret": "s", "allowFrom": ["ou_1"], "encryptKey": "", "verificationToken": "",
                             "doneEmoji": null, "toolHintPrefix": "🔧", "name": "nanobot", "instanceId": "default", "identityKey": ""});
        assert!(Config::from_value(&section).is_ok());
    }
}
