//! Handing users' messages to the kernel one at a time, in the order the service sent them:
//! the queue drained in order ([`submit_in_order`]), a message's files fetched first
//! ([`fetch_each`]), and what became of it ([`hand_over`]), so the channel acknowledges the
//! service's deliveries of a message only once the kernel has it.

use std::fmt::Display;
use std::future::Future;
use std::path::PathBuf;

use tokio::sync::mpsc::UnboundedReceiver;

use super::RecentMessages;
use crate::{ChannelError, ChannelHandle, Inbound};

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

/// A message's files, fetched.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The paths of the files fetched, for the inbound's `media`.
    pub media: Vec<String>,
    /// A label for each file (its kind, or name), marked when it could not be downloaded, for
    /// the text.
    pub labels: Vec<String>,
}

/// Fetches each of `attachments` of message `message_id` with `fetch` (given its index); a file
/// that cannot be fetched is logged and only labelled.
pub async fn fetch_each<'a, A, E, F>(
    message_id: &str,
    attachments: &'a [A],
    label: impl Fn(&A) -> String,
    mut fetch: impl FnMut(usize, &'a A) -> F,
) -> Fetched
where
    E: Display,
    F: Future<Output = Result<PathBuf, E>>,
{
    let mut fetched = Fetched::default();
    for (index, attachment) in attachments.iter().enumerate() {
        match fetch(index, attachment).await {
            Ok(path) => {
                fetched.media.push(path.display().to_string());
                fetched.labels.push(label(attachment));
            }
            Err(error) => {
                crate::warn!("cannot fetch a file of message {message_id}: {error}");
                fetched.labels.push(format!("{} (could not be downloaded)", label(attachment)));
            }
        }
    }
    fetched
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_that_cannot_be_fetched_is_labelled_as_such_and_the_others_kept() {
        let attachments = ["photo", "video"];
        let fetched = fetch_each(
            "m1",
            &attachments,
            |kind| format!("[{kind}]"),
            async |index, _kind| {
                if index == 0 { Ok(PathBuf::from("/media/m1-0.jpg")) } else { Err("404") }
            },
        )
        .await;
        assert_eq!(fetched.media, ["/media/m1-0.jpg"]);
        assert_eq!(fetched.labels, ["[photo]", "[video] (could not be downloaded)"]);
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
