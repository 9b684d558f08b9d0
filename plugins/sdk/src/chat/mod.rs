//! The chat kit: what every channel plugin bridging a chat service needs besides the
//! protocol, written once.
//!
//! - [`split`](mod@split): a long reply cut into messages the service takes whole, code blocks
//!   and tags kept balanced, with each service's limit and way of counting ([`SplitRules`]);
//! - [`approval`]: the buttons of an approval request ([`approval::choices`]), the request
//!   as a reply to show ([`approval::as_outbound`]), and [`is_approval_answer`] for what a
//!   pressed button submits;
//! - [`Backoff`]: growing waits between attempts to reach the service;
//! - [`Typing`] and [`TypingLoop`]: the "typing…" indicator renewed while a reply is written;
//! - [`escape`](escape::escape): `&`, `<`, `>` as entities, for HTML and Slack's mrkdwn;
//! - [`markdown`]: pieces of Markdown every converter reads the same way (rules, code spans);
//! - [`load_section`] and [`ChannelConfig`]: the channel's config section read into its
//!   settings, with errors that name the key;
//! - [`TokenCache`]: a service's access token, reused until shortly before it expires, and a
//!   call made once more with a new one when the service refuses it;
//! - [`http`]: a call made again when the service says to slow down (429);
//! - [`RecentMessages`]: messages seen lately, so one delivered again reaches the kernel once
//!   and each of its deliveries is acknowledged after the kernel accepted it;
//! - [`expand_tilde`] and [`media_dir`]: paths from the config, and where downloads go;
//! - [`save_limited`]: a download written into a file with a size limit, nothing left behind
//!   when it fails;
//! - [`write_atomically`]: a small file kept between runs (a sync position, a session),
//!   replaced whole;
//! - [`serve_replies`]: the kernel's deltas and replies handed to a [`Replies`] deliverer,
//!   each reply acknowledged with its outcome, and a timer for streamed replies' next edit;
//! - [`Streams`] and [`EditedReplies`]: replies streamed by editing one message, which edits
//!   are due, and the deltas and timer handled for the channel;
//! - `socket` (with the `websocket` feature): a service's WebSocket opened, driven with
//!   pings and silence counted as a drop, and the reconnect loop around it;
//! - [`submit_in_order`], [`hand_over`] and [`fetch_each`]: users' messages handed to the
//!   kernel in order, their files fetched first, their deliveries acknowledged once accepted;
//! - [`PartsSent`] and [`leave_files_out`]: a reply sent in parts resumed where a failed
//!   delivery stopped, also after a plugin restart (a small file in the channel's state
//!   directory), and the files of a channel that sends none.
//!
//! The channels that serve clients themselves (a WebSocket or HTTP server) find their
//! listening and accepting in [`crate::serving`].

mod acks;
pub mod approval;
mod backoff;
mod config;
mod download;
pub mod escape;
pub mod http;
pub mod markdown;
mod parts;
mod paths;
mod recent;
mod replies;
#[cfg(feature = "websocket")]
pub mod socket;
pub mod split;
mod state;
mod streamed;
mod submit;
mod token;
mod typing;

pub use acks::AckLine;
pub use approval::{Choice, is_approval_answer};
pub use backoff::{Backoff, jitter};
pub use config::{
    ChannelConfig, DEFAULT_REACT_EMOJI, DmSection, GroupPolicy, SectionError, emoji_name, filled, load_section,
};
pub use download::{SaveError, save_limited};
pub use escape::{escape, push_escaped};
pub use parts::{PARTS_SENT_FILE, PartsSent, leave_files_out};
pub use paths::{data_dir, expand_tilde, home_dir, media_dir};
pub use recent::{REMEMBERED, RecentMessages, Seen};
pub use replies::{EditedReplies, Replies, serve_replies};
pub use split::{Markup, Measure, SplitRules, split, visible_text};
pub use state::write_atomically;
pub use streamed::{Edit, Stream, Streams};
pub use submit::{
    Acknowledge, Attachment, Fetched, Handed, Handover, UserMessage, Verdict, fetch_each, hand_over, media_file_name,
    submit_in_order,
};
pub use token::TokenCache;
pub use typing::{Typing, TypingLoop};
