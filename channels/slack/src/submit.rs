//! Handing users' messages to the kernel one at a time, in the order Slack sent them, and
//! acknowledging their envelopes only once the kernel has persisted them.

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::{ChannelError, ChannelHandle};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::acks::AckLine;
use crate::api::{WebApi, WebError};
use crate::incoming::UserMessage;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Which envelopes wait for which message.
    pub recent: RecentMessages,
    /// Where acknowledgements go.
    pub acks: AckLine,
    /// Adds the "seen" reaction, when configured.
    pub reactions: Option<Reactions>,
}

/// Adds an emoji reaction to messages the kernel accepted.
#[derive(Debug, Clone)]
pub struct Reactions {
    /// The Web API.
    pub web: WebApi,
    /// The bot token.
    pub token: String,
    /// The emoji name, without colons.
    pub emoji: String,
}

impl Submitter {
    /// Submits queued messages until the kernel hangs up or the queue ends.
    pub async fn run(self, mut queue: UnboundedReceiver<UserMessage>) {
        while let Some(message) = queue.recv().await {
            if !self.submit(message).await {
                return;
            }
        }
    }

    /// Submits one message; false once the kernel is gone.
    async fn submit(&self, message: UserMessage) -> bool {
        let mut inbound = self.channel.inbound(message.id.clone(), message.sender_id, message.chat_id, message.content);
        inbound.metadata = message.metadata;
        match self.channel.submit(inbound).await {
            Ok(()) => {
                self.acknowledge(&message.id);
                if let Some(reactions) = &self.reactions {
                    tokio::spawn(reactions.clone().add(message.channel, message.ts));
                }
                true
            }
            Err(ChannelError::Closed) => {
                self.recent.abandoned(&message.id);
                false
            }
            Err(ChannelError::TooLarge(reason)) => {
                eprintln!("message {} dropped: the kernel cannot take it ({reason})", message.id);
                self.acknowledge(&message.id);
                true
            }
        }
    }

    /// Acknowledges every envelope that brought the message `id`.
    fn acknowledge(&self, id: &str) {
        let envelopes = self.recent.accepted(id);
        for envelope in envelopes {
            if !self.acks.ack(&envelope) {
                eprintln!("no connection to acknowledge envelope {envelope}; slack will deliver it again");
            }
        }
    }
}

impl Reactions {
    /// Adds the reaction to the message `ts` in `channel`; failures are only logged.
    async fn add(self, channel: String, ts: String) {
        let body = json!({"channel": channel, "timestamp": ts, "name": self.emoji});
        match self.web.call("reactions.add", &self.token, &body).await {
            Ok(_) => {}
            Err(WebError::Api { error, .. }) if error == "already_reacted" => {}
            Err(error) => eprintln!("cannot add the reaction: {error}"),
        }
    }
}
