//! Why the email channel stops: errors that no reconnecting can fix.

use crate::config::ConfigError;

/// A reason to end the channel service (the kernel then restarts it, and gives up after a few
/// quick failures).
#[derive(Debug, thiserror::Error)]
pub enum EmailError {
    /// The `channels.email` section cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The IMAP server refused the login.
    #[error("the imap server refused the login (channels.email.imapUsername, imapPassword): {0}")]
    Login(String),
    /// The mailbox does not exist, or cannot be opened.
    #[error("cannot open channels.email.imapMailbox {mailbox:?}: {reason}")]
    Mailbox {
        /// The mailbox.
        mailbox: String,
        /// The server's words.
        reason: String,
    },
    /// The SMTP settings cannot be used.
    #[error("cannot set up smtp (channels.email.smtpHost): {0}")]
    Smtp(String),
}
