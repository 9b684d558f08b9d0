//! Handing users' messages to the kernel one at a time, in the order Slack sent them, and
//! acknowledging their envelopes only once the kernel has persisted them.

use oxibot_plugin::chat::{AckLine, Handed, Handover, submit_in_order};
use oxibot_plugin::warn;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::{WebApi, WebError};
use crate::incoming::UserMessage;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel, and the envelopes to acknowledge.
    pub handover: Handover<AckLine>,
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
        let mut inbound =
            self.handover.channel().inbound(message.id, message.sender_id, message.chat_id, message.content);
        inbound.metadata = message.metadata;
        let handed = self.handover.hand(inbound).await;
        if let (Handed::Accepted(_), Some(reactions)) = (&handed, &self.reactions) {
            tokio::spawn(reactions.clone().add(message.channel, message.ts));
        }
        handed != Handed::KernelGone
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
