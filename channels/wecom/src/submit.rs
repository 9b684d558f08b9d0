//! Handing users' messages to the kernel one at a time, in the order WeCom sent them. WeCom
//! has no acknowledgement of a callback: a message is only answered, and only once the kernel
//! has persisted it (the reply comes from the kernel).

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::incoming::UserMessage;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Messages seen lately; a message is marked accepted once the kernel has it.
    pub recent: RecentMessages,
}

impl Submitter {
    /// Submits queued messages until the kernel hangs up or the queue ends.
    pub async fn run(self, mut queue: UnboundedReceiver<UserMessage>) {
        while let Some(message) = queue.recv().await {
            let id = message.id.clone();
            let mut inbound = self.channel.inbound(message.id, message.sender_id, message.chat_id, message.content);
            inbound.metadata = message.metadata;
            match self.channel.submit(inbound).await {
                Ok(()) => {
                    self.recent.accepted(&id);
                }
                Err(ChannelError::Closed) => {
                    self.recent.abandoned(&id);
                    return;
                }
                Err(ChannelError::TooLarge(reason)) => {
                    warn!("message {id} dropped: the kernel cannot take it ({reason})");
                    self.recent.accepted(&id);
                }
            }
        }
    }
}
