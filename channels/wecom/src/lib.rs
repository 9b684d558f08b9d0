//! `oxibot-channel-wecom`: the WeCom (企业微信) AI bot channel plugin. The bot holds WeCom's
//! long connection (a WebSocket it subscribes to with its bot id and secret, no public URL
//! needed): users' messages come in over it as callbacks, and replies go out over it as stream
//! replies to those callbacks, shown while they are written.
//!
//! Config (`channels.wecom`, camelCase or snake_case keys):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `botId` | required | the AI bot's id |
//! | `secret` | required | the AI bot's long-connection secret |
//! | `welcomeMessage` | `""` | sent to a user who opens a chat with the bot; empty for none |
//! | `wsUrl` | `wss://openws.work.weixin.qq.com` | where the long connection lives |
//!
//! Who may talk to the bot (`allowFrom`, pairing) is the kernel's business, not this plugin's.
//! In groups WeCom hands the bot only messages that mention it; the mention is taken out of the
//! text.
//!
//! An inbound's id is WeCom's `msgid` (a message delivered twice is answered once); its sender
//! is the sender's user id; its chat is that id for a one-to-one chat and the group's `chatid`
//! for a group (as nanobot names them). Its metadata holds `is_group`, `message_id`,
//! `msg_type`, `chat_type` and `req_id` (the callback the reply answers). WeCom has no
//! acknowledgement of a callback and does not deliver one again: a message the channel loses
//! before the kernel accepted it stays unanswered. Pictures and files reach the kernel as
//! placeholders (`[image]`, `[file: name]`), a voice message as WeCom's transcription; no files
//! are sent.

mod chats;
mod config;
mod connection;
mod error;
mod frames;
mod incoming;
mod link;
mod replies;
mod submit;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{PartsSent, REMEMBERED, RecentMessages, media_dir};
use oxibot_plugin::info;
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use tokio::sync::mpsc;

use crate::chats::LatestCallbacks;
use crate::config::Config;
use crate::connection::Listener;
use crate::error::WeComError;
use crate::link::Link;
use crate::replies::Deliverer;
use crate::submit::Submitter;

/// Serves the wecom channel to the kernel that started this process; the entry `oxibot __channel wecom` runs.
pub fn run() -> ExitCode {
    // The WebSocket's TLS needs a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("wecom").streaming().run(serve)
}

/// Runs the channel: holds the long connection and delivers replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), WeComError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    info!("connecting to {} as bot {}", config.ws_url, config.bot_id);
    let recent = RecentMessages::new(REMEMBERED);
    let (link, latest) = (Link::default(), LatestCallbacks::default());
    let (submissions, queue) = mpsc::unbounded_channel();
    tokio::spawn(Submitter { channel: channel.clone(), recent: recent.clone() }.run(queue));
    let deliverer = Deliverer::new(link.clone(), latest.clone(), PartsSent::kept_in(&media_dir("wecom")));
    let listener = Listener { config, link, recent, latest, submissions };
    tokio::select! {
        refused = listener.run() => refused,
        () = deliverer.run(&channel) => Ok(()),
    }
}
