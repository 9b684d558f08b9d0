//! `oxibot-channel-slack`: the Slack channel plugin. Users' messages come in over Socket Mode
//! (a WebSocket opened with the app token, no public URL needed); replies go out through the
//! Web API's `chat.postMessage` with the bot token.
//!
//! Config (`channels.slack`, camelCase or snake_case keys):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `botToken` | required | `xoxb-…`, for `auth.test`, `chat.postMessage`, `reactions.add` |
//! | `appToken` | required | `xapp-…` with `connections:write`, for `apps.connections.open` |
//! | `apiBase` | `https://slack.com/api` | where the Web API lives |
//! | `groupPolicy` | `"mention"` | in channels: `"mention"` (only messages mentioning the bot), `"open"` (all), `"allowlist"` (all in `groupAllowFrom`) |
//! | `groupAllowFrom` | `[]` | channel ids for `"allowlist"` |
//! | `replyInThread` | `true` | answer a channel message in its thread |
//! | `threadSessions` | `false` | one session per thread: chat id `<channel>:<thread_ts>` |
//! | `reactEmoji` | `"eyes"` | reaction added once the kernel has a message; `""` for none |
//! | `dm.enabled` | `true` | take direct messages |
//!
//! Who may talk to the bot (`allowFrom`, pairing) is the kernel's business, not this plugin's.
//!
//! An inbound's id is `<channel>:<ts>`; its metadata holds `ts`, `thread_ts` (the thread to
//! answer in), `is_group` and `team`, which the kernel copies into the reply. An envelope is
//! acknowledged to Slack only once the kernel has persisted its message, so a message lost to a
//! crash is delivered again by Slack.

mod api;
mod config;
mod envelope;
mod error;
mod incoming;
mod mrkdwn;
mod replies;
mod socket;
mod submit;

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{AckLine, Handover, PartsSent, REMEMBERED, RecentMessages, media_dir, serve_replies};
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc;

use crate::api::{BotIdentity, WebApi};
use crate::config::Config;
use crate::error::SlackError;
use crate::replies::Replies;
use crate::socket::Listener;
use crate::submit::{Reactions, Submitter};

/// Serves the slack channel to the kernel that started this process; the entry `oxibot __channel slack` runs.
pub fn run() -> ExitCode {
    // reqwest and the WebSocket's TLS both need a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("slack").approvals().run(serve)
}

/// Runs the channel: identifies the bot, then listens on Socket Mode and delivers replies
/// until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), SlackError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let web = WebApi::new(&config.api_base).map_err(SlackError::Setup)?;
    let bot = identify(&web, &config.bot_token).await?;
    info!("signed in to {} as {} ({})", bot.team, bot.user, bot.user_id);
    let recent = RecentMessages::new(REMEMBERED);
    let acks = AckLine::new(envelope::ack);
    let (submissions, queue) = mpsc::unbounded_channel();
    let reactions =
        config.react_emoji.clone().map(|emoji| Reactions { web: web.clone(), token: config.bot_token.clone(), emoji });
    let handover = Handover::new(channel.clone(), recent.clone(), acks.clone(), "slack");
    let submitter = Submitter { handover, reactions };
    tokio::spawn(submitter.run(queue));
    let listener = Listener { web: web.clone(), config: config.clone(), bot, recent, acks, submissions };
    let mut replies = Replies {
        web,
        token: config.bot_token.clone(),
        reply_in_thread: config.reply_in_thread,
        posted: PartsSent::kept_in(&media_dir("slack")),
    };
    tokio::select! {
        refused = listener.run() => refused,
        () = serve_replies(&channel, &mut replies) => Ok(()),
    }
}

/// `auth.test` until it answers; a refused token ends the channel.
async fn identify(web: &WebApi, bot_token: &str) -> Result<BotIdentity, SlackError> {
    let mut backoff = socket::BACKOFF;
    loop {
        match web.auth_test(bot_token).await {
            Ok(bot) => return Ok(bot),
            Err(error) if error.is_token_problem() => return Err(SlackError::BotToken(error)),
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("{error}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}
