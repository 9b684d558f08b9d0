//! Handing users' messages to the kernel one at a time, in the order Slack sent them, and
//! acknowledging their envelopes only once the kernel has persisted them.

use oxibot_plugin::chat::{Handed, RecentMessages, hand_over, submit_in_order};
use oxibot_plugin::{ChannelHandle, warn};
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
    pub async fn run(self, queue: UnboundedReceiver<UserMessage>) {
        submit_in_order(queue, |message| self.submit(message)).await;
    }

    /// Submits one message; false once the kernel is gone.
    async fn submit(&self, message: UserMessage) -> bool {
        let mut inbound = self.channel.inbound(message.id, message.sender_id, message.chat_id, message.content);
        inbound.metadata = message.metadata;
        let handed = hand_over(&self.channel, &self.recent, inbound).await;
        self.acknowledge(handed.deliveries());
        if let (Handed::Accepted(_), Some(reactions)) = (&handed, &self.reactions) {
            tokio::spawn(reactions.clone().add(message.channel, message.ts));
        }
        handed != Handed::KernelGone
    }

    /// Acknowledges the envelopes that brought a message.
    fn acknowledge(&self, envelopes: &[String]) {
        for envelope in envelopes {
            if !self.acks.ack(envelope) {
                warn!("no connection to acknowledge envelope {envelope}; slack will deliver it again");
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
            Err(error) => warn!("cannot add the reaction: {error}"),
        }
    }
}
