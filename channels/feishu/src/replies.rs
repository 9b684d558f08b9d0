//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! A `Delta` grows a streamed reply: the first one with words sends a card at once, later ones
//! update it at most once a second (a timer shows the latest text when deltas pause). The final
//! `Outbound` with the same `stream_id` updates the card to the final text; other outbound
//! messages are sent as new cards. A reply longer than a card holds goes out as several cards.
//! Each outbound message is acked once delivered, or with the reason it could not be; a failed
//! delivery is remembered, so the kernel's retry sends only what is missing. An approval
//! request is a new card with a button per answer.

use std::time::Duration;

use oxibot_plugin::chat::{EditedReplies, PartsSent, Streams, approval, leave_files_out, serve_replies, split};
use oxibot_plugin::{ApprovalRequest, ChannelHandle, Outbound};

use serde_json::Value;

use crate::api::{ApiError, OpenApi};
use crate::cards::{FEISHU, LastMessages, Quote, approval_card, card, quote, receiver};

/// The least time between two updates of a streamed reply's card.
const EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// Delivers the kernel's messages to Feishu.
pub struct Deliverer {
    /// The open API.
    pub api: OpenApi,
    /// `replyToMessage`.
    pub reply_to_message: bool,
    /// The latest message of each chat, for streamed replies.
    pub last_messages: LastMessages,
    /// Streamed replies, each shown in a card (named by its message id).
    streams: Streams<String>,
    /// The parts already delivered of replies not delivered whole yet (kept on disk).
    sent: PartsSent,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(
        api: OpenApi,
        reply_to_message: bool,
        streaming: bool,
        last_messages: LastMessages,
        sent: PartsSent,
    ) -> Deliverer {
        let streams = Streams::new(EDIT_INTERVAL).enabled(streaming);
        Deliverer { api, reply_to_message, last_messages, streams, sent }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Delivers every part of `outbound` not delivered yet: into its streamed card when it
    /// has one, else as new cards.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), ApiError> {
        let parts = split(&outbound.content, FEISHU);
        let files = leave_files_out(outbound, !parts.is_empty(), "feishu");
        if parts.is_empty() {
            self.streams.finish(outbound.stream_id);
            return files.map_err(|reason| ApiError::malformed("im/v1/messages", reason));
        }
        let streamed_card = self.streams.message_of(outbound.stream_id);
        let quote = quote(&outbound.metadata, self.reply_to_message);
        let already = self.sent.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&streamed_card, index) {
                (Some(message_id), 0) => self.api.update_card(message_id, &card(part)).await,
                _ => {
                    let quoted =
                        quote.as_ref().filter(|quote| quote.every_part || (index == 0 && streamed_card.is_none()));
                    self.new_card(&outbound.chat_id, quoted, part).await.map(drop)
                }
            };
            delivered?;
            self.sent.posted(outbound.id, index + 1, parts.len());
        }
        self.streams.finish(outbound.stream_id);
        Ok(())
    }

    /// Sends an approval request's card (its text cut to what a card holds), unless an
    /// earlier attempt sent it.
    async fn ask(&mut self, request: &ApprovalRequest) -> Result<(), ApiError> {
        if self.sent.already(request.id) > 0 {
            return Ok(());
        }
        let text = split(&request.text, FEISHU).into_iter().next().unwrap_or_default();
        let card = approval_card(&text, &request.chat_id, &approval::choices(request));
        let quote = quote(&request.metadata, self.reply_to_message);
        self.send_made_card(&request.chat_id, quote.as_ref(), &card).await?;
        self.sent.posted(request.id, 1, 1);
        Ok(())
    }

    /// Sends a new card showing `markdown` to chat `chat_id`, as a reply when `quote` says so;
    /// returns its message id.
    async fn new_card(&self, chat_id: &str, quote: Option<&Quote>, markdown: &str) -> Result<String, ApiError> {
        self.send_made_card(chat_id, quote, &card(markdown)).await
    }

    /// Sends `card` to chat `chat_id`, as a reply when `quote` says so; returns its message id.
    async fn send_made_card(&self, chat_id: &str, quote: Option<&Quote>, card: &Value) -> Result<String, ApiError> {
        match quote {
            Some(quote) => self.api.reply_card(&quote.message_id, card, quote.in_thread).await,
            None => self.api.send_card(&receiver(chat_id), card).await,
        }
    }
}

impl EditedReplies for Deliverer {
    type Message = String;
    type Error = ApiError;

    fn streams(&mut self) -> &mut Streams<String> {
        &mut self.streams
    }

    /// The part of the text that fits one card.
    fn visible(&self, text: &str) -> String {
        split(text, FEISHU).into_iter().next().unwrap_or_default()
    }

    /// A new card, quoting the chat's latest message when `replyToMessage` says so.
    async fn send(&mut self, chat_id: &str, text: &str) -> Result<String, ApiError> {
        let quote = quote(&self.last_messages.of(chat_id), self.reply_to_message);
        self.new_card(chat_id, quote.as_ref(), text).await
    }

    async fn edit(&mut self, message_id: &String, text: &str) -> Result<(), ApiError> {
        self.api.update_card(message_id, &card(text)).await
    }

    async fn deliver_whole(&mut self, outbound: &Outbound) -> Result<(), ApiError> {
        Deliverer::deliver(self, outbound).await
    }

    async fn ask(&mut self, request: &ApprovalRequest) -> Result<(), ApiError> {
        Deliverer::ask(self, request).await
    }
}
