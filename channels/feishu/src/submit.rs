//! Handing users' messages to the kernel one at a time, in the order Feishu sent them, their
//! files fetched first; answering their event frames only once the kernel has persisted them,
//! then adding the configured reaction and remembering where replies to the chat go.

use std::path::PathBuf;

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::{ChannelError, ChannelHandle, Inbound};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::acks::AckLine;
use crate::api::OpenApi;
use crate::cards::LastMessages;
use crate::incoming::UserMessage;
use crate::media;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Which frames wait for which message.
    pub recent: RecentMessages,
    /// Where answers go.
    pub acks: AckLine,
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
        let (chat_id, metadata) = (inbound.chat_id.clone(), inbound.metadata.clone());
        match self.channel.submit(inbound).await {
            Ok(()) => {
                self.acknowledge(&id);
                self.last_messages.remember(&chat_id, metadata);
                if let Some(emoji) = &self.react_emoji {
                    let (api, emoji, id) = (self.api.clone(), emoji.clone(), id.clone());
                    tokio::spawn(async move {
                        if let Err(error) = api.add_reaction(&id, &emoji).await {
                            eprintln!("cannot add the reaction: {error}");
                        }
                    });
                }
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
        let mut labels = Vec::new();
        for (index, attachment) in message.attachments.iter().enumerate() {
            match media::fetch(&self.api, &self.media_dir, &message.id, index, attachment).await {
                Ok(path) => {
                    media.push(path.display().to_string());
                    labels.push(attachment.label.clone());
                }
                Err(error) => {
                    eprintln!("cannot fetch a file of message {}: {error}", message.id);
                    labels.push(format!("{} (could not be downloaded)", attachment.label));
                }
            }
        }
        let content = match (message.content.is_empty(), labels.is_empty()) {
            (true, _) => labels.join(" "),
            (false, true) => message.content,
            (false, false) => format!("{}\n{}", message.content, labels.join(" ")),
        };
        let mut inbound = self.channel.inbound(message.id, message.sender_id, message.chat_id, content);
        inbound.media = media;
        inbound.metadata = message.metadata;
        inbound
    }

    /// Answers every frame that brought the message `id`.
    fn acknowledge(&self, id: &str) {
        for key in self.recent.accepted(id) {
            if !self.acks.ack(&key) {
                eprintln!("no connection to answer event {key}; feishu will push it again");
            }
        }
    }
}
