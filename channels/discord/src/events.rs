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

/// An `INTERACTION_CREATE` dispatch: a button (a message component) was pressed, among
/// other kinds of interaction the channel ignores.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct InteractionCreate {
    /// The interaction's id (for its response).
    pub id: String,
    /// The token its response is sent with.
    pub token: String,
    /// 3 for a message component.
    #[serde(rename = "type")]
    pub kind: u8,
    /// Where it happened.
    #[serde(default)]
    pub channel_id: Option<String>,
    /// The guild, absent in direct messages.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// The member who pressed it, in a guild.
    #[serde(default)]
    pub member: Option<Member>,
    /// The user who pressed it, in a direct message.
    #[serde(default)]
    pub user: Option<User>,
    /// The component's data.
    #[serde(default)]
    pub data: Option<ComponentData>,
}

/// A guild member, as far as the channel reads one.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Member {
    /// The member's user.
    pub user: User,
}

/// A pressed component's data.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ComponentData {
    /// The button's `custom_id` (an approval's answer text).
    #[serde(default)]
    pub custom_id: Option<String>,
}

impl InteractionCreate {
    /// The press of an approval button as the message of the person who pressed it, when
    /// this interaction is one.
    pub fn approval_answer(&self) -> Option<MessageCreate> {
        let answer =
            self.data.as_ref()?.custom_id.as_deref().filter(|id| oxibot_plugin::chat::is_approval_answer(id))?;
        let author = self.member.as_ref().map(|m| m.user.clone()).or_else(|| self.user.clone())?;
        (self.kind == 3).then(|| MessageCreate {
            id: self.id.clone(),
            channel_id: self.channel_id.clone().unwrap_or_default(),
            guild_id: self.guild_id.clone(),
            author,
            content: answer.to_owned(),
            mentions: Vec::new(),
            attachments: Vec::new(),
            webhook_id: None,
        })
    }
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
