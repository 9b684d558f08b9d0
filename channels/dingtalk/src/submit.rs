//! Handing users' messages to the kernel one at a time, in the order DingTalk sent them, their
//! files fetched first, and acknowledging their callbacks only once the kernel has persisted
//! them.

use std::path::PathBuf;

use oxibot_plugin::Inbound;
use oxibot_plugin::chat::{AckLine, Handed, Handover, fetch_each, submit_in_order};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::OpenApi;
use crate::incoming::UserMessage;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel, and the callbacks to acknowledge.
    pub handover: Handover<AckLine>,
    /// The open API, for downloads.
    pub api: OpenApi,
    /// Where downloads go.
    pub media_dir: PathBuf,
}

impl Submitter {
    /// Submits queued messages until the kernel hangs up or the queue ends.
    pub async fn run(self, queue: UnboundedReceiver<UserMessage>) {
        submit_in_order(queue, |message| self.submit(message)).await;
    }

    /// Submits one message; false once the kernel is gone.
    async fn submit(&self, message: UserMessage) -> bool {
        let inbound = self.inbound(message).await;
        self.handover.hand(inbound).await != Handed::KernelGone
    }

    /// The inbound message, its files fetched (a file that cannot be fetched is named in the
    /// text instead).
    async fn inbound(&self, message: UserMessage) -> Inbound {
        let fetched = fetch_each(&message.id, &message.attachments, &self.media_dir, |attachment, dest| async move {
            self.api.download(&attachment.download_code, &dest).await
        })
        .await;
        let content = if message.content.is_empty() { fetched.labels.join(" ") } else { message.content };
        let mut inbound = self.handover.channel().inbound(message.id, message.sender_id, message.chat_id, content);
        inbound.media = fetched.media;
        inbound.metadata = message.metadata;
        inbound
    }
}
