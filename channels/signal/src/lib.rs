//! `oxibot-channel-signal`: the Signal channel plugin, through a signal-cli daemon's HTTP
//! interface (`signal-cli -a <account> daemon --http <host>:<port>`), as nanobot uses it.
//! Messages come in as server-sent events (`GET /api/v1/events`); replies go out with the
//! JSON-RPC method `send` (`POST /api/v1/rpc`), as plain text with Signal's text styles made
//! from the reply's Markdown.
//!
//! Config (`channels.signal`, camelCase or snake_case keys, as nanobot's):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `phoneNumber` | required | the bot's account, `+15550001111` (the daemon's `-a`) |
//! | `daemonHost`, `daemonPort` | `localhost`, `8080` | where the daemon's HTTP interface listens |
//! | `dm.enabled` | `true` | take direct messages |
//! | `dm.policy`, `dm.allowFrom` | `"allowlist"`, `[]` | `"open"`, or only these numbers/UUIDs; their messages are marked authenticated (others are left to the kernel's `allowFrom` or pairing) |
//! | `group.enabled` | `false` | take group messages |
//! | `group.policy`, `group.allowFrom` | `"allowlist"`, `[]` | `"open"`, or only these group ids |
//! | `group.requireMention` | `true` | in groups, answer only messages mentioning the bot (and `/commands`) |
//! | `groupMessageBufferSize` | `20` | earlier group messages kept to show with the next answered one |
//!
//! An inbound's id is `<sender>:<timestamp>` (a message delivered twice is submitted once); the
//! chat id is the sender's number, or the group id. Attachments are named, not copied.

mod api;
mod config;
mod error;
mod incoming;
mod receive;
mod replies;
mod sse;
mod styles;
mod submit;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{REMEMBERED, RecentMessages};
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use tokio::sync::mpsc;

use crate::api::Daemon;
use crate::config::Config;
use crate::error::SignalError;
use crate::incoming::GroupContext;
use crate::receive::Receiver;
use crate::replies::Replies;

/// Serves the signal channel to the kernel that started this process; the entry `oxibot __channel signal` runs.
pub fn run() -> ExitCode {
    // reqwest's TLS (a daemon behind https) needs a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("signal").run(serve)
}

/// Runs the channel: receives from the daemon and delivers replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), SignalError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let daemon = Daemon::new(&config.daemon_url).map_err(SignalError::Setup)?;
    let recent = RecentMessages::new(REMEMBERED);
    let (submissions, queue) = mpsc::unbounded_channel();
    tokio::spawn(submit::run(channel.clone(), recent.clone(), queue));
    let receiver = Receiver { daemon: daemon.clone(), config, recent, groups: GroupContext::default(), submissions };
    let replies = Replies { daemon };
    tokio::select! {
        () = receiver.run() => Ok(()),
        () = replies.serve(&channel) => Ok(()),
    }
}
