//! Handing users' messages to the kernel one at a time, in the order Feishu sent them, their
//! files fetched first; answering their event frames only once the kernel has persisted them,
//! then adding the configured reaction and remembering where replies to the chat go.

use std::path::PathBuf;

use oxibot_plugin::chat::{Handed, Handover, fetch_each, submit_in_order};
use oxibot_plugin::{Inbound, warn};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::acks::AckLine;
use crate::api::OpenApi;
use crate::cards::LastMessages;
use crate::incoming::{CARD_PRESS, UserMessage};

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel, and the event frames to answer.
    pub handover: Handover<AckLine>,
    /// The open API, for downloads and reactions.
    pub api: OpenApi,
    /// Where downloads go.
    pub media_dir: PathBuf,
    /// The reaction to add to an accepted message, if any.
    pub react_emoji: Option<String>,
    /// The latest message of each chat, for streamed replies.
    pub last_messages: LastMessages,
}

impl Submitter {
    /// Submits queued messages until the kernel hangs up or the queue ends.
    pub async fn run(self, queue: UnboundedReceiver<UserMessage>) {
        submit_in_order(queue, |message| self.submit(message)).await;
    }

    /// Submits one message; false once the kernel is gone.
    async fn submit(&self, message: UserMessage) -> bool {
        let id = message.id.clone();
        let inbound = self.inbound(message).await;
        let (chat_id, metadata) = (inbound.chat_id.clone(), inbound.metadata.clone());
        // A button press has no message of its own to react to or to quote later.
        let pressed = metadata["msg_type"] == CARD_PRESS;
        let handed = self.handover.hand(inbound).await;
        if let (Handed::Accepted(_), false) = (&handed, pressed) {
            self.last_messages.remember(&chat_id, metadata);
            if let Some(emoji) = &self.react_emoji {
                let (api, emoji) = (self.api.clone(), emoji.clone());
                tokio::spawn(async move {
                    if let Err(error) = api.add_reaction(&id, &emoji).await {
                        warn!("cannot add the reaction: {error}");
                    }
                });
            }
        }
        handed != Handed::KernelGone
    }

    /// The inbound message, its files fetched (a file that cannot be fetched is named in the
    /// text instead).
    async fn inbound(&self, message: UserMessage) -> Inbound {
        let id = &message.id;
        let fetched = fetch_each(&message.id, &message.attachments, &self.media_dir, |attachment, dest| async move {
            self.api.download(id, &attachment.key, attachment.kind, &dest).await
        })
        .await;
        let labels = fetched.labels;
        let content = match (message.content.is_empty(), labels.is_empty()) {
            (true, _) => labels.join(" "),
            (false, true) => message.content,
            (false, false) => format!("{}\n{}", message.content, labels.join(" ")),
        };
        let mut inbound = self.handover.channel().inbound(message.id, message.sender_id, message.chat_id, content);
        inbound.media = fetched.media;
        inbound.metadata = message.metadata;
        inbound
    }
}
