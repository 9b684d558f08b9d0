//! `oxibot-channel-telegram`: the Telegram channel plugin. It long-polls the Bot API, submits
//! each user's message to the kernel (moving the update offset only once the kernel persisted
//! it), and delivers the kernel's replies as HTML messages, streamed replies as a message
//! edited while it grows.
//!
//! Config (`channels.telegram`, camelCase or snake_case): `token` (required), `apiBase`
//! (`https://api.telegram.org`), `pollTimeout` (30 s), `mediaDir`
//! (`$OXIBOT_HOME/media/telegram`, else `~/.oxibot/media/telegram`), `groupPolicy`
//! (`mention` or `open`), `replyToMessage` (true), `acceptTimeout` (60 s), `proxy`.
//! Access control (`allowFrom`) is the kernel's.

mod api;
mod config;
mod error;
mod incoming;
mod markdown;
mod media;
mod multipart;
mod poll;
mod replies;
mod reply_parts;
mod service;
mod target;
mod types;

use std::process::ExitCode;

use oxibot_plugin::ChannelPlugin;

/// Serves the telegram channel to the kernel that started this process; the entry `oxibot __channel telegram` runs.
pub fn run() -> ExitCode {
    // reqwest with rustls-no-provider panics on the first client unless a provider is installed.
    api::install_crypto_provider();
    ChannelPlugin::new("telegram").streaming().approvals().run(service::serve)
}
