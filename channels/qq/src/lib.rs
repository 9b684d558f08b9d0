//! `oxibot-channel-qq`: the QQ official bot channel plugin. Users' messages come in over QQ's
//! bot gateway (a WebSocket opened with an access token the app gets for its id and secret, no
//! public URL needed): one-to-one (C2C) messages and group messages that mention the bot.
//! Replies go out through the REST API as passive replies to those messages.
//!
//! Config (`channels.qq`, camelCase or snake_case keys):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `appId` | required | the bot's app id |
//! | `secret` | required | the bot's app secret |
//! | `msgFormat` | `"plain"` | `"plain"` (text messages) or `"markdown"` (Markdown messages, a permission QQ grants) |
//! | `ackMessage` | `"⏳ Processing..."` | sent as a reply once the kernel has a message; `""` for none |
//! | `mediaDir` | `$OXIBOT_HOME/media/qq` | where attachments users send are saved |
//! | `downloadMaxBytes` | 200 MiB | the largest attachment saved |
//! | `apiBase` | `https://api.sgroup.qq.com` | where the bot API (and `/gateway`) lives |
//! | `tokenUrl` | `https://bots.qq.com/app/getAppAccessToken` | where access tokens come from |
//!
//! Who may talk to the bot (`allowFrom`, pairing) is the kernel's business, not this plugin's;
//! nanobot's `downloadChunkSize` is accepted and unused. In groups QQ hands the bot only
//! messages that mention it, the mention already taken out.
//!
//! An inbound's id is QQ's message id (a message sent again is submitted once); its sender is
//! the sender's openid; its chat is that openid for a one-to-one chat and the group's openid
//! for a group (as nanobot names them). Its metadata holds `is_group`, `message_id` and
//! `chat_type` (`c2c` or `group`). A message event counts as handled only once the kernel has
//! accepted its message: heartbeats and the Resume after a drop report the last event up to
//! which all are, so QQ sends the others again. A message the channel's process loses (a
//! crash) is not sent again: a new process starts a new session.

mod api;
mod config;
mod error;
mod gateway;
mod incoming;
mod payloads;
mod replies;
mod sequence;
mod submit;

use std::process::ExitCode;

use oxibot_plugin::chat::{PartsSent, REMEMBERED, RecentMessages, serve_replies};
use oxibot_plugin::info;
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use tokio::sync::mpsc;

use crate::api::Api;
use crate::config::Config;
use crate::error::QqError;
use crate::gateway::Listener;
use crate::replies::{ChatKinds, Replies, Sender};
use crate::sequence::Sequence;
use crate::submit::Submitter;

/// Serves the qq channel to the kernel that started this process; the entry `oxibot __channel qq` runs.
pub fn run() -> ExitCode {
    // reqwest and the WebSocket's TLS both need a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("qq").run(serve)
}

/// Runs the channel: holds the gateway session and delivers replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), QqError> {
    let config = Config::from_value(channel.config())?;
    let api = Api::new(&config).map_err(QqError::Setup)?;
    info!("connecting to {} as app {} (media in {})", config.api_base, config.app_id, config.media_dir.display());
    let (recent, sequence, kinds) = (RecentMessages::new(REMEMBERED), Sequence::default(), ChatKinds::default());
    let sender = Sender { api: api.clone(), format: config.msg_format };
    let (submissions, queue) = mpsc::unbounded_channel();
    let submitter = Submitter {
        channel: channel.clone(),
        recent: recent.clone(),
        sequence: sequence.clone(),
        api: api.clone(),
        sender: sender.clone(),
        ack_message: config.ack_message.clone(),
        media_dir: config.media_dir.clone(),
        download_max_bytes: config.download_max_bytes,
    };
    tokio::spawn(submitter.run(queue));
    let mut replies = Replies { sender, kinds: kinds.clone(), sent: PartsSent::kept_in(&config.media_dir) };
    let listener = Listener { api, recent, sequence, kinds, submissions };
    tokio::select! {
        refused = listener.run() => refused,
        () = serve_replies(&channel, &mut replies) => Ok(()),
    }
}
