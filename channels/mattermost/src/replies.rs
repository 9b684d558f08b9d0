//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! Replies are posted as Markdown (Mattermost renders it), in the thread the chat id names,
//! cut at 16,383 characters. A `Delta` grows a streamed reply: the first one with words creates
//! a post at once, later ones patch it at most once a second (a timer shows the latest text
//! when deltas pause). The final `Outbound` with the same `stream_id` patches the post to the
//! final text; its further parts are new posts. Each outbound message is acked once delivered,
//! or with the reason it could not be; a failed delivery is remembered, so the kernel's retry
//! sends only what is missing.

use std::time::Duration;

use oxibot_plugin::chat::{
    EditedReplies, Markup, Measure, PartsSent, SplitRules, Streams, leave_files_out, serve_replies, split,
};
use oxibot_plugin::{ChannelHandle, Outbound};

use crate::api::{RestApi, RestError};

/// Mattermost's limit for a post's message.
pub const RULES: SplitRules = SplitRules { limit: 16_383, measure: Measure::Chars, markup: Markup::Markdown };
/// The least time between two patches of a streamed post.
const EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// Where a reply goes: the channel, and the thread (root post) when the chat id names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The channel id.
    pub channel: String,
    /// The root post of the thread, if any.
    pub root: Option<String>,
}

impl Destination {
    /// Reads a chat id, `<channel>` or `<channel>:<root>`.
    pub fn of(chat_id: &str) -> Destination {
        match chat_id.split_once(':') {
            Some((channel, root)) if !root.is_empty() => {
                Destination { channel: channel.to_owned(), root: Some(root.to_owned()) }
            }
            _ => Destination { channel: chat_id.trim_end_matches(':').to_owned(), root: None },
        }
    }
}

/// Delivers the kernel's messages to Mattermost.
pub struct Deliverer {
    /// The REST API.
    api: RestApi,
    /// Streamed replies, each shown in a post (named by its id).
    streams: Streams<String>,
    /// The parts already delivered of replies not delivered whole yet (kept on disk).
    sent: PartsSent,
}

impl Deliverer {
    /// A deliverer with nothing in flight; `streaming` (the setting) says whether deltas are
    /// shown at all.
    pub fn new(api: RestApi, streaming: bool, sent: PartsSent) -> Deliverer {
        Deliverer { api, streams: Streams::new(EDIT_INTERVAL).enabled(streaming), sent }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Delivers every part of `outbound` not delivered yet: the first into its streamed post
    /// when it has one, the others as new posts.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), RestError> {
        let parts = split(&outbound.content, RULES);
        let files = leave_files_out(outbound, !parts.is_empty(), "mattermost");
        if parts.is_empty() {
            self.streams.finish(outbound.stream_id);
            return files.map_err(|reason| RestError::malformed("create post", reason));
        }
        let streamed_post = self.streams.message_of(outbound.stream_id);
        let destination = Destination::of(&outbound.chat_id);
        let already = self.sent.already(outbound.id);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&streamed_post, index) {
                (Some(post_id), 0) => self.api.patch_post(post_id, part).await,
                _ => self.api.create_post(&destination.channel, destination.root.as_deref(), part).await.map(drop),
            };
            delivered?;
            self.sent.posted(outbound.id, index + 1, parts.len());
        }
        self.streams.finish(outbound.stream_id);
        Ok(())
    }
}

impl EditedReplies for Deliverer {
    type Message = String;
    type Error = RestError;

    fn streams(&mut self) -> &mut Streams<String> {
        &mut self.streams
    }

    /// The part of the text that fits one post.
    fn visible(&self, text: &str) -> String {
        first_part(text)
    }

    /// A new post in the channel (and thread) the chat id names.
    async fn send(&mut self, chat_id: &str, text: &str) -> Result<String, RestError> {
        let destination = Destination::of(chat_id);
        self.api.create_post(&destination.channel, destination.root.as_deref(), text).await
    }

    async fn edit(&mut self, post_id: &String, text: &str) -> Result<(), RestError> {
        self.api.patch_post(post_id, text).await
    }

    async fn deliver_whole(&mut self, outbound: &Outbound) -> Result<(), RestError> {
        Deliverer::deliver(self, outbound).await
    }
}

/// What a streamed post shows: the part of the text that fits one post.
fn first_part(text: &str) -> String {
    split(text, RULES).into_iter().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_id_names_the_channel_and_maybe_the_thread() {
        assert_eq!(Destination::of("chan"), Destination { channel: "chan".into(), root: None });
        assert_eq!(Destination::of("chan:root"), Destination { channel: "chan".into(), root: Some("root".into()) });
    }

    #[test]
    fn a_streamed_post_shows_at_most_one_posts_worth() {
        let text = "word ".repeat(5000);
        assert!(first_part(&text).chars().count() <= 16_383);
        assert_eq!(first_part("short"), "short");
    }
}
