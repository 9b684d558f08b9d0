//! `oxibot-channel-feishu`: the Feishu (飞书) and Lark channel plugin. Users' messages to the
//! app's bot come in over the event long connection (a WebSocket the app opens with its id and
//! secret, no public URL needed, frames in protobuf); replies go out as interactive cards, and
//! a reply being written is shown by updating its card. An approval request is a card with
//! Approve / Always / Deny buttons; a press (the `card.action.trigger` callback, subscribed on
//! the same long connection) becomes the presser's message `/approve CODE` (or the other
//! answers) in the chat the request was asked in, which the kernel takes only from the person
//! the turn answers.
//!
//! Config (`channels.feishu`, camelCase or snake_case keys):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `appId` | required | the app's id (`cli_…`) |
//! | `appSecret` | required | the app's secret |
//! | `domain` | `"feishu"` | `"feishu"` (`open.feishu.cn`) or `"lark"` (`open.larksuite.com`) |
//! | `apiBase` | the domain's | where the open API lives (overrides `domain`) |
//! | `groupPolicy` | `"mention"` | in groups: `"mention"` (only messages mentioning the bot or everyone) or `"open"` (all) |
//! | `topicIsolation` | `true` | in groups, one session per topic: chat id `<chat>:<root message>` |
//! | `replyToMessage` | `false` | replies quote the user's message (in groups, in a thread under it) |
//! | `streaming` | `true` | show replies while they are written, by updating their card |
//! | `reactEmoji` | `"THUMBSUP"` | reaction added once the kernel has a message; `""` for none |
//! | `mediaDir` | `$OXIBOT_HOME/media/feishu` | where pictures, files, voice and videos users send are saved |
//!
//! Who may talk to the bot (`allowFrom`, pairing) is the kernel's business, not this plugin's;
//! nanobot's `encryptKey`, `verificationToken`, `doneEmoji`, `toolHintPrefix`, `name`,
//! `instanceId` and `identityKey` are accepted and unused.
//!
//! An inbound's id is Feishu's `message_id`; its sender is the sender's open id; its chat is
//! that open id for a one-to-one chat and the group's chat id (per topic with
//! `topicIsolation`) for a group. Its metadata holds `is_group`, `message_id`, `chat_id`,
//! `chat_type`, `msg_type`, `parent_id`, `root_id` and `thread_id`. An event is answered to
//! Feishu only once the kernel has persisted its message, so a message lost to a crash is
//! pushed again by Feishu; an event pushed again is answered once.

mod acks;
mod api;
mod cards;
mod config;
mod error;
mod fragments;
mod incoming;
mod media;
mod pbbp2;
mod replies;
mod stream;
mod submit;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{Handover, PartsSent, REMEMBERED, RecentMessages};
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc;

use crate::acks::AckLine;
use crate::api::OpenApi;
use crate::cards::LastMessages;
use crate::config::Config;
use crate::error::FeishuError;
use crate::replies::Deliverer;
use crate::stream::Listener;
use crate::submit::Submitter;

/// Serves the feishu channel to the kernel that started this process; the entry `oxibot __channel feishu` runs.
pub fn run() -> ExitCode {
    // reqwest and the WebSocket's TLS both need a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Streaming is announced always; with `streaming: false` the deltas are ignored.
    ChannelPlugin::new("feishu").streaming().approvals().run(serve)
}

/// Runs the channel: finds out who the bot is, then listens on the long connection and
/// delivers replies until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), FeishuError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let api = OpenApi::new(&config).map_err(FeishuError::Setup)?;
    let bot_open_id = identify(&api).await?;
    info!("connecting to {} as bot {bot_open_id} (media in {})", config.api_base, config.media_dir.display());
    let recent = RecentMessages::new(REMEMBERED);
    let acks = AckLine::default();
    let last_messages = LastMessages::default();
    let (submissions, queue) = mpsc::unbounded_channel();
    let submitter = Submitter {
        handover: Handover::new(channel.clone(), recent.clone(), acks.clone(), "feishu"),
        api: api.clone(),
        media_dir: config.media_dir.clone(),
        react_emoji: config.react_emoji.clone(),
        last_messages: last_messages.clone(),
    };
    tokio::spawn(submitter.run(queue));
    let deliverer = Deliverer::new(
        api.clone(),
        config.reply_to_message,
        config.streaming,
        last_messages,
        PartsSent::kept_in(&config.media_dir),
    );
    let listener = Listener { api, config, bot_open_id, recent, acks, submissions };
    tokio::select! {
        refused = listener.run() => refused,
        () = deliverer.run(&channel) => Ok(()),
    }
}

/// The bot's open id, asked until Feishu answers; refused credentials end the channel.
async fn identify(api: &OpenApi) -> Result<String, FeishuError> {
    let mut backoff = stream::BACKOFF;
    loop {
        match api.bot_open_id().await {
            Ok(open_id) => return Ok(open_id),
            Err(error) if error.is_credentials_problem() => return Err(FeishuError::Credentials(error)),
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("cannot find out who the bot is: {error}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}
