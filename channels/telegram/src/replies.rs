//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! A `Delta` grows a streamed reply: the first one sends a message at once, later ones edit it
//! at most once a second (a timer shows the latest text when deltas pause). The final
//! `Outbound` with the same `stream_id` edits it to the final text; other outbound messages
//! are sent whole. Each outbound message is acked once delivered, or with the reason it could
//! not be; a failed delivery is remembered, so the kernel's retry sends only what is missing.

use std::collections::HashMap;
use std::time::Duration;

use oxibot_plugin::chat::{Choice, Replies, Typing, approval, serve_replies};
use oxibot_plugin::warn;
use oxibot_plugin::{ApprovalRequest, ChannelHandle, Delta, Outbound};
use tokio::time::Instant;

use crate::api::BotApi;
use crate::error::ApiError;
use crate::reply_parts::{Effort, Reply};
use crate::target::{LastMessages, ReplyTarget};

/// The least time between two edits of a streamed reply.
const EDIT_INTERVAL: Duration = Duration::from_secs(1);
/// A streamed or failed reply nobody finished within this time is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// A reply being streamed.
#[derive(Debug)]
struct Stream {
    reply: Reply,
    /// The Markdown received so far.
    text: String,
    /// Whether `text` changed since it was last shown.
    dirty: bool,
    /// The earliest time of the next edit.
    next_edit: Instant,
    /// When the last delta arrived.
    touched: Instant,
}

/// Delivers the kernel's messages to Telegram.
pub struct Deliverer {
    api: BotApi,
    typing: Typing,
    last_messages: LastMessages,
    /// Whether replies quote the user's message.
    quote: bool,
    /// Streamed replies by `stream_id`.
    streams: HashMap<u64, Stream>,
    /// Replies whose delivery failed, by outbound id, with when that was.
    failed: HashMap<u64, (Reply, Instant)>,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(api: BotApi, typing: Typing, last_messages: LastMessages, quote: bool) -> Deliverer {
        Deliverer { api, typing, last_messages, quote, streams: HashMap::new(), failed: HashMap::new() }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Appends a delta; shows it now when the stream is new or its edit interval has passed.
    async fn on_delta(&mut self, delta: Delta) {
        let now = Instant::now();
        let (quote, last) = (self.quote, &self.last_messages);
        let stream = self.streams.entry(delta.stream_id).or_insert_with(|| Stream {
            reply: Reply::new(&delta.chat_id, last.of(&delta.chat_id), quote),
            text: String::new(),
            dirty: false,
            next_edit: now,
            touched: now,
        });
        stream.text.push_str(&delta.text);
        stream.dirty = true;
        stream.touched = now;
        if stream.next_edit <= now {
            show_draft(&self.api, stream).await;
        }
    }

    /// When the next throttled edit is due.
    fn next_due(&self) -> Option<Instant> {
        self.streams.values().filter(|s| s.dirty).map(|s| s.next_edit).min()
    }

    /// Shows every stream whose edit is due.
    async fn flush_due(&mut self) {
        let now = Instant::now();
        for stream in self.streams.values_mut().filter(|s| s.dirty && s.next_edit <= now) {
            show_draft(&self.api, stream).await;
        }
    }

    /// Sends an outbound message's text and files, finishing its stream if it has one; an
    /// approval request's `buttons` go on its first part.
    async fn deliver(&mut self, outbound: &Outbound, buttons: &[Choice]) -> Result<(), ApiError> {
        self.typing.stop(&outbound.chat_id);
        let (mut reply, streamed) = self.reply_for(outbound, buttons);
        let text = if outbound.content.trim().is_empty() { streamed } else { outbound.content.clone() };
        let mut result = Ok(());
        if !text.trim().is_empty() {
            result = reply.show(&self.api, &text, Effort::Final).await;
        }
        if result.is_ok() {
            result = reply.send_files(&self.api, &outbound.media).await;
        }
        if result.is_err() {
            self.failed.insert(outbound.id, (reply, Instant::now()));
        }
        result
    }

    /// The reply an outbound message completes: its stream's, a failed earlier attempt's, or a
    /// new one; with the text streamed so far.
    fn reply_for(&mut self, outbound: &Outbound, buttons: &[Choice]) -> (Reply, String) {
        if let Some((reply, _)) = self.failed.remove(&outbound.id) {
            return (reply, String::new());
        }
        let stream = outbound
            .stream_id
            .and_then(|id| self.streams.remove(&id))
            .filter(|s| s.reply.chat_id() == outbound.chat_id);
        match stream {
            Some(stream) => (stream.reply, stream.text),
            None => (
                Reply::new(&outbound.chat_id, ReplyTarget::from_metadata(&outbound.metadata), self.quote)
                    .with_buttons(buttons),
                String::new(),
            ),
        }
    }

    /// Drops streams and failed replies nobody came back for.
    fn forget_stale(&mut self) {
        let now = Instant::now();
        self.streams.retain(|_, s| now.duration_since(s.touched) < FORGET_AFTER);
        self.failed.retain(|_, (_, at)| now.duration_since(*at) < FORGET_AFTER);
    }
}

impl Replies for Deliverer {
    type Error = ApiError;

    fn next_due(&mut self) -> Option<Instant> {
        Deliverer::next_due(self)
    }

    async fn on_delta(&mut self, delta: Delta) {
        Deliverer::on_delta(self, delta).await;
        self.forget_stale();
    }

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), ApiError> {
        let outcome = Deliverer::deliver(self, outbound, &[]).await;
        self.forget_stale();
        outcome
    }

    /// An approval request: its text with an inline keyboard of its answers.
    async fn ask(&mut self, request: &ApprovalRequest) -> Result<(), ApiError> {
        let outcome = Deliverer::deliver(self, &approval::as_outbound(request), &approval::choices(request)).await;
        self.forget_stale();
        outcome
    }

    async fn flush_due(&mut self) {
        Deliverer::flush_due(self).await;
        self.forget_stale();
    }
}

/// Shows a stream's text so far; a failure is logged.
async fn show_draft(api: &BotApi, stream: &mut Stream) {
    if stream.text.trim().is_empty() {
        return;
    }
    let result = stream.reply.show(api, &stream.text, Effort::Draft).await;
    let mut wait = EDIT_INTERVAL;
    // Rate-limited text is shown again once the wait is over; other failures wait for the
    // next delta or the final text.
    stream.dirty = false;
    if let Err(error) = result {
        warn!("cannot update a streamed reply in chat {}: {error}", stream.reply.chat_id());
        if let Some(retry_after) = error.retry_after() {
            wait = wait.max(retry_after);
            stream.dirty = true;
        }
    }
    stream.next_edit = Instant::now() + wait;
}
