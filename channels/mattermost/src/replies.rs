//! The kernel's side: outbound messages and deltas, one at a time in arrival order.
//!
//! Replies are posted as Markdown (Mattermost renders it), in the thread the chat id names,
//! cut at 16,383 characters. A `Delta` grows a streamed reply: the first one with words creates
//! a post at once, later ones patch it at most once a second (a timer shows the latest text
//! when deltas pause). The final `Outbound` with the same `stream_id` patches the post to the
//! final text; its further parts are new posts. Each outbound message is acked once delivered,
//! or with the reason it could not be; a failed delivery is remembered, so the kernel's retry
//! sends only what is missing.

use std::collections::HashMap;
use std::time::Duration;

use oxibot_plugin::chat::{Markup, Measure, Replies, SplitRules, serve_replies, split};
use oxibot_plugin::{ChannelHandle, Delta, Outbound};
use tokio::time::Instant;

use crate::api::{RestApi, RestError};

/// Mattermost's limit for a post's message.
pub const RULES: SplitRules = SplitRules { limit: 16_383, measure: Measure::Chars, markup: Markup::Markdown };
/// The least time between two patches of a streamed post.
const EDIT_INTERVAL: Duration = Duration::from_secs(1);
/// A streamed reply nobody finished within this time is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// How many partly delivered replies are remembered.
const PARTIAL_REMEMBERED: usize = 100;

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

/// A reply being streamed.
#[derive(Debug)]
struct Stream {
    /// The chat it goes to.
    chat_id: String,
    /// The Markdown received so far.
    text: String,
    /// The post showing it, once created.
    post_id: Option<String>,
    /// Whether `text` changed since the post last showed it.
    dirty: bool,
    /// The earliest time of the next patch.
    next_edit: Instant,
    /// When the last delta arrived.
    touched: Instant,
    /// Creating or patching the post failed: the final reply goes out whole instead.
    broken: bool,
}

/// Delivers the kernel's messages to Mattermost.
pub struct Deliverer {
    /// The REST API.
    api: RestApi,
    /// `streaming`: whether deltas are shown at all.
    streaming: bool,
    /// Streamed replies by `stream_id`.
    streams: HashMap<u64, Stream>,
    /// Outbound id → parts already delivered, for replies whose delivery failed halfway.
    sent: HashMap<u64, usize>,
}

impl Deliverer {
    /// A deliverer with nothing in flight.
    pub fn new(api: RestApi, streaming: bool) -> Deliverer {
        Deliverer { api, streaming, streams: HashMap::new(), sent: HashMap::new() }
    }

    /// Handles the kernel's events until it hangs up.
    pub async fn run(mut self, channel: &ChannelHandle) {
        serve_replies(channel, &mut self).await;
    }

    /// Grows a streamed reply: creates its post with the first words, patches it later.
    async fn on_delta(&mut self, delta: Delta) {
        if !self.streaming {
            return;
        }
        let now = Instant::now();
        self.streams.retain(|_, stream| now.duration_since(stream.touched) < FORGET_AFTER);
        let stream = self.streams.entry(delta.stream_id).or_insert_with(|| Stream {
            chat_id: delta.chat_id.clone(),
            text: String::new(),
            post_id: None,
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
        let (destination, shown) = (Destination::of(&stream.chat_id), first_part(&stream.text));
        let outcome = match stream.post_id.clone() {
            None => self.api.create_post(&destination.channel, destination.root.as_deref(), &shown).await.map(Some),
            Some(post_id) => self.api.patch_post(&post_id, &shown).await.map(|()| None),
        };
        let Some(stream) = self.streams.get_mut(&delta.stream_id) else { return };
        match outcome {
            Ok(created) => {
                stream.post_id = stream.post_id.take().or(created);
                stream.dirty = false;
                stream.next_edit = Instant::now() + EDIT_INTERVAL;
            }
            Err(error) => {
                eprintln!("cannot show the streamed reply in {}: {error}", stream.chat_id);
                stream.broken = true;
            }
        }
    }

    /// When the next pending patch of a streamed post is due.
    fn next_due(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter(|stream| stream.dirty && stream.post_id.is_some() && !stream.broken)
            .map(|stream| stream.next_edit)
            .min()
    }

    /// Shows the latest text of every streamed post whose patch is due.
    async fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(u64, String, String)> = self
            .streams
            .iter()
            .filter(|(_, stream)| stream.dirty && !stream.broken && stream.next_edit <= now)
            .filter_map(|(id, stream)| Some((*id, stream.post_id.clone()?, first_part(&stream.text))))
            .collect();
        for (id, post_id, shown) in due {
            let outcome = self.api.patch_post(&post_id, &shown).await;
            let Some(stream) = self.streams.get_mut(&id) else { continue };
            stream.dirty = false;
            stream.next_edit = Instant::now() + EDIT_INTERVAL;
            if let Err(error) = outcome {
                eprintln!("cannot update the streamed reply in {}: {error}", stream.chat_id);
                stream.broken = true;
            }
        }
    }

    /// Delivers every part of `outbound` not delivered yet: the first into its streamed post
    /// when it has one, the others as new posts.
    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), RestError> {
        let parts = split(&outbound.content, RULES);
        if !outbound.media.is_empty() {
            eprintln!(
                "reply {}: {} attachment(s) not sent (files are not supported)",
                outbound.id,
                outbound.media.len()
            );
        }
        if parts.is_empty() {
            self.streams.retain(|id, _| Some(*id) != outbound.stream_id);
            if outbound.media.is_empty() {
                return Ok(());
            }
            let reason = "the mattermost channel cannot send files".to_owned();
            return Err(RestError::Malformed { what: "create post", reason });
        }
        let streamed_post = outbound
            .stream_id
            .and_then(|id| self.streams.get(&id))
            .filter(|stream| !stream.broken)
            .and_then(|stream| stream.post_id.clone());
        let destination = Destination::of(&outbound.chat_id);
        let already = self.sent.remove(&outbound.id).unwrap_or(0);
        for (index, part) in parts.iter().enumerate().skip(already) {
            let delivered = match (&streamed_post, index) {
                (Some(post_id), 0) => self.api.patch_post(post_id, part).await,
                _ => self.api.create_post(&destination.channel, destination.root.as_deref(), part).await.map(drop),
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
    type Error = RestError;

    fn next_due(&self) -> Option<Instant> {
        Deliverer::next_due(self)
    }

    async fn on_delta(&mut self, delta: Delta) {
        Deliverer::on_delta(self, delta).await;
    }

    async fn deliver(&mut self, outbound: &Outbound) -> Result<(), RestError> {
        Deliverer::deliver(self, outbound).await
    }

    async fn flush_due(&mut self) {
        Deliverer::flush_due(self).await;
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
