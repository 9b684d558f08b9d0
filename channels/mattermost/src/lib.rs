//! `oxibot-channel-mattermost`: the Mattermost channel plugin. Posts come in over the server's
//! WebSocket (`/api/v4/websocket`, authenticated with an `authentication_challenge`, resumed
//! after a drop); replies go out through the REST API (`POST /api/v4/posts`), streamed ones by
//! patching one post (`PUT /api/v4/posts/{id}/patch`) at most once a second.
//!
//! Config (`channels.mattermost`, camelCase or snake_case keys, as nanobot's):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `serverUrl` | required | the server, `https://chat.example.com` (REST and WebSocket) |
//! | `token` | required | the bot account's access token |
//! | `teamId` | `""` | when set, posts in other teams' channels are left out |
//! | `groupPolicy` | `"mention"` | in channels: `"mention"` (only posts naming `@bot`), `"open"` (all), `"allowlist"` (all in `groupAllowFrom`) |
//! | `groupPolicyInThread` | `groupPolicy` | the same, for posts inside threads |
//! | `groupAllowFrom` | `[]` | channel ids for `"allowlist"` |
//! | `replyInThread` | `true` | answer a channel post in its thread (one session per thread) |
//! | `streaming` | `true` | show a reply as it grows, by editing one post |
//! | `reactEmoji` | `"eyes"` | reaction added once the kernel has a post; `""` for none |
//! | `dm.enabled` | `true` | take direct messages |
//! | `dm.policy`, `dm.allowFrom` | `"open"` | `"allowlist"`: only these user ids' direct messages |
//! | `mediaDir` | `<data dir>/media/mattermost` | where the channel keeps its WebSocket resume point (`websocket-resume.json`) |
//!
//! Who may talk to the bot (`allowFrom`, pairing) is the kernel's business, not this plugin's.
//!
//! An inbound's id is the post id (a post delivered twice is submitted once); the chat id is
//! the channel id, or `<channel>:<root post>` for a post in (or starting) a thread, which is
//! where the reply goes. The metadata holds `post_id`, `root_id`, `channel_type`, `is_group`,
//! `message_id` and nanobot's `mattermost` object. A restarted channel resumes the WebSocket from
//! the first post the kernel had not accepted, so the server replays it (while it still holds
//! the dead connection's events).

mod api;
mod config;
mod error;
mod events;
mod incoming;
mod replies;
mod resume;
mod socket;
mod submit;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::chat::{PartsSent, REMEMBERED, RecentMessages};
use oxibot_plugin::{ChannelHandle, ChannelPlugin};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc;

use crate::api::{BotUser, RestApi};
use crate::config::Config;
use crate::error::MattermostError;
use crate::replies::Deliverer;
use crate::resume::Progress;
use crate::socket::Listener;
use crate::submit::Submitter;

/// Serves the mattermost channel to the kernel that started this process; the entry `oxibot __channel mattermost` runs.
pub fn run() -> ExitCode {
    // reqwest and the WebSocket's TLS both need a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("mattermost").streaming().run(serve)
}

/// Runs the channel: identifies the bot, then listens on the WebSocket and delivers replies
/// until the kernel hangs up.
async fn serve(channel: ChannelHandle) -> Result<(), MattermostError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let rest = RestApi::new(&config.server_url, &config.token).map_err(MattermostError::Setup)?;
    let bot = identify(&rest).await?;
    info!("signed in to {} as @{} ({})", config.server_url, bot.username, bot.id);
    let recent = RecentMessages::new(REMEMBERED);
    let (submissions, queue) = mpsc::unbounded_channel();
    let progress = Progress::open(&config.media_dir);
    let submitter = Submitter {
        channel: channel.clone(),
        recent: recent.clone(),
        rest: rest.clone(),
        bot_id: bot.id.clone(),
        react_emoji: config.react_emoji.clone(),
        team_id: config.team_id.clone(),
        teams: HashMap::new(),
        progress: progress.clone(),
    };
    tokio::spawn(submitter.run(queue));
    let deliverer = Deliverer::new(rest, config.streaming, PartsSent::kept_in(&config.media_dir));
    let listener = Listener { config, bot, recent, submissions, progress };
    tokio::select! {
        () = listener.run() => Ok(()),
        () = deliverer.run(&channel) => Ok(()),
    }
}

/// `GET /users/me` until it answers; a refused token ends the channel.
async fn identify(rest: &RestApi) -> Result<BotUser, MattermostError> {
    let mut backoff = socket::BACKOFF;
    loop {
        match rest.me().await {
            Ok(bot) => return Ok(bot),
            Err(error) if error.is_token_problem() => return Err(MattermostError::Token(error)),
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("{error}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}
