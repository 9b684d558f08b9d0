//! `oxibot-channel-dingtalk`: the DingTalk (钉钉) channel plugin. Users' messages to the app's
//! robot come in over Stream Mode (a WebSocket DingTalk opens for a ticket the app registers
//! with its client id and secret, no public URL needed); replies go out through the robot send
//! API as Markdown messages, with an access token fetched with the same credentials.
//!
//! Config (`channels.dingtalk`, camelCase or snake_case keys):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `clientId` | required | the app's client id (AppKey) |
//! | `clientSecret` | required | the app's client secret (AppSecret) |
//! | `robotCode` | `clientId` | the robot that sends replies |
//! | `groupUserIsolation` | `false` | in a group, one session per member: chat id `group:<conversation>:<member>` |
//! | `disablePrivateChat` | `false` | answer one-to-one messages only with a notice to write in a group |
//! | `apiBase` | `https://api.dingtalk.com` | where the open API lives (tokens, sending, downloads) |
//! | `gatewayBase` | `apiBase` | where `/v1.0/gateway/connections/open` lives |
//! | `mediaDir` | `$OXIBOT_HOME/media/dingtalk` | where pictures, files and videos users send are saved |
//!
//! Who may talk to the robot (`allowFrom`, pairing) is the kernel's business, not this plugin's;
//! nanobot's `allowRemoteMediaRedirects` and `remoteMediaRedirectAllowedHosts` are accepted
//! and unused (this channel sends no files).
//!
//! An inbound's id is DingTalk's `msgId`; its sender is the sender's staff id; its chat is that
//! id for a one-to-one chat, `group:<conversationId>` for a group (as nanobot names them, so a
//! reply without metadata still finds its group). Its metadata holds `is_group`, `username`
//! and `sender_name` (the nick), `conversation_id`, `conversation_type`, `msg_id` and, for
//! groups, `conversation_title`. A callback is acknowledged to DingTalk only once the kernel
//! has persisted its message, so a message lost to a crash is delivered again by DingTalk; a
//! callback delivered again is answered once.

mod api;
mod config;
mod error;
mod frames;
mod incoming;
mod media;
mod replies;
mod stream;
mod submit;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{AckLine, Handover, PartsSent, REMEMBERED, RecentMessages, serve_replies};
use oxibot_plugin::info;
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use tokio::sync::mpsc;

use crate::api::OpenApi;
use crate::config::Config;
use crate::error::DingTalkError;
use crate::replies::Replies;
use crate::stream::Listener;
use crate::submit::Submitter;

/// Serves the dingtalk channel to the kernel that started this process; the entry `oxibot __channel dingtalk` runs.
pub fn run() -> ExitCode {
    // reqwest and the WebSocket's TLS both need a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("dingtalk").run(serve)
}

/// Runs the channel: listens on Stream Mode and delivers replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), DingTalkError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let api = OpenApi::new(&config).map_err(DingTalkError::Setup)?;
    info!("connecting to dingtalk as app {} (media in {})", config.client_id, config.media_dir.display());
    let recent = RecentMessages::new(REMEMBERED);
    let acks = AckLine::new(frames::ack);
    let (submissions, queue) = mpsc::unbounded_channel();
    let submitter = Submitter {
        handover: Handover::new(channel.clone(), recent.clone(), acks.clone(), "dingtalk"),
        api: api.clone(),
        media_dir: config.media_dir.clone(),
    };
    tokio::spawn(submitter.run(queue));
    let sent = PartsSent::kept_in(&config.media_dir);
    let listener = Listener { api: api.clone(), config, recent, acks, submissions };
    let mut replies = Replies { api, sent };
    tokio::select! {
        refused = listener.run() => refused,
        () = serve_replies(&channel, &mut replies) => Ok(()),
    }
}
