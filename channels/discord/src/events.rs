//! The parts of Discord's Gateway events the channel reads: `READY` and `MESSAGE_CREATE`.

use serde::Deserialize;

/// A Discord user, as embedded in events.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct User {
    /// The user's snowflake id.
    pub id: String,
    /// The user's unique name.
    #[serde(default)]
    pub username: String,
    /// The name shown in the client, when the user set one.
    #[serde(default)]
    pub global_name: Option<String>,
    /// Whether the user is a bot account.
    #[serde(default)]
    pub bot: bool,
}

/// A file attached to a message.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Attachment {
    /// The attachment's snowflake id.
    pub id: String,
    /// The file's name as uploaded.
    #[serde(default)]
    pub filename: String,
    /// Where the file can be downloaded.
    pub url: String,
    /// The file's size in bytes.
    #[serde(default)]
    pub size: u64,
}

/// A `MESSAGE_CREATE` dispatch: a message posted in a channel the bot can see.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct MessageCreate {
    /// The message's snowflake id.
    pub id: String,
    /// The channel (or DM channel) it was posted in.
    pub channel_id: String,
    /// The guild, absent for direct messages.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// Who wrote it.
    pub author: User,
    /// Its text (empty without the message content intent).
    #[serde(default)]
    pub content: String,
    /// The users it mentions.
    #[serde(default)]
    pub mentions: Vec<User>,
    /// Its files.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// Set for messages sent through a webhook.
    #[serde(default)]
    pub webhook_id: Option<String>,
}

/// The `READY` dispatch: the session is open.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Ready {
    /// The bot's own user.
    pub user: User,
    /// Needed to resume the session.
    pub session_id: String,
    /// Where to connect to resume the session.
    #[serde(default)]
    pub resume_gateway_url: Option<String>,
}
