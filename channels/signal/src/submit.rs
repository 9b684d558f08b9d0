//! Handing users' messages to the kernel one at a time, in the order they came.

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::incoming::UserMessage;

/// Submits queued messages until the kernel hangs up or the queue ends.
pub async fn run(channel: ChannelHandle, recent: RecentMessages, mut queue: UnboundedReceiver<UserMessage>) {
    while let Some(message) = queue.recv().await {
        let mut inbound = channel.inbound(message.id.clone(), message.sender_id, message.chat_id, message.content);
        inbound.metadata = message.metadata;
        match channel.submit(inbound).await {
            Ok(()) => {}
            Err(ChannelError::Closed) => {
                recent.abandoned(&message.id);
                return;
            }
            Err(ChannelError::TooLarge(reason)) => {
                warn!("message {} dropped: the kernel cannot take it ({reason})", message.id)
            }
        }
        recent.accepted(&message.id);
    }
}
