//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! A reply to a user's message is a `stream` reply on that message's callback: deltas show it
//! while it is written (the whole text so far, at most once a second), and the final `Outbound`
//! finishes it. What does not fit one message (20,480 bytes), and any message that answers no
//! callback (or whose callback WeCom no longer takes), goes out as Markdown through
//! `aibot_send_msg`. Each outbound message is acked once delivered, or with the reason it could
//! not be; a failed delivery is remembered, so the kernel's retry sends only what is missing.

use std::time::Duration;

use oxibot_plugin::chat::{
    EditedReplies, Markup, Measure, PartsSent, SplitRules, Streams, leave_files_out, serve_replies, split,
};
use oxibot_plugin::warn;
use oxibot_plugin::{ChannelHandle, Delta, Outbound};

use crate::chats::LatestCallbacks;
use crate::frames;
use crate::link::{Link, LinkError};

/// WeCom's stream and Markdown messages: at most 20,480 bytes of UTF-8.
pub const WECOM: SplitRules = SplitRules { limit: 20_480, measure: Measure::Bytes, markup: Markup::Markdown };
/// The least time between two updates of a streamed reply.
const UPDATE_INTERVAL: Duration = Duration::from_secs(1);

/// How a streamed reply is named: the callback it answers (`req_id`) and its id in WeCom's
/// stream messages.
type StreamIds = (String, String);

/// Delivers the kernel's messages to WeCom.
pub struct Deliverer {
    /// The current connection.
    link: Link,
    /// The latest callback of each chat.
    latest: LatestCallbacks,
    /// Streamed replies, each bound to a callback from its start.
    streams: Streams<StreamIds>,
    /// The parts already delivered of replies not delivered whole yet (kept on disk).
    sent: PartsSent,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(link: Link, latest: LatestCallbacks, sent: PartsSent) -> Deliverer {
        Deliverer { link, latest, streams: Streams::new(UPDATE_INTERVAL), sent }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Delivers every part of `outbound` not delivered yet: the first as the (finished) stream
    /// reply to its callback, the others, and all of a reply to no callback, as Markdown.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), LinkError> {
        let stream = self.streams.finish(outbound.stream_id).filter(|stream| !stream.is_broken());
        let parts = split(&outbound.content, WECOM);
        leave_files_out(outbound, !parts.is_empty(), "wecom")
            .map_err(|errmsg| LinkError::Refused { errcode: -1, errmsg })?;
        let callback = stream.and_then(|stream| stream.message).or_else(|| {
            outbound.metadata["req_id"].as_str().map(|req_id| (req_id.to_owned(), frames::request_id("stream")))
        });
        let already = self.sent.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&callback, index) {
                (Some((req_id, wecom_id)), 0) => self.answer(&outbound.chat_id, req_id, wecom_id, part).await,
                _ => self.push(&outbound.chat_id, part).await,
            };
            delivered?;
            self.sent.posted(outbound.id, index + 1, parts.len());
        }
        Ok(())
    }

    /// Finishes the stream reply to callback `req_id` with `part`; when WeCom refuses it (the
    /// callback is too old, or from a connection gone), sends `part` to the chat instead.
    async fn answer(&self, chat_id: &str, req_id: &str, wecom_id: &str, part: &str) -> Result<(), LinkError> {
        match self.link.request(req_id, frames::respond_stream(req_id, wecom_id, part, true)).await {
            Err(LinkError::Refused { errcode, errmsg }) => {
                warn!(
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
}

impl EditedReplies for Deliverer {
    type Message = StreamIds;
    type Error = LinkError;

    fn streams(&mut self) -> &mut Streams<StreamIds> {
        &mut self.streams
    }

    fn accepts(&mut self, delta: &Delta) -> bool {
        if !self.streams.contains(delta.stream_id) {
            // A reply to no message of this chat cannot be streamed; it goes out whole at the end.
            let Some(req_id) = self.latest.of(&delta.chat_id) else { return false };
            self.streams.open(delta.stream_id, &delta.chat_id, Some((req_id, frames::request_id("stream"))));
        }
        true
    }

    /// What fits one message.
    fn visible(&self, text: &str) -> String {
        split(text, WECOM).into_iter().next().unwrap_or_default()
    }

    /// Never asked: a streamed reply is bound to its callback from its start.
    async fn send(&mut self, _chat_id: &str, _text: &str) -> Result<StreamIds, LinkError> {
        let errmsg = "a streamed reply answers a callback".to_owned();
        Err(LinkError::Refused { errcode: -1, errmsg })
    }

    /// Sends the text so far, unfinished, on the reply's callback.
    async fn edit(&mut self, (req_id, wecom_id): &StreamIds, text: &str) -> Result<(), LinkError> {
        self.link.request(req_id, frames::respond_stream(req_id, wecom_id, text, false)).await
    }

    async fn deliver_whole(&mut self, outbound: &Outbound) -> Result<(), LinkError> {
        Deliverer::deliver(self, outbound).await
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
