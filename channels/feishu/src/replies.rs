//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! A `Delta` grows a streamed reply: the first one with words sends a card at once, later ones
//! update it at most once a second (a timer shows the latest text when deltas pause). The final
//! `Outbound` with the same `stream_id` updates the card to the final text; other outbound
//! messages are sent as new cards. A reply longer than a card holds goes out as several cards.
//! Each outbound message is acked once delivered, or with the reason it could not be; a failed
//! delivery is remembered, so the kernel's retry sends only what is missing.

use std::collections::HashMap;
use std::time::Duration;

use oxibot_plugin::chat::{Replies, serve_replies, split};
use oxibot_plugin::{ChannelHandle, Delta, Outbound};
use tokio::time::Instant;

use crate::api::{ApiError, OpenApi};
use crate::cards::{FEISHU, LastMessages, Quote, card, quote, receiver};

/// The least time between two updates of a streamed reply's card.
const EDIT_INTERVAL: Duration = Duration::from_secs(1);
/// A streamed reply nobody finished within this time is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// How many partly delivered replies are remembered.
const PARTIAL_REMEMBERED: usize = 100;

/// A reply being streamed.
#[derive(Debug)]
struct Stream {
    /// The chat it goes to.
    chat_id: String,
    /// The Markdown received so far.
    text: String,
    /// The card message showing it, once sent.
    message_id: Option<String>,
    /// Whether `text` changed since the card last showed it.
    dirty: bool,
    /// The earliest time of the next update.
    next_edit: Instant,
    /// When the last delta arrived.
    touched: Instant,
    /// Sending or updating the card failed: the final reply goes out whole instead.
    broken: bool,
}

/// Delivers the kernel's messages to Feishu.
pub struct Deliverer {
    /// The open API.
    pub api: OpenApi,
    /// `replyToMessage`.
    pub reply_to_message: bool,
    /// `streaming`: whether deltas are shown at all.
    pub streaming: bool,
    /// The latest message of each chat, for streamed replies.
    pub last_messages: LastMessages,
    /// Streamed replies by `stream_id`.
    streams: HashMap<u64, Stream>,
    /// Outbound id → parts already delivered, for replies whose delivery failed halfway.
    sent: HashMap<u64, usize>,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(api: OpenApi, reply_to_message: bool, streaming: bool, last_messages: LastMessages) -> Deliverer {
        Deliverer { api, reply_to_message, streaming, last_messages, streams: HashMap::new(), sent: HashMap::new() }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Grows a streamed reply: sends its card with the first words, updates it later.
    async fn on_delta(&mut self, delta: Delta) {
        if !self.streaming {
            return;
        }
        let now = Instant::now();
        self.streams.retain(|_, stream| now.duration_since(stream.touched) < FORGET_AFTER);
        let stream = self.streams.entry(delta.stream_id).or_insert_with(|| Stream {
            chat_id: delta.chat_id.clone(),
            text: String::new(),
            message_id: None,
            dirty: false,
            next_edit: now,
            touched: now,
            broken: false,
        });
        stream.text.push_str(&delta.text);
        stream.touched = now;
        stream.dirty = true;
        if stream.broken || stream.text.trim().is_empty() || now < stream.next_edit {
            return;
        }
        let (chat_id, shown) = (stream.chat_id.clone(), first_part(&stream.text));
        let outcome = match stream.message_id.clone() {
            None => {
                let quote = quote(&self.last_messages.of(&chat_id), self.reply_to_message);
                self.new_card(&chat_id, quote.as_ref(), &shown).await.map(Some)
            }
            Some(message_id) => self.api.update_card(&message_id, &card(&shown)).await.map(|()| None),
        };
        let Some(stream) = self.streams.get_mut(&delta.stream_id) else { return };
        match outcome {
            Ok(created) => {
                stream.message_id = stream.message_id.take().or(created);
                stream.dirty = false;
                stream.next_edit = Instant::now() + EDIT_INTERVAL;
            }
            Err(error) => {
                eprintln!("cannot show the streamed reply in {chat_id}: {error}");
                stream.broken = true;
            }
        }
    }

    /// When the next pending update of a streamed card is due.
    fn next_due(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter(|stream| stream.dirty && stream.message_id.is_some() && !stream.broken)
            .map(|stream| stream.next_edit)
            .min()
    }

    /// Shows the latest text of every streamed card whose update is due.
    async fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(u64, String, String)> = self
            .streams
            .iter()
            .filter(|(_, stream)| stream.dirty && !stream.broken && stream.next_edit <= now)
            .filter_map(|(id, stream)| Some((*id, stream.message_id.clone()?, first_part(&stream.text))))
            .collect();
        for (id, message_id, shown) in due {
            let outcome = self.api.update_card(&message_id, &card(&shown)).await;
            let Some(stream) = self.streams.get_mut(&id) else { continue };
            stream.dirty = false;
            stream.next_edit = Instant::now() + EDIT_INTERVAL;
            if let Err(error) = outcome {
                eprintln!("cannot update the streamed reply in {}: {error}", stream.chat_id);
                stream.broken = true;
            }
        }
    }

    /// Delivers every part of `outbound` not delivered yet: into its streamed card when it
    /// has one, else as new cards.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), ApiError> {
        let parts = split(&outbound.content, FEISHU);
        if !outbound.media.is_empty() {
            eprintln!(
                "reply {}: {} attachment(s) not sent (files are not supported yet)",
                outbound.id,
                outbound.media.len()
            );
        }
        if parts.is_empty() {
            self.streams.retain(|id, _| Some(*id) != outbound.stream_id);
            if outbound.media.is_empty() {
                return Ok(());
            }
            let reason = "the feishu channel cannot send files yet".to_owned();
            return Err(ApiError::Malformed { call: "im/v1/messages", reason });
        }
        let streamed_card = outbound
            .stream_id
            .and_then(|id| self.streams.get(&id))
            .filter(|stream| !stream.broken)
            .and_then(|stream| stream.message_id.clone());
        let quote = quote(&outbound.metadata, self.reply_to_message);
        let already = self.sent.remove(&outbound.id).unwrap_or(0);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&streamed_card, index) {
                (Some(message_id), 0) => self.api.update_card(message_id, &card(part)).await,
                _ => {
                    let quoted =
                        quote.as_ref().filter(|quote| quote.every_part || (index == 0 && streamed_card.is_none()));
                    self.new_card(&outbound.chat_id, quoted, part).await.map(drop)
                }
            };
            if let Err(error) = delivered {
                self.remember_partial(outbound.id, index);
                return Err(error);
            }
        }
        if let Some(id) = outbound.stream_id {
            self.streams.remove(&id);
        }
        Ok(())
    }

    /// Sends a new card showing `markdown` to chat `chat_id`, as a reply when `quote` says so;
    /// returns its message id.
    async fn new_card(&self, chat_id: &str, quote: Option<&Quote>, markdown: &str) -> Result<String, ApiError> {
        let card = card(markdown);
        match quote {
            Some(quote) => self.api.reply_card(&quote.message_id, &card, quote.in_thread).await,
            None => self.api.send_card(&receiver(chat_id), &card).await,
        }
    }

    /// Notes that the first `count` parts of reply `id` are delivered.
    fn remember_partial(&mut self, id: u64, count: usize) {
        if count == 0 {
            return;
        }
        if self.sent.len() >= PARTIAL_REMEMBERED {
            self.sent.clear();
        }
        self.sent.insert(id, count);
    }
}

impl Replies for Deliverer {
    type Error = ApiError;

    fn next_due(&self) -> Option<Instant> {
        Deliverer::next_due(self)
    }

    async fn on_delta(&mut self, delta: Delta) {
        Deliverer::on_delta(self, delta).await;
    }

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), ApiError> {
        Deliverer::deliver(self, outbound).await
    }

    async fn flush_due(&mut self) {
        Deliverer::flush_due(self).await;
    }
}

/// What a streamed card shows: the part of the text that fits one card.
fn first_part(text: &str) -> String {
    split(text, FEISHU).into_iter().next().unwrap_or_default()
}
