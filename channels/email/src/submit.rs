//! Handing users' mail to the kernel one at a time, in the order it was found; once the
//! kernel has a mail, every UID that brought it goes back to the mailbox side to be flagged
//! `\Seen`.

use oxibot_plugin::chat::RecentMessages;
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelError, ChannelHandle};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::mail::UserMail;

/// What the submitter needs besides the queue.
pub struct Submitter {
    /// The kernel.
    pub channel: ChannelHandle,
    /// Mail seen lately, with the UIDs that brought it.
    pub recent: RecentMessages,
    /// UIDs of accepted mail, for the mailbox side.
    pub accepted: UnboundedSender<u32>,
}

impl Submitter {
    /// Submits queued mail until the kernel hangs up or the queue ends.
    pub async fn run(self, mut queue: UnboundedReceiver<UserMail>) {
        while let Some(mail) = queue.recv().await {
            let id = mail.id.clone();
            let mut inbound = self.channel.inbound(mail.id, mail.sender.clone(), mail.sender, mail.content);
            inbound.metadata = mail.metadata;
            match self.channel.submit(inbound).await {
                Ok(()) => self.accept(&id),
                Err(ChannelError::Closed) => {
                    self.recent.abandoned(&id);
                    return;
                }
                Err(ChannelError::TooLarge(reason)) => {
                    warn!("mail {id} dropped: the kernel cannot take it ({reason})");
                    self.accept(&id);
                }
            }
        }
    }

    /// Sends every UID that brought mail `id` to be flagged.
    fn accept(&self, id: &str) {
        for uid in self.recent.accepted(id) {
            if let Ok(uid) = uid.parse() {
                let _ = self.accepted.send(uid);
            }
        }
    }
}
