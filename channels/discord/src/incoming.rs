//! From Gateway messages to the kernel: which messages the channel submits (not from bots, in
//! an allowed channel, mentioning the bot in a guild unless the policy is open), what they
//! become (text without the bot's mention, attachments as local files, metadata), and
//! submitting them one at a time in the order Discord sent them.

use std::path::PathBuf;
use std::time::Duration;

use oxibot_plugin::chat::Typing;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle, Inbound};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::Rest;
use crate::attachments;
use crate::config::{Config, GroupPolicy};
use crate::events::MessageCreate;
use crate::gateway::Incoming;

/// How often the typing indicator is renewed (Discord shows it for about ten seconds).
const TYPING_RENEWAL: Duration = Duration::from_secs(8);
/// How long the typing indicator is kept up without a reply.
const TYPING_LIMIT: Duration = Duration::from_secs(120);

/// The typing indicators of the channel's chats: "… is typing" from the moment a message is
/// accepted until the reply is posted (renewed every few seconds, for two minutes at most).
pub fn typing_indicators() -> Typing {
    Typing::new(TYPING_RENEWAL, TYPING_LIMIT)
}

/// The channel's own filters (access control is the kernel's).
#[derive(Debug, Clone)]
pub struct Filter {
    /// Guild channels listened in; empty means all.
    allow_channels: Vec<String>,
    /// Whether guild messages must mention the bot.
    group_policy: GroupPolicy,
}

impl Filter {
    /// The filters a config asks for.
    pub fn from_config(config: &Config) -> Filter {
        Filter { allow_channels: config.allow_channels.clone(), group_policy: config.group_policy }
    }

    /// The text to submit for `message`, or `None` when the channel ignores it.
    pub fn admit(&self, message: &MessageCreate, bot_id: &str) -> Option<String> {
        if message.author.bot || message.webhook_id.is_some() || message.author.id == bot_id {
            return None;
        }
        let text = match &message.guild_id {
            None => message.content.trim().to_owned(),
            Some(_) => {
                if !self.allow_channels.is_empty() && !self.allow_channels.contains(&message.channel_id) {
                    return None;
                }
                if self.group_policy == GroupPolicy::Mention && !mentions_bot(message, bot_id) {
                    return None;
                }
                strip_mention(&message.content, bot_id)
            }
        };
        (!text.is_empty() || !message.attachments.is_empty()).then_some(text)
    }
}

/// Whether the message mentions the bot, in its `mentions` or in its text.
fn mentions_bot(message: &MessageCreate, bot_id: &str) -> bool {
    !bot_id.is_empty()
        && (message.mentions.iter().any(|user| user.id == bot_id)
            || message.content.contains(&format!("<@{bot_id}>"))
            || message.content.contains(&format!("<@!{bot_id}>")))
}

/// The text without the bot's mentions (`<@id>` and the older `<@!id>`), trimmed.
fn strip_mention(content: &str, bot_id: &str) -> String {
    if bot_id.is_empty() {
        return content.trim().to_owned();
    }
    let mut text = content.to_owned();
    for mention in [format!("<@{bot_id}>"), format!("<@!{bot_id}>")] {
        text = text.replace(&format!("{mention} "), "").replace(&mention, "");
    }
    text.trim().to_owned()
}

/// The metadata the kernel keeps with the message and copies into the reply.
fn metadata(message: &MessageCreate) -> Value {
    let mut metadata = Map::new();
    metadata.insert("message_id".into(), message.id.clone().into());
    if let Some(guild_id) = &message.guild_id {
        metadata.insert("guild_id".into(), guild_id.clone().into());
    }
    metadata.insert("is_group".into(), message.guild_id.is_some().into());
    metadata.insert("username".into(), message.author.username.clone().into());
    Value::Object(metadata)
}

/// Everything the inbound side needs.
pub struct Pipeline {
    /// The connection to the kernel.
    pub channel: ChannelHandle,
    /// Which messages pass.
    pub filter: Filter,
    /// For attachments and the typing indicator.
    pub rest: Rest,
    /// The typing indicators shown.
    pub typing: Typing,
    /// Where attachments are saved.
    pub media_dir: PathBuf,
}

impl Pipeline {
    /// Submits the Gateway's messages one by one until the kernel or the Gateway goes away.
    pub async fn run(self, mut incoming: UnboundedReceiver<Incoming>) {
        while let Some(Incoming { message, bot_id, pressed }) = incoming.recv().await {
            let admitted = match &pressed {
                // A button press is its answer text, from its presser: no mention needed.
                Some((id, token)) => {
                    if let Err(error) = self.rest.acknowledge_interaction(id, token).await {
                        warn!("discord: cannot acknowledge a button press: {error}");
                    }
                    Some(message.content.clone())
                }
                None => self.filter.admit(&message, &bot_id),
            };
            let Some(text) = admitted else { continue };
            let inbound = self.build(&message, text).await;
            match self.channel.submit(inbound).await {
                Ok(()) => self.show_typing(&message.channel_id),
                Err(ChannelError::Closed) => return,
                Err(error) => warn!("discord: message {} not submitted: {error}", message.id),
            }
        }
    }

    /// Shows "… is typing" in `channel_id` until the reply is posted; stops at the first
    /// failure.
    fn show_typing(&self, channel_id: &str) {
        let (rest, id) = (self.rest.clone(), channel_id.to_owned());
        self.typing.start(channel_id, move || {
            let (rest, id) = (rest.clone(), id.clone());
            async move {
                let shown = rest.trigger_typing(&id).await;
                shown.map_err(|error| warn!("discord: cannot show typing in {id}: {error}"))
            }
        });
    }

    /// The inbound for an admitted message: its text, attachments downloaded and noted.
    async fn build(&self, message: &MessageCreate, text: String) -> Inbound {
        let files = attachments::download_all(&self.rest, &self.media_dir, &message.attachments).await;
        let content =
            std::iter::once(text).chain(files.notes).filter(|part| !part.is_empty()).collect::<Vec<_>>().join("\n");
        let mut inbound = self.channel.inbound(&message.id, &message.author.id, &message.channel_id, content);
        inbound.media = files.paths.iter().map(|path| path.display().to_string()).collect();
        inbound.metadata = metadata(message);
        inbound
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::events::User;

    const BOT: &str = "999";

    fn user(id: &str, bot: bool) -> User {
        User { id: id.into(), username: format!("user{id}"), global_name: None, bot }
    }

    fn message(guild: Option<&str>, channel: &str, content: &str) -> MessageCreate {
        MessageCreate {
            id: "1".into(),
            channel_id: channel.into(),
            guild_id: guild.map(Into::into),
            author: user("42", false),
            content: content.into(),
            mentions: Vec::new(),
            attachments: Vec::new(),
            webhook_id: None,
        }
    }

    fn filter(allow: &[&str], group_policy: GroupPolicy) -> Filter {
        Filter { allow_channels: allow.iter().map(|id| id.to_string()).collect(), group_policy }
    }

    #[test]
    fn a_direct_message_passes_whatever_the_channel_list_and_policy() {
        let dm = message(None, "dm-1", " hello ");
        assert_eq!(filter(&["other"], GroupPolicy::Mention).admit(&dm, BOT).as_deref(), Some("hello"));
    }

    #[test]
    fn the_bots_own_messages_and_other_bots_are_ignored() {
        let mut own = message(None, "dm-1", "hi");
        own.author = user(BOT, true);
        let mut other_bot = message(None, "dm-1", "hi");
        other_bot.author = user("7", true);
        let mut webhook = message(None, "dm-1", "hi");
        webhook.webhook_id = Some("3".into());
        for ignored in [own, other_bot, webhook] {
            assert_eq!(filter(&[], GroupPolicy::Open).admit(&ignored, BOT), None);
        }
    }

    #[test]
    fn in_a_guild_only_messages_mentioning_the_bot_pass_with_the_mention_stripped() {
        let filter = filter(&[], GroupPolicy::Mention);
        assert_eq!(filter.admit(&message(Some("g"), "c", "hello all"), BOT), None);
        assert_eq!(
            filter.admit(&message(Some("g"), "c", "<@999> what time is it?"), BOT).as_deref(),
            Some("what time is it?")
        );
        assert_eq!(filter.admit(&message(Some("g"), "c", "hey <@!999> you"), BOT).as_deref(), Some("hey you"));
        let mut listed = message(Some("g"), "c", "hi there");
        listed.mentions.push(user(BOT, true));
        assert_eq!(filter.admit(&listed, BOT).as_deref(), Some("hi there"));
    }

    #[test]
    fn an_open_group_policy_admits_every_guild_message() {
        assert_eq!(
            filter(&[], GroupPolicy::Open).admit(&message(Some("g"), "c", "hello all"), BOT).as_deref(),
            Some("hello all")
        );
    }

    #[test]
    fn allowed_channels_filter_guild_messages() {
        let filter = filter(&["c1"], GroupPolicy::Open);
        assert!(filter.admit(&message(Some("g"), "c1", "x"), BOT).is_some());
        assert!(filter.admit(&message(Some("g"), "c2", "x"), BOT).is_none());
    }

    #[test]
    fn a_message_with_nothing_left_to_say_is_ignored() {
        assert_eq!(filter(&[], GroupPolicy::Mention).admit(&message(Some("g"), "c", "<@999>"), BOT), None);
    }

    #[test]
    fn metadata_names_the_message_guild_and_author() {
        let meta = metadata(&message(Some("g"), "c", "x"));
        assert_eq!(meta, json!({"message_id": "1", "guild_id": "g", "is_group": true, "username": "user42"}));
        let meta = metadata(&message(None, "c", "x"));
        assert_eq!(meta, json!({"message_id": "1", "is_group": false, "username": "user42"}));
    }
}
