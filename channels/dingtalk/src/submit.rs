//! Handing users' messages to the kernel one at a time, in the order DingTalk sent them, their
//! files fetched first, and acknowledging their callbacks only once the kernel has persisted
//! them.

use std::path::PathBuf;

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::{ChannelError, ChannelHandle, Inbound};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::acks::AckLine;
use crate::api::OpenApi;
use crate::incoming::UserMessage;
use crate::media;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Which callbacks wait for which message.
    pub recent: RecentMessages,
    /// Where acknowledgements go.
    pub acks: AckLine,
    /// The open API, for downloads.
    pub api: OpenApi,
    /// Where downloads go.
    pub media_dir: PathBuf,
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
        let id = message.id.clone();
        let inbound = self.inbound(message).await;
        match self.channel.submit(inbound).await {
            Ok(()) => {
                self.acknowledge(&id);
                true
            }
            Err(ChannelError::Closed) => {
                self.recent.abandoned(&id);
                false
            }
            Err(ChannelError::TooLarge(reason)) => {
                eprintln!("message {id} dropped: the kernel cannot take it ({reason})");
                self.acknowledge(&id);
                true
            }
        }
    }

    /// The inbound message, its files fetched (a file that cannot be fetched is named in the
    /// text instead).
    async fn inbound(&self, message: UserMessage) -> Inbound {
        let mut media = Vec::new();
        let mut placeholders = Vec::new();
        for (index, attachment) in message.attachments.iter().enumerate() {
            match media::fetch(&self.api, &self.media_dir, &message.id, index, attachment).await {
                Ok(path) => {
                    media.push(path.display().to_string());
                    placeholders.push(attachment.kind.placeholder().to_owned());
                }
                Err(error) => {
                    eprintln!("cannot fetch a file of message {}: {error}", message.id);
                    placeholders.push(format!("{} (could not be downloaded)", attachment.kind.placeholder()));
                }
            }
        }
        let content = if message.content.is_empty() { placeholders.join(" ") } else { message.content };
        let mut inbound = self.channel.inbound(message.id, message.sender_id, message.chat_id, content);
        inbound.media = media;
        inbound.metadata = message.metadata;
        inbound
    }

    /// Acknowledges every callback that brought the message `id`.
    fn acknowledge(&self, id: &str) {
        for frame_id in self.recent.accepted(id) {
            if !self.acks.ack(&frame_id) {
                eprintln!("no connection to acknowledge callback {frame_id}; dingtalk will deliver it again");
            }
        }
    }
}
