//! Replies streamed by editing one message: the text each has so far, the message showing it,
//! and when it may be edited next. The channel makes the edits; [`Streams`] says which are due.
//!
//! A `Delta` grows its reply ([`Streams::grow`]); the channel shows the text at once when
//! [`Streams::grow`] says so (the first words, or an edit after a pause) and otherwise when
//! [`Streams::due`] lists it, at most once an interval, and reports each attempt with
//! [`Streams::shown`]. An attempt that fails marks the reply broken: no more edits, and the
//! final reply goes out on its own. The final `Outbound` ends it ([`Streams::finish`]).

use std::collections::HashMap;
use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

use crate::Delta;

/// A streamed reply nobody finished within this time is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// One reply being streamed; `M` is how the service names the message showing it.
#[derive(Debug)]
pub struct Stream<M> {
    /// The chat it goes to.
    pub chat_id: String,
    /// The Markdown received so far.
    pub text: String,
    /// The message showing it, once there is one.
    pub message: Option<M>,
    /// Whether `text` changed since the message last showed it.
    dirty: bool,
    /// The earliest time of the next edit.
    next_edit: Instant,
    /// When the last delta arrived.
    touched: Instant,
    /// Showing it failed: the final reply goes out on its own instead.
    broken: bool,
}

impl<M> Stream<M> {
    /// Whether showing it failed, so it is edited no more.
    pub fn is_broken(&self) -> bool {
        self.broken
    }
}

/// An edit the channel is to make: show `text` (all the reply has so far) in `message`, or in
/// a new message when there is none yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit<M> {
    /// The kernel's `stream_id` of the reply.
    pub stream_id: u64,
    /// The chat it goes to.
    pub chat_id: String,
    /// The message to edit; `None`: send one.
    pub message: Option<M>,
    /// The whole text so far.
    pub text: String,
}

/// The replies being streamed, by `stream_id`.
#[derive(Debug)]
pub struct Streams<M> {
    streams: HashMap<u64, Stream<M>>,
    /// The least time between two edits of one reply.
    interval: Duration,
    /// Whether deltas are shown at all (a channel's `streaming` setting).
    enabled: bool,
}

impl<M: Clone> Streams<M> {
    /// No replies yet; a reply is edited at most once per `interval`.
    pub fn new(interval: Duration) -> Streams<M> {
        Streams { streams: HashMap::new(), interval, enabled: true }
    }

    /// Streams only when `on`; off, every delta is left out and each reply goes out whole.
    pub fn enabled(mut self, on: bool) -> Streams<M> {
        self.enabled = on;
        self
    }

    /// Whether reply `stream_id` is being streamed (and not about to be forgotten).
    pub fn contains(&self, stream_id: u64) -> bool {
        let now = Instant::now();
        self.streams.get(&stream_id).is_some_and(|stream| now.duration_since(stream.touched) < FORGET_AFTER)
    }

    /// The reply `stream_id`, if it is being streamed.
    pub fn get(&self, stream_id: u64) -> Option<&Stream<M>> {
        self.streams.get(&stream_id)
    }

    /// Starts reply `stream_id` to `chat_id`, shown in `message` when the service names it
    /// before the first words (a reply bound to the message it answers).
    pub fn open(&mut self, stream_id: u64, chat_id: &str, message: Option<M>) {
        let now = Instant::now();
        self.forget_stale(now);
        self.streams.entry(stream_id).or_insert_with(|| Stream {
            chat_id: chat_id.to_owned(),
            text: String::new(),
            message,
            dirty: false,
            next_edit: now,
            touched: now,
            broken: false,
        });
    }

    /// Appends `delta` to its reply (started if new); returns the edit to make now when the
    /// reply has words, is not broken, and its interval has passed.
    pub fn grow(&mut self, delta: &Delta) -> Option<Edit<M>> {
        if !self.enabled {
            return None;
        }
        self.open(delta.stream_id, &delta.chat_id, None);
        let now = Instant::now();
        let stream = self.streams.get_mut(&delta.stream_id)?;
        stream.text.push_str(&delta.text);
        stream.touched = now;
        stream.dirty = true;
        if stream.broken || stream.text.trim().is_empty() || now < stream.next_edit {
            return None;
        }
        Some(edit(delta.stream_id, stream))
    }

    /// Notes how showing reply `stream_id` went: on success the message now showing it (when
    /// one was sent) and the time of the next edit; on failure the reply is broken (logged).
    pub fn shown<E: Display>(&mut self, stream_id: u64, outcome: Result<Option<M>, E>) {
        let Some(stream) = self.streams.get_mut(&stream_id) else { return };
        stream.dirty = false;
        stream.next_edit = Instant::now() + self.interval;
        match outcome {
            Ok(sent) => stream.message = stream.message.take().or(sent),
            Err(error) => {
                crate::warn!("cannot show the streamed reply in {}: {error}", stream.chat_id);
                stream.broken = true;
            }
        }
    }

    /// When the next edit of a reply shown in a message is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.streams.values().filter(|stream| is_pending(stream)).map(|stream| stream.next_edit).min()
    }

    /// The edits due now: replies shown in a message whose text changed since.
    pub fn due(&self) -> Vec<Edit<M>> {
        let now = Instant::now();
        self.streams
            .iter()
            .filter(|(_, stream)| is_pending(stream) && stream.next_edit <= now)
            .map(|(id, stream)| edit(*id, stream))
            .collect()
    }

    /// Ends reply `stream_id` (its final `Outbound` came); the reply, if it was streamed.
    pub fn finish(&mut self, stream_id: Option<u64>) -> Option<Stream<M>> {
        self.streams.remove(&stream_id?)
    }

    /// The message showing reply `stream_id`, when it is streamed and not broken.
    pub fn message_of(&self, stream_id: Option<u64>) -> Option<M> {
        let stream = self.streams.get(&stream_id?)?;
        if stream.broken { None } else { stream.message.clone() }
    }

    fn forget_stale(&mut self, now: Instant) {
        self.streams.retain(|_, stream| now.duration_since(stream.touched) < FORGET_AFTER);
    }
}

/// Whether `stream` waits for an edit: shown in a message, changed since, not broken.
fn is_pending<M>(stream: &Stream<M>) -> bool {
    stream.dirty && stream.message.is_some() && !stream.broken
}

fn edit<M: Clone>(stream_id: u64, stream: &Stream<M>) -> Edit<M> {
    Edit { stream_id, chat_id: stream.chat_id.clone(), message: stream.message.clone(), text: stream.text.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn delta(text: &str) -> Delta {
        Delta { stream_id: 7, chat_id: "c".into(), text: text.into() }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_words_are_shown_at_once_and_later_ones_once_a_second() {
        let mut streams: Streams<String> = Streams::new(SECOND);
        assert_eq!(streams.grow(&delta(" ")), None, "nothing to show without words");
        let first = streams.grow(&delta("hi")).unwrap();
        assert_eq!((first.message, first.text.as_str()), (None, " hi"));
        streams.shown::<String>(7, Ok(Some("m1".into())));
        assert_eq!(streams.grow(&delta(" there")), None, "too soon after the last edit");
        assert!(streams.due().is_empty());
        tokio::time::advance(SECOND).await;
        let due = streams.due();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].message.as_deref(), due[0].text.as_str()), (Some("m1"), " hi there"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_that_failed_to_show_is_edited_no_more() {
        let mut streams: Streams<String> = Streams::new(SECOND);
        streams.grow(&delta("hi"));
        streams.shown(7, Err("refused"));
        tokio::time::advance(SECOND).await;
        assert_eq!(streams.grow(&delta(" more")), None);
        assert_eq!(streams.next_due(), None);
        assert_eq!(streams.message_of(Some(7)), None);
        assert!(streams.finish(Some(7)).unwrap().is_broken());
    }
}
