//! Handing users' messages to the kernel one at a time, in the order the service sent them:
//! the queue drained in order ([`submit_in_order`]), a message's files fetched first
//! ([`fetch_each`]), and what became of it ([`hand_over`]), so the channel acknowledges the
//! service's deliveries of a message only once the kernel has it.

use std::fmt::Display;
use std::future::Future;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc::UnboundedReceiver;

use super::RecentMessages;
use crate::{ChannelError, ChannelHandle, Inbound};

/// A user's message as a channel reads it from its service, before it becomes an `Inbound`:
/// what each field holds (the chat id's form, the metadata's keys) is the channel's to say.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage<A = ()> {
    /// The service's id of the message: the same for every delivery of it.
    pub id: String,
    /// Who wrote it.
    pub sender_id: String,
    /// The chat the reply goes to.
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// Files to fetch before submitting.
    pub attachments: Vec<A>,
    /// What a reply needs to find its way back, and what the kernel shows about the chat.
    pub metadata: serde_json::Value,
}

/// What a channel does with an event of its service.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict<M, R = &'static str> {
    /// Hand it to the kernel.
    Submit(M),
    /// Leave it out, for this reason (for logs and tests).
    Ignore(R),
}

/// Hands the queued messages to `submit` one at a time until it says the kernel is gone
/// (`false`) or the queue ends.
pub async fn submit_in_order<M, F>(mut queue: UnboundedReceiver<M>, mut submit: impl FnMut(M) -> F)
where
    F: Future<Output = bool>,
{
    while let Some(message) = queue.recv().await {
        if !submit(message).await {
            return;
        }
    }
}

/// What became of a message handed to the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    /// The kernel has it; the service's deliveries of it (from [`RecentMessages`]) are to be
    /// acknowledged.
    Accepted(Vec<String>),
    /// The kernel cannot take it (too large; logged): it is dropped for good, and its
    /// deliveries are acknowledged all the same, so the service does not send it again.
    Dropped(Vec<String>),
    /// The kernel is gone: the message counts as new when the service sends it again.
    KernelGone,
}

impl Handed {
    /// The deliveries to acknowledge to the service (none once the kernel is gone).
    pub fn deliveries(&self) -> &[String] {
        match self {
            Handed::Accepted(deliveries) | Handed::Dropped(deliveries) => deliveries,
            Handed::KernelGone => &[],
        }
    }
}

/// Submits `inbound`, a message `recent` keeps track of (by its id), and says what became of it.
pub async fn hand_over(channel: &ChannelHandle, recent: &RecentMessages, inbound: Inbound) -> Handed {
    let id = inbound.id.clone();
    match channel.submit(inbound).await {
        Ok(()) => Handed::Accepted(recent.accepted(&id)),
        Err(ChannelError::Closed) => {
            recent.abandoned(&id);
            Handed::KernelGone
        }
        Err(ChannelError::TooLarge(reason)) => {
            crate::warn!("message {id} dropped: the kernel cannot take it ({reason})");
            Handed::Dropped(recent.accepted(&id))
        }
    }
}

/// The line on which a channel acknowledges its service's deliveries of a message (callbacks,
/// envelopes, event frames) once the kernel has it.
pub trait Acknowledge {
    /// Acknowledges the delivery `key`; false when no connection takes it (the service then
    /// delivers the message again, and it is acknowledged at once).
    fn ack(&self, key: &str) -> bool;
}

/// What hands a channel's messages to the kernel and acknowledges their deliveries: the
/// kernel, the deliveries awaiting acknowledgement, and the line they are acknowledged on.
#[derive(Clone)]
pub struct Handover<A> {
    channel: ChannelHandle,
    recent: RecentMessages,
    acks: A,
    /// The service's name, for the log.
    service: &'static str,
}

impl<A: Acknowledge> Handover<A> {
    /// A handover to `channel` of messages from `service` that `recent` keeps track of,
    /// acknowledged on `acks`.
    pub fn new(channel: ChannelHandle, recent: RecentMessages, acks: A, service: &'static str) -> Handover<A> {
        Handover { channel, recent, acks, service }
    }

    /// The kernel.
    pub fn channel(&self) -> &ChannelHandle {
        &self.channel
    }

    /// Hands `inbound` to the kernel ([`hand_over`]) and acknowledges the deliveries that
    /// brought it.
    pub async fn hand(&self, inbound: Inbound) -> Handed {
        let handed = hand_over(&self.channel, &self.recent, inbound).await;
        for key in handed.deliveries() {
            if !self.acks.ack(key) {
                crate::warn!("no connection to acknowledge delivery {key}; {} will send it again", self.service);
            }
        }
        handed
    }
}

/// A message's files, fetched.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The paths of the files fetched, for the inbound's `media`.
    pub media: Vec<String>,
    /// A label for each file (its kind, or name), marked when it could not be downloaded, for
    /// the text.
    pub labels: Vec<String>,
}

/// A file a user's message carries, as [`fetch_each`] needs it.
pub trait Attachment {
    /// What the text calls it: `[image]`, `[file: report.pdf]`.
    fn label(&self) -> String;
    /// The extension it is saved with: `jpg`.
    fn extension(&self) -> String;
}

/// The name attachment number `index` of message `message_id` is saved under:
/// `<message id>-<index>.<extension>` with only safe characters, so a message delivered again
/// reuses its paths.
pub fn media_file_name(message_id: &str, index: usize, extension: &str) -> String {
    format!("{}-{index}.{}", safe(message_id), safe(extension))
}

fn safe(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Fetches each of `attachments` of message `message_id` into `dir` (created when missing):
/// `fetch` gets the attachment and the path to save it at. A file that cannot be fetched is
/// logged and only labelled.
pub async fn fetch_each<'a, A, E, F>(
    message_id: &str,
    attachments: &'a [A],
    dir: &Path,
    mut fetch: impl FnMut(&'a A, PathBuf) -> F,
) -> Fetched
where
    A: Attachment,
    E: Display,
    F: Future<Output = Result<(), E>>,
{
    let mut fetched = Fetched::default();
    for (index, attachment) in attachments.iter().enumerate() {
        let dest = dir.join(media_file_name(message_id, index, &attachment.extension()));
        let outcome = match tokio::fs::create_dir_all(dir).await {
            Ok(()) => fetch(attachment, dest.clone()).await.map_err(|error| error.to_string()),
            Err(error) => Err(format!("cannot create {}: {error}", dir.display())),
        };
        match outcome {
            Ok(()) => {
                fetched.media.push(dest.display().to_string());
                fetched.labels.push(attachment.label());
            }
            Err(reason) => {
                crate::warn!("cannot fetch a file of message {message_id}: {reason}");
                fetched.labels.push(format!("{} (could not be downloaded)", attachment.label()));
            }
        }
    }
    fetched
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Kind(&'static str);

    impl Attachment for Kind {
        fn label(&self) -> String {
            format!("[{}]", self.0)
        }

        fn extension(&self) -> String {
            "bin".to_owned()
        }
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_fetched_is_labelled_as_such_and_the_others_kept() {
        let dir = std::env::temp_dir().join(format!("oxibot-fetch-each-{}", std::process::id()));
        let attachments = [Kind("photo"), Kind("video")];
        let fetched = fetch_each("m/1", &attachments, &dir, |kind, _dest| async move {
            if kind.0 == "photo" { Ok(()) } else { Err("404") }
        })
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(fetched.media, [dir.join("m_1-0.bin").display().to_string()]);
        assert_eq!(fetched.labels, ["[photo]", "[video] (could not be downloaded)"]);
    }

    #[test]
    fn unsafe_characters_never_reach_the_file_system() {
        assert_eq!(media_file_name("../om/1", 2, "p.df"), "___om_1-2.p_df");
        assert_eq!(media_file_name("om_abc123", 0, "jpg"), "om_abc123-0.jpg");
    }

    #[tokio::test]
    async fn messages_are_submitted_in_order_until_the_kernel_is_gone() {
        let (queue_in, queue) = tokio::sync::mpsc::unbounded_channel();
        for number in 1..=4 {
            queue_in.send(number).unwrap();
        }
        let submitted = std::cell::RefCell::new(Vec::new());
        submit_in_order(queue, |number| {
            submitted.borrow_mut().push(number);
            async move { number < 2 }
        })
        .await;
        assert_eq!(submitted.into_inner(), [1, 2]);
    }
}
