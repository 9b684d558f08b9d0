//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! A reply to a user's message is a `stream` reply on that message's callback: deltas show it
//! while it is written (the whole text so far, at most once a second), and the final `Outbound`
//! finishes it. What does not fit one message (20,480 bytes), and any message that answers no
//! callback (or whose callback WeCom no longer takes), goes out as Markdown through
//! `aibot_send_msg`. Each outbound message is acked once delivered, or with the reason it could
//! not be; a failed delivery is remembered, so the kernel's retry sends only what is missing.

use std::collections::HashMap;
use std::time::Duration;

use oxibot_plugin::chat::{Markup, Measure, Replies, SplitRules, serve_replies, split};
use oxibot_plugin::{ChannelHandle, Delta, Outbound};
use tokio::time::Instant;

use crate::chats::LatestCallbacks;
use crate::frames;
use crate::link::{Link, LinkError};

/// WeCom's stream and Markdown messages: at most 20,480 bytes of UTF-8.
pub const WECOM: SplitRules = SplitRules { limit: 20_480, measure: Measure::Bytes, markup: Markup::Markdown };
/// The least time between two updates of a streamed reply.
const UPDATE_INTERVAL: Duration = Duration::from_secs(1);
/// A streamed reply nobody finished within this time is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// How many partly delivered replies are remembered.
const PARTIAL_REMEMBERED: usize = 100;

/// A reply being streamed.
#[derive(Debug)]
struct Stream {
    /// The callback it answers.
    req_id: String,
    /// Its id in WeCom's stream messages.
    wecom_id: String,
    /// The Markdown received so far.
    text: String,
    /// Whether `text` changed since WeCom last got it.
    dirty: bool,
    /// The earliest time of the next update.
    next_update: Instant,
    /// When the last delta arrived.
    touched: Instant,
    /// An update failed: the final reply goes out on its own instead.
    broken: bool,
}

/// Delivers the kernel's messages to WeCom.
pub struct Deliverer {
    /// The current connection.
    link: Link,
    /// The latest callback of each chat.
    latest: LatestCallbacks,
    /// Streamed replies by the kernel's `stream_id`.
    streams: HashMap<u64, Stream>,
    /// Outbound id → parts already delivered, for replies whose delivery failed halfway.
    sent: HashMap<u64, usize>,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(link: Link, latest: LatestCallbacks) -> Deliverer {
        Deliverer { link, latest, streams: HashMap::new(), sent: HashMap::new() }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Grows a streamed reply, showing it at once when the last update is long enough ago.
    async fn on_delta(&mut self, delta: Delta) {
        let now = Instant::now();
        self.streams.retain(|_, stream| now.duration_since(stream.touched) < FORGET_AFTER);
        if !self.streams.contains_key(&delta.stream_id) {
            // A reply to no message of this chat cannot be streamed; it goes out whole at the end.
            let Some(req_id) = self.latest.of(&delta.chat_id) else { return };
            let wecom_id = frames::request_id("stream");
            let stream = Stream {
                req_id,
                wecom_id,
                text: String::new(),
                dirty: false,
                next_update: now,
                touched: now,
                broken: false,
            };
            self.streams.insert(delta.stream_id, stream);
        }
        let Some(stream) = self.streams.get_mut(&delta.stream_id) else { return };
        stream.text.push_str(&delta.text);
        stream.touched = now;
        stream.dirty = true;
        if !stream.broken && !stream.text.trim().is_empty() && now >= stream.next_update {
            self.update(delta.stream_id).await;
        }
    }

    /// When the next pending update of a streamed reply is due.
    fn next_due(&self) -> Option<Instant> {
        self.streams.values().filter(|stream| stream.dirty && !stream.broken).map(|stream| stream.next_update).min()
    }

    /// Shows the latest text of every streamed reply whose update is due.
    async fn update_due(&mut self) {
        let now = Instant::now();
        let due: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, stream)| stream.dirty && !stream.broken && stream.next_update <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.update(id).await;
        }
    }

    /// Sends the text so far of streamed reply `id` (what fits one message), unfinished.
    async fn update(&mut self, id: u64) {
        let Some(stream) = self.streams.get(&id) else { return };
        let shown = split(&stream.text, WECOM).into_iter().next().unwrap_or_default();
        let frame = frames::respond_stream(&stream.req_id, &stream.wecom_id, &shown, false);
        let outcome = self.link.request(&stream.req_id, frame).await;
        let Some(stream) = self.streams.get_mut(&id) else { return };
        stream.dirty = false;
        stream.next_update = Instant::now() + UPDATE_INTERVAL;
        if let Err(error) = outcome {
            eprintln!("cannot update a streamed reply: {error}");
            stream.broken = true;
        }
    }

    /// Delivers every part of `outbound` not delivered yet: the first as the (finished) stream
    /// reply to its callback, the others, and all of a reply to no callback, as Markdown.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), LinkError> {
        let stream = outbound.stream_id.and_then(|id| self.streams.remove(&id)).filter(|stream| !stream.broken);
        let parts = split(&outbound.content, WECOM);
        if !outbound.media.is_empty() {
            eprintln!(
                "reply {}: {} attachment(s) not sent (files are not supported)",
                outbound.id,
                outbound.media.len()
            );
            if parts.is_empty() {
                let errmsg = "the wecom channel cannot send files".to_owned();
                return Err(LinkError::Refused { errcode: -1, errmsg });
            }
        }
        let callback = match &stream {
            Some(stream) => Some((stream.req_id.clone(), stream.wecom_id.clone())),
            None => {
                outbound.metadata["req_id"].as_str().map(|req_id| (req_id.to_owned(), frames::request_id("stream")))
            }
        };
        let already = self.sent.remove(&outbound.id).unwrap_or(0);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&callback, index) {
                (Some((req_id, wecom_id)), 0) => self.answer(&outbound.chat_id, req_id, wecom_id, part).await,
                _ => self.push(&outbound.chat_id, part).await,
            };
            if let Err(error) = delivered {
                self.remember_partial(outbound.id, index);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Finishes the stream reply to callback `req_id` with `part`; when WeCom refuses it (the
    /// callback is too old, or from a connection gone), sends `part` to the chat instead.
    async fn answer(&self, chat_id: &str, req_id: &str, wecom_id: &str, part: &str) -> Result<(), LinkError> {
        match self.link.request(req_id, frames::respond_stream(req_id, wecom_id, part, true)).await {
            Err(LinkError::Refused { errcode, errmsg }) => {
                eprintln!(
                    "wecom refused the reply to callback {req_id} (errcode {errcode}, {errmsg}); sending it to the chat"
                );
                self.push(chat_id, part).await
            }
            outcome => outcome,
        }
    }

    /// Sends `part` to chat `chat_id` unasked.
    async fn push(&self, chat_id: &str, part: &str) -> Result<(), LinkError> {
        let req_id = frames::request_id("aibot_send_msg");
        self.link.request(&req_id, frames::send_markdown(&req_id, chat_id, part)).await
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
    type Error = LinkError;

    fn next_due(&self) -> Option<Instant> {
        Deliverer::next_due(self)
    }

    async fn on_delta(&mut self, delta: Delta) {
        Deliverer::on_delta(self, delta).await;
    }

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), LinkError> {
        Deliverer::deliver(self, outbound).await
    }

    async fn flush_due(&mut self) {
        Deliverer::update_due(self).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_limit_counts_bytes_of_markdown() {
        let text = "字".repeat(10_000);
        let parts = split(&text, WECOM);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|part| part.len() <= 20_480));
    }
}
