//! The `channels.email` config section, with nanobot's camelCase keys (snake_case accepted
//! too) and defaults: the user's consent, the IMAP and SMTP servers, how replies are written,
//! and the anti-spoofing checks.

use oxibot_plugin::chat::{SectionError, load_section};
use serde::Deserialize;
use serde_json::Value;

/// The channel's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where mail is read.
    pub imap: Server,
    /// The mailbox read (`imapMailbox`).
    pub mailbox: String,
    /// Where replies are sent.
    pub smtp: Server,
    /// How the SMTP connection is secured.
    pub smtp_security: SmtpSecurity,
    /// The replies' `From:` (`fromAddress`, else the SMTP username).
    pub from_address: String,
    /// How long to wait between checks when the server has no IDLE.
    pub poll_interval_secs: u64,
    /// Whether a message the kernel accepted is flagged `\Seen`.
    pub mark_seen: bool,
    /// Whether replies to users' mail are sent at all.
    pub auto_reply: bool,
    /// The longest text handed to the kernel, in characters.
    pub max_body_chars: usize,
    /// Put before a subject answered (`Re: `).
    pub subject_prefix: String,
    /// Require an aligned `dkim=pass` from a trusted `Authentication-Results` header.
    pub verify_dkim: bool,
    /// Require an aligned `spf=pass` from a trusted `Authentication-Results` header.
    pub verify_spf: bool,
    /// The authserv-ids whose `Authentication-Results` headers are believed.
    pub trusted_authserv_ids: Vec<String>,
}

/// A mail server and the account on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Host name.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// Whether the connection is TLS from the start (IMAP: `imapUseSsl`).
    pub tls: bool,
}

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// TLS from the start (`smtpUseSsl`, port 465).
    Tls,
    /// STARTTLS required (`smtpUseTls`, port 587).
    StartTls,
    /// None: only for a server on this machine.
    Plain,
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The section does not have the expected shape.
    #[error(transparent)]
    Shape(#[from] SectionError),
    /// A required key is absent or empty.
    #[error("channels.email.{0} is missing")]
    Missing(&'static str),
    /// The user has not consented.
    #[error(
        "channels.email.consentGranted is not true: the email channel reads and answers a mailbox only with the owner's explicit permission"
    )]
    NoConsent,
    /// The anti-spoofing checks have nobody to believe.
    #[error(
        "channels.email.trustedAuthservIds is empty while verifyDkim or verifySpf is on: name the authserv-id of your provider's Authentication-Results headers, or turn both checks off"
    )]
    NoTrustedAuthserv,
    /// A setting this channel does not carry out.
    #[error("channels.email.{0} is not supported by this channel")]
    Unsupported(&'static str),
}

/// The section as written. `enabled`, `allowFrom` (the kernel's), `postActionMoveMailbox`,
/// `postActionExpunge`, `postActionIgnoreSkipped`, and the attachment limits are accepted.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Raw {
    #[serde(alias = "consent_granted")]
    consent_granted: bool,
    #[serde(alias = "imap_host")]
    imap_host: String,
    #[serde(alias = "imap_port")]
    imap_port: u16,
    #[serde(alias = "imap_username")]
    imap_username: String,
    #[serde(alias = "imap_password")]
    imap_password: String,
    #[serde(alias = "imap_mailbox")]
    imap_mailbox: String,
    #[serde(alias = "imap_use_ssl")]
    imap_use_ssl: bool,
    #[serde(alias = "smtp_host")]
    smtp_host: String,
    #[serde(alias = "smtp_port")]
    smtp_port: u16,
    #[serde(alias = "smtp_username")]
    smtp_username: String,
    #[serde(alias = "smtp_password")]
    smtp_password: String,
    #[serde(alias = "smtp_use_tls")]
    smtp_use_tls: bool,
    #[serde(alias = "smtp_use_ssl")]
    smtp_use_ssl: bool,
    #[serde(alias = "from_address")]
    from_address: String,
    #[serde(alias = "poll_interval_seconds")]
    poll_interval_seconds: u64,
    #[serde(alias = "mark_seen")]
    mark_seen: bool,
    #[serde(alias = "auto_reply_enabled")]
    auto_reply_enabled: bool,
    #[serde(alias = "max_body_chars")]
    max_body_chars: usize,
    #[serde(alias = "subject_prefix")]
    subject_prefix: String,
    #[serde(alias = "verify_dkim")]
    verify_dkim: bool,
    #[serde(alias = "verify_spf")]
    verify_spf: bool,
    #[serde(alias = "trusted_authserv_ids")]
    trusted_authserv_ids: Vec<String>,
    #[serde(alias = "post_action")]
    post_action: Option<String>,
    #[serde(alias = "allowed_attachment_types")]
    allowed_attachment_types: Vec<String>,
}

impl Default for Raw {
    fn default() -> Raw {
        Raw {
            consent_granted: false,
            imap_host: String::new(),
            imap_port: 993,
            imap_username: String::new(),
            imap_password: String::new(),
            imap_mailbox: "INBOX".to_owned(),
            imap_use_ssl: true,
            smtp_host: String::new(),
            smtp_port: 587,
            smtp_username: String::new(),
            smtp_password: String::new(),
            smtp_use_tls: true,
            smtp_use_ssl: false,
            from_address: String::new(),
            poll_interval_seconds: 30,
            mark_seen: true,
            auto_reply_enabled: true,
            max_body_chars: 12_000,
            subject_prefix: "Re: ".to_owned(),
            verify_dkim: true,
            verify_spf: true,
            trusted_authserv_ids: Vec::new(),
            post_action: None,
            allowed_attachment_types: Vec::new(),
        }
    }
}

impl Config {
    /// Reads and checks the section the kernel passed.
    pub fn from_value(section: &Value) -> Result<Config, ConfigError> {
        let section = if section.is_null() { &Value::Object(serde_json::Map::new()) } else { section };
        let raw: Raw = load_section("email", section)?;
        if !raw.consent_granted {
            return Err(ConfigError::NoConsent);
        }
        if raw.post_action.as_deref().is_some_and(|action| !action.trim().is_empty()) {
            return Err(ConfigError::Unsupported("postAction"));
        }
        if !raw.allowed_attachment_types.is_empty() {
            return Err(ConfigError::Unsupported("allowedAttachmentTypes"));
        }
        let trusted: Vec<String> = raw
            .trusted_authserv_ids
            .iter()
            .map(|id| id.trim().trim_end_matches('.').to_lowercase())
            .filter(|id| !id.is_empty())
            .collect();
        if (raw.verify_dkim || raw.verify_spf) && trusted.is_empty() {
            return Err(ConfigError::NoTrustedAuthserv);
        }
        let imap = Server {
            host: required(raw.imap_host, "imapHost")?,
            port: raw.imap_port,
            username: required(raw.imap_username, "imapUsername")?,
            password: required(raw.imap_password, "imapPassword")?,
            tls: raw.imap_use_ssl,
        };
        let smtp = Server {
            host: required(raw.smtp_host, "smtpHost")?,
            port: raw.smtp_port,
            username: required(raw.smtp_username, "smtpUsername")?,
            password: required(raw.smtp_password, "smtpPassword")?,
            tls: raw.smtp_use_ssl,
        };
        let smtp_security = match (raw.smtp_use_ssl, raw.smtp_use_tls) {
            (true, _) => SmtpSecurity::Tls,
            (false, true) => SmtpSecurity::StartTls,
            (false, false) => SmtpSecurity::Plain,
        };
        let from_address = match raw.from_address.trim() {
            "" => smtp.username.clone(),
            address => address.to_owned(),
        };
        Ok(Config {
            mailbox: match raw.imap_mailbox.trim() {
                "" => "INBOX".to_owned(),
                mailbox => mailbox.to_owned(),
            },
            imap,
            smtp,
            smtp_security,
            from_address,
            poll_interval_secs: raw.poll_interval_seconds.max(1),
            mark_seen: raw.mark_seen,
            auto_reply: raw.auto_reply_enabled,
            max_body_chars: raw.max_body_chars.max(1),
            subject_prefix: raw.subject_prefix,
            verify_dkim: raw.verify_dkim,
            verify_spf: raw.verify_spf,
            trusted_authserv_ids: trusted,
        })
    }
}

fn required(value: String, key: &'static str) -> Result<String, ConfigError> {
    let value = value.trim().to_owned();
    if value.is_empty() { Err(ConfigError::Missing(key)) } else { Ok(value) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn section(extra: Value) -> Value {
        let mut section = json!({"consentGranted": true, "imapHost": "imap.example.org", "imapUsername": "bot@example.org",
                                 "imapPassword": "p", "smtpHost": "smtp.example.org", "smtpUsername": "bot@example.org",
                                 "smtpPassword": "p", "trustedAuthservIds": ["mx.example.org"]});
        section.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        section
    }

    #[test]
    fn the_required_keys_alone_give_nanobots_defaults() {
        let config = Config::from_value(&section(json!({}))).unwrap();
        assert_eq!((config.imap.port, config.imap.tls, config.mailbox.as_str()), (993, true, "INBOX"));
        assert_eq!((config.smtp.port, config.smtp_security), (587, SmtpSecurity::StartTls));
        assert_eq!(config.from_address, "bot@example.org");
        assert!(config.mark_seen && config.auto_reply && config.verify_dkim && config.verify_spf);
        assert_eq!((config.poll_interval_secs, config.max_body_chars), (30, 12_000));
        assert_eq!(config.subject_prefix, "Re: ");
    }

    #[test]
    fn nanobots_own_section_is_accepted() {
        let nanobot = json!({"enabled": true, "allowFrom": [], "postActionMoveMailbox": "", "postActionExpunge": false,
                             "postActionIgnoreSkipped": true, "maxAttachmentSize": 2_000_000, "maxAttachmentsPerEmail": 5,
                             "smtpUseSsl": true, "fromAddress": "Bot <bot@example.org>"});
        let config = Config::from_value(&section(nanobot)).unwrap();
        assert_eq!(config.smtp_security, SmtpSecurity::Tls);
        assert_eq!(config.from_address, "Bot <bot@example.org>");
    }

    #[test]
    fn without_consent_the_channel_does_not_start() {
        let error = Config::from_value(&section(json!({"consentGranted": false}))).unwrap_err();
        assert!(error.to_string().starts_with("channels.email.consentGranted is not true"), "{error}");
    }

    #[test]
    fn missing_or_unsupported_keys_are_refused_with_the_key_named() {
        let error = Config::from_value(&section(json!({"imapHost": ""}))).unwrap_err();
        assert_eq!(error.to_string(), "channels.email.imapHost is missing");
        let error = Config::from_value(&section(json!({"trustedAuthservIds": []}))).unwrap_err();
        assert!(error.to_string().starts_with("channels.email.trustedAuthservIds is empty"), "{error}");
        let checks_off = json!({"trustedAuthservIds": [], "verifyDkim": false, "verifySpf": false});
        assert!(Config::from_value(&section(checks_off)).is_ok());
        let error = Config::from_value(&section(json!({"postAction": "delete"}))).unwrap_err();
        assert_eq!(error.to_string(), "channels.email.postAction is not supported by this channel");
        let error = Config::from_value(&section(json!({"imapPort": "x"}))).unwrap_err();
        assert!(error.to_string().starts_with("invalid channels.email.imapPort"), "{error}");
    }
}
