//! `oxibot-channel-matrix`: the Matrix channel plugin. Room messages come in through the
//! client-server API's `/sync` long poll; replies go out as `m.room.message` events
//! (`PUT /rooms/{room}/send/m.room.message/{txnId}`) with an HTML rendering of the Markdown.
//! Only unencrypted rooms are supported: there is no end-to-end encryption here. An encrypted
//! room is told so once (an `m.notice`), and the log says it too. The first batch after a join
//! carries the room's recent history: only what comes after the bot's join is answered.
//!
//! Config (`channels.matrix`, camelCase or snake_case keys, as nanobot's):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `homeserver` | `https://matrix.org` | the homeserver's base URL |
//! | `userId` | required | the bot's account, `@bot:example.org` |
//! | `accessToken` | required without `password` | the access token of the bot's device |
//! | `password` | | instead of a token: the channel logs in and keeps the session in `mediaDir/session.json` for the next start |
//! | `deviceId` | `""` | the device the token belongs to (the device a password login signs in as) |
//! | `groupPolicy` | `"open"` | in rooms of more than two members: `"open"` (all), `"mention"` (only messages whose `m.mentions` name the bot), `"allowlist"` (all in `groupAllowFrom`) |
//! | `groupAllowFrom` | `[]` | room ids for `"allowlist"` |
//! | `allowRoomMentions` | `false` | with `"mention"`, an `@room` mention counts too |
//! | `allowFrom` | | the kernel's allow list; the bot also joins the rooms these users (or anyone, with `"*"`) invite it to |
//! | `mediaDir` | `<data dir>/media/matrix` | where the channel keeps its sync position (`sync-position.json`) and a password login's session (`session.json`) |
//!
//! An inbound's id is the event id; the chat id is the room id; the metadata holds `event_id`,
//! `is_group` (more than two members) and, for a message in a thread, `thread_root_event_id`
//! and `thread_reply_to_event_id`, so the reply goes into the same thread. The sync position is
//! saved only after the kernel accepted every message of a batch: a crash replays the batch.

mod api;
mod config;
mod error;
mod html;
mod incoming;
mod replies;
mod signin;
mod store;
mod sync;

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use oxibot_plugin::chat::{REMEMBERED, RecentMessages, Typing};
use oxibot_plugin::info;
use oxibot_plugin::{ChannelHandle, ChannelPlugin};

use crate::api::ClientApi;
use crate::config::Config;
use crate::error::MatrixError;
use crate::replies::Replies;
use crate::store::SyncStore;
use crate::sync::Syncer;

/// Serves the matrix channel to the kernel that started this process; the entry `oxibot __channel matrix` runs.
pub fn run() -> ExitCode {
    // reqwest's TLS needs a rustls crypto provider; ring is the one linked.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("matrix").run(serve)
}

/// Runs the channel: checks the token, then syncs and delivers replies until the kernel hangs
/// up.
async fn serve(channel: ChannelHandle) -> Result<(), MatrixError> {
    let config = Arc::new(Config::from_value(channel.config())?);
    let anonymous = ClientApi::anonymous(&config.homeserver).map_err(MatrixError::Setup)?;
    let api = signin::sign_in(&anonymous, &config).await?;
    info!("signed in to {} as {} (device {:?})", config.homeserver, config.user_id, config.device_id);
    // Renewed a little before the homeserver's notice runs out; given up after two minutes.
    let typing = Typing::new(api::TYPING_TIMEOUT - Duration::from_secs(5), Duration::from_secs(120));
    let user_id = config.user_id.clone();
    let syncer = Syncer {
        api: api.clone(),
        store: SyncStore::new(&config.media_dir, &config.user_id),
        config,
        channel: channel.clone(),
        recent: RecentMessages::new(REMEMBERED),
        members: HashMap::new(),
        typing: typing.clone(),
        told_encrypted: HashSet::new(),
    };
    let replies = Replies { api, typing, user_id };
    tokio::select! {
        ended = syncer.run() => ended,
        () = replies.serve(&channel) => Ok(()),
    }
}
