//! The event loop of a channel's replies: the kernel's deltas and whole replies as they come,
//! and, for a channel that streams replies by editing a message, a timer for the next edit a
//! streamed reply is due. A channel that does not stream implements only `deliver`; one that
//! streams by editing a message implements [`EditedReplies`] (how to show an edit) and gets
//! the rest.

use std::fmt::Display;
use std::future::Future;

use tokio::time::Instant;

use super::{Edit, Streams, approval};
use crate::{ApprovalRequest, ChannelEvent, ChannelHandle, Delta, Outbound};

/// What a channel's reply deliverer does; [`serve_replies`] drives it.
pub trait Replies {
    /// Why a reply could not be delivered (told to the kernel in its `delivery_ack`).
    type Error: Display;

    /// When the next edit of a streamed reply is due, if one is (never, by default).
    fn next_due(&mut self) -> Option<Instant> {
        None
    }

    /// A piece of a reply being written (`stream_id` names the reply); ignored by default.
    fn on_delta(&mut self, _delta: Delta) -> impl Future<Output = ()> {
        async {}
    }

    /// A whole reply, ending the streamed reply with the same `stream_id` if there is one.
    fn deliver(&mut self, outbound: &Outbound) -> impl Future<Output = Result<(), Self::Error>>;

    /// An approval request (only for a channel that announced approvals): shown as its text,
    /// by default; a channel with buttons adds one per [`approval::choices`].
    fn ask(&mut self, request: &ApprovalRequest) -> impl Future<Output = Result<(), Self::Error>> {
        let outbound = approval::as_outbound(request);
        async move { self.deliver(&outbound).await }
    }

    /// Makes the edits that are due (none, by default).
    fn flush_due(&mut self) -> impl Future<Output = ()> {
        async {}
    }
}

/// Handles the kernel's deltas and replies until it hangs up: each reply is acknowledged with
/// its outcome (a failure also logged), and due edits are made between events.
pub async fn serve_replies(channel: &ChannelHandle, replies: &mut impl Replies) {
    loop {
        let due = replies.next_due();
        let timer = async move {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = channel.next_event() => match event {
                Some(ChannelEvent::Delta(delta)) => replies.on_delta(delta).await,
                Some(ChannelEvent::Outbound(outbound)) => {
                    let outcome = replies.deliver(&outbound).await.map_err(|error| error.to_string());
                    if let Err(reason) = &outcome {
                        crate::warn!("reply {} to {} not delivered: {reason}", outbound.id, outbound.chat_id);
                    }
                    let _ = channel.ack(outbound.id, outcome);
                }
                Some(ChannelEvent::Approval(request)) => {
                    let outcome = replies.ask(&request).await.map_err(|error| error.to_string());
                    if let Err(reason) = &outcome {
                        crate::warn!("approval request {} to {} not shown: {reason}", request.id, request.chat_id);
                    }
                    let _ = channel.ack(request.id, outcome);
                }
                None => return,
            },
            () = timer => replies.flush_due().await,
        }
    }
}

/// A channel that streams replies by editing one message: it keeps its [`Streams`], says how
/// an edit is shown, and delivers whole replies; deltas, due edits and the timer come with it.
pub trait EditedReplies {
    /// How the service names the message showing a reply.
    type Message: Clone;
    /// Why a reply could not be delivered.
    type Error: Display;

    /// The replies being streamed.
    fn streams(&mut self) -> &mut Streams<Self::Message>;

    /// Whether `delta` grows its reply: false leaves it out (a reply that cannot be streamed;
    /// with streaming off, [`Streams::enabled`] leaves every delta out). Yes by default.
    fn accepts(&mut self, _delta: &Delta) -> bool {
        true
    }

    /// What one message shows of a reply's `text`: the part that fits.
    fn visible(&self, text: &str) -> String;

    /// Sends the message that shows a reply in `chat_id`, with `text`; the service's name for
    /// it.
    fn send(&mut self, chat_id: &str, text: &str) -> impl Future<Output = Result<Self::Message, Self::Error>>;

    /// Edits `message` to show `text`.
    fn edit(&mut self, message: &Self::Message, text: &str) -> impl Future<Output = Result<(), Self::Error>>;

    /// A whole reply, ending the streamed reply with the same `stream_id` if there is one.
    fn deliver_whole(&mut self, outbound: &Outbound) -> impl Future<Output = Result<(), Self::Error>>;

    /// An approval request, shown as its text by default (see [`Replies::ask`]).
    fn ask(&mut self, request: &ApprovalRequest) -> impl Future<Output = Result<(), Self::Error>> {
        let outbound = approval::as_outbound(request);
        async move { self.deliver_whole(&outbound).await }
    }
}

impl<T: EditedReplies> Replies for T {
    type Error = T::Error;

    fn next_due(&mut self) -> Option<Instant> {
        self.streams().next_due()
    }

    async fn on_delta(&mut self, delta: Delta) {
        if !self.accepts(&delta) {
            return;
        }
        if let Some(edit) = self.streams().grow(&delta) {
            show(self, edit).await;
        }
    }

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), T::Error> {
        self.deliver_whole(outbound).await
    }

    async fn ask(&mut self, request: &ApprovalRequest) -> Result<(), T::Error> {
        EditedReplies::ask(self, request).await
    }

    async fn flush_due(&mut self) {
        for edit in self.streams().due() {
            show(self, edit).await;
        }
    }
}

/// Shows an edit: sends the reply's message with the first words, edits it later, and notes
/// the outcome in the channel's [`Streams`].
async fn show<T: EditedReplies>(replies: &mut T, edit: Edit<T::Message>) {
    let shown = replies.visible(&edit.text);
    let outcome = match &edit.message {
        None => replies.send(&edit.chat_id, &shown).await.map(Some),
        Some(message) => replies.edit(message, &shown).await.map(|()| None),
    };
    replies.streams().shown(edit.stream_id, outcome);
}
