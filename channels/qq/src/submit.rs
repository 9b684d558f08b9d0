//! Handing users' messages to the kernel one at a time, in the order QQ sent them, their
//! attachments fetched first; once the kernel has a message, its events count as handled and
//! the "processing" notice (`ackMessage`) goes out.

use std::path::PathBuf;

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle, Inbound};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::{Api, Target};
use crate::incoming::UserMessage;
use crate::replies::Sender;
use crate::sequence::Sequence;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Messages seen lately, with the sequence numbers of the events that brought them.
    pub recent: RecentMessages,
    /// Which events are handled.
    pub sequence: Sequence,
    /// For downloads.
    pub api: Api,
    /// For the notice.
    pub sender: Sender,
    /// `ackMessage`; empty for none.
    pub ack_message: String,
    /// Where attachments go.
    pub media_dir: PathBuf,
    /// The largest attachment fetched.
    pub download_max_bytes: u64,
}

impl Submitter {
    /// Submits queued messages until the kernel hangs up or the queue ends.
    pub async fn run(self, mut queue: UnboundedReceiver<UserMessage>) {
        while let Some(message) = queue.recv().await {
            let (id, target) = (message.id.clone(), target_of(&message));
            let inbound = self.inbound(message).await;
            match self.channel.submit(inbound).await {
                Ok(()) => {
                    self.handled(&id);
                    self.notify(target, id);
                }
                Err(ChannelError::Closed) => {
                    self.recent.abandoned(&id);
                    return;
                }
                Err(ChannelError::TooLarge(reason)) => {
                    warn!("message {id} dropped: the kernel cannot take it ({reason})");
                    self.handled(&id);
                }
            }
        }
    }

    /// The inbound message, its attachments fetched (one that cannot be is named in the text).
    async fn inbound(&self, message: UserMessage) -> Inbound {
        let mut media = Vec::new();
        let mut lines = vec![message.content.clone()];
        for (index, attachment) in message.attachments.iter().enumerate() {
            let dest = self.media_dir.join(file_name(&message.id, index, &attachment.filename));
            match self.api.download(&attachment.url, &dest, self.download_max_bytes).await {
                Ok(()) => {
                    media.push(dest.display().to_string());
                    lines.push(attachment.placeholder());
                }
                Err(error) => {
                    warn!("cannot fetch an attachment of message {}: {error}", message.id);
                    lines.push(format!("{} (could not be downloaded)", attachment.placeholder()));
                }
            }
        }
        let content = lines.into_iter().filter(|line| !line.is_empty()).collect::<Vec<_>>().join("\n");
        let mut inbound = self.channel.inbound(message.id, message.sender_id, message.chat_id, content);
        inbound.media = media;
        inbound.metadata = message.metadata;
        inbound
    }

    /// Marks every event that brought message `id` handled.
    fn handled(&self, id: &str) {
        for seq in self.recent.accepted(id) {
            if let Ok(seq) = seq.parse() {
                self.sequence.handled(seq);
            }
        }
    }

    /// Sends the notice as a reply to message `id`, in the background; failures are logged.
    fn notify(&self, target: Target, id: String) {
        if self.ack_message.is_empty() {
            return;
        }
        let (sender, text) = (self.sender.clone(), self.ack_message.clone());
        tokio::spawn(async move {
            if let Err(error) = sender.send(&target, &text, Some(&id)).await {
                warn!("cannot send the notice for message {id}: {error}");
            }
        });
    }
}

/// Where replies to `message` go.
fn target_of(message: &UserMessage) -> Target {
    if message.is_group { Target::Group(message.chat_id.clone()) } else { Target::User(message.chat_id.clone()) }
}

/// A safe file name for attachment `index` of message `id`: the sender's name reduced to
/// letters, digits, `.`, `-` and `_`, under a prefix that keeps names apart.
fn file_name(id: &str, index: usize, original: &str) -> String {
    let clean = |text: &str, keep: usize| -> String {
        let kept: String =
            text.chars().filter(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_')).take(keep).collect();
        kept.trim_matches('.').to_owned()
    };
    let name = clean(original, 80);
    let prefix = format!("{}_{index}", clean(id, 40));
    if name.is_empty() { prefix } else { format!("{prefix}_{name}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_names_cannot_leave_the_media_dir() {
        assert_eq!(file_name("ROBOT1.0_a/b", 0, "../../etc/passwd"), "ROBOT1.0_ab_0_etcpasswd");
        assert_eq!(file_name("m1", 2, ""), "m1_2");
        assert_eq!(file_name("m1", 0, "照片.jpg"), "m1_0_照片.jpg");
    }
}
