//! Reading a channel's config section (`channels.<name>` of the kernel's config, handed over in
//! `OXIBOT_CHANNEL_CONFIG` and kept by [`ChannelHandle::config`](crate::ChannelHandle::config))
//! into the channel's settings type, with errors that name the key at fault.

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Why a config section does not have the shape the channel expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionError {
    /// The channel's name.
    pub channel: String,
    /// The key whose value is wrong (as written in the section), when one could be told.
    pub key: Option<String>,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for SectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "invalid channels.{}.{key}: {}", self.channel, self.reason),
            None => write!(f, "invalid channels.{} config: {}", self.channel, self.reason),
        }
    }
}

impl std::error::Error for SectionError {}

/// Reads the section of channel `channel` into `T`. When it does not fit, the error names the
/// first key whose value alone does not fit `T`, or the missing key `T` requires.
pub fn load_section<T: DeserializeOwned>(channel: &str, section: &Value) -> Result<T, SectionError> {
    T::deserialize(section).map_err(|error| {
        let reason = error.to_string();
        let key = missing_key(&reason).or_else(|| key_at_fault::<T>(section));
        SectionError { channel: channel.to_owned(), key, reason }
    })
}

/// A channel's settings: read from its section, then checked.
pub trait ChannelConfig: DeserializeOwned {
    /// The channel's name; its section is `channels.<CHANNEL>`.
    const CHANNEL: &'static str;
    /// Why settings are refused.
    type Error: From<SectionError>;

    /// Refuses settings that are unsafe or unusable; all are fine unless a channel says so.
    fn check(&self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Reads and checks the section.
    fn load(section: &Value) -> Result<Self, Self::Error> {
        let config: Self = load_section(Self::CHANNEL, section)?;
        config.check()?;
        Ok(config)
    }
}

/// A required text setting, trimmed; `None` when it is empty (the channel reports it missing).
pub fn filled(value: String) -> Option<String> {
    let value = value.trim().to_owned();
    (!value.is_empty()).then_some(value)
}

/// The emoji a channel puts on a message once the kernel has it, unless its config says
/// otherwise.
pub const DEFAULT_REACT_EMOJI: &str = "eyes";

/// Which messages of group chats (not direct messages) reach the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Only messages that mention the bot.
    Mention,
    /// Every message the bot can see.
    Open,
    /// Every message in the listed chats, none elsewhere.
    Allowlist(Vec<String>),
}

impl GroupPolicy {
    /// Whether a message in chat `chat` passes, given whether it mentions the bot.
    pub fn admits(&self, chat: &str, mentioned: bool) -> bool {
        match self {
            GroupPolicy::Mention => mentioned,
            GroupPolicy::Open => true,
            GroupPolicy::Allowlist(chats) => chats.iter().any(|allowed| allowed == chat),
        }
    }
}

/// The name of the emoji a channel reacts with (`eyes`, written `:eyes:` or `eyes`): `default`
/// when unset, none when set empty.
pub fn emoji_name(configured: Option<String>, default: &str) -> Option<String> {
    let emoji = configured.unwrap_or_else(|| default.to_owned());
    let emoji = emoji.trim().trim_matches(':').to_owned();
    (!emoji.is_empty()).then_some(emoji)
}

/// The `dm` subsection as written (`enabled`, `policy`, `allowFrom`), shared by the channels
/// that take nanobot's settings for direct messages; each channel reads the policy itself.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DmSection {
    /// `dm.enabled`.
    pub enabled: Option<bool>,
    /// `dm.policy`, e.g. `open` or `allowlist`.
    pub policy: Option<String>,
    /// `dm.allowFrom`.
    #[serde(alias = "allow_from")]
    pub allow_from: Vec<String>,
}

/// The field named by serde's "missing field `x`".
fn missing_key(reason: &str) -> Option<String> {
    let rest = reason.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(key, _)| key.to_owned())
}

/// The first key of `section` that `T` refuses on its own (a missing other key aside).
fn key_at_fault<T: DeserializeOwned>(section: &Value) -> Option<String> {
    let Value::Object(keys) = section else { return None };
    keys.iter()
        .find(|(key, value)| {
            let alone = Value::Object(Map::from_iter([((*key).clone(), (*value).clone())]));
            T::deserialize(&alone).is_err_and(|error| missing_key(&error.to_string()).is_none())
        })
        .map(|(key, _)| key.clone())
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_emoji_is_named_without_colons_and_an_empty_one_means_none() {
        assert_eq!(super::emoji_name(Some(":+1:".into()), "eyes").as_deref(), Some("+1"));
        assert_eq!(super::emoji_name(None, "eyes").as_deref(), Some("eyes"));
        assert_eq!(super::emoji_name(Some(" ".into()), "eyes"), None);
        assert_eq!(super::filled("  id ".into()).as_deref(), Some("id"));
    }

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Listen {
        host: String,
        port: u16,
        #[serde(alias = "timeout_secs")]
        timeout_secs: u64,
    }

    #[derive(Debug, Deserialize)]
    struct NeedsToken {
        #[allow(dead_code)]
        token: String,
    }

    #[test]
    fn a_section_that_fits_is_read_with_unknown_keys_ignored() {
        let listen: Listen = load_section("api", &json!({"host": "h", "timeout_secs": 3, "enabled": true})).unwrap();
        assert_eq!(listen, Listen { host: "h".into(), port: 0, timeout_secs: 3 });
    }

    #[test]
    fn a_value_of_the_wrong_type_is_reported_with_its_key() {
        let error = load_section::<Listen>("api", &json!({"host": "h", "port": "eighty"})).unwrap_err();
        assert_eq!(error.key.as_deref(), Some("port"));
        assert_eq!(error.to_string(), "invalid channels.api.port: invalid type: string \"eighty\", expected u16");
    }

    #[test]
    fn a_missing_required_key_is_reported_with_its_name() {
        let error = load_section::<NeedsToken>("discord", &json!({"enabled": true})).unwrap_err();
        assert_eq!(error.key.as_deref(), Some("token"));
        assert_eq!(error.to_string(), "invalid channels.discord.token: missing field `token`");
    }

    #[test]
    fn a_section_that_is_not_an_object_is_reported_without_a_key() {
        let error = load_section::<Listen>("websocket", &json!([1])).unwrap_err();
        assert_eq!(error.key, None);
        assert!(error.to_string().starts_with("invalid channels.websocket config: invalid type"), "{error}");
    }

    #[test]
    fn a_checked_config_is_refused_by_its_check_after_loading() {
        #[derive(Debug, Deserialize)]
        struct Port {
            port: u16,
        }
        #[derive(Debug)]
        enum Refused {
            Shape(SectionError),
            ZeroPort,
        }
        impl From<SectionError> for Refused {
            fn from(error: SectionError) -> Refused {
                Refused::Shape(error)
            }
        }
        impl ChannelConfig for Port {
            const CHANNEL: &'static str = "test";
            type Error = Refused;
            fn check(&self) -> Result<(), Refused> {
                if self.port == 0 { Err(Refused::ZeroPort) } else { Ok(()) }
            }
        }
        assert_eq!(Port::load(&json!({"port": 8})).unwrap().port, 8);
        assert!(matches!(Port::load(&json!({"port": 0})), Err(Refused::ZeroPort)));
        let missing = Port::load(&json!({}));
        assert!(matches!(missing, Err(Refused::Shape(SectionError { key: Some(key), .. })) if key == "port"));
    }
}
