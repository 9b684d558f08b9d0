//! `oxibot-channel-discord`: the Discord channel plugin. A Gateway (WebSocket) session brings
//! users' messages in as `inbound`s; replies go out through Discord's REST API.
//!
//! Config (`channels.discord`, camelCase or snake_case keys): `token` (required),
//! `gatewayUrl`, `apiBase`, `intents`, `allowChannels`, `groupPolicy` (`mention` or `open`),
//! `mediaDir`. See [`config`] for the defaults.
//!
//! Access control (`allowFrom`, pairing) is the kernel's job: every message that passes the
//! channel's own filters (not from a bot, in an allowed channel, mentioning the bot in a guild
//! unless the group policy is `open`) is submitted.

mod api;
mod attachments;
mod config;
mod error;
mod events;
mod gateway;
mod incoming;
mod replies;
mod service;

use std::process::ExitCode;

use oxibot_plugin::ChannelPlugin;

/// Serves the discord channel to the kernel that started this process; the entry `oxibot __channel discord` runs.
pub fn run() -> ExitCode {
    // reqwest and tungstenite are built without a crypto provider; pick ring before any client
    // exists. An error only means a provider is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    ChannelPlugin::new("discord").approvals().run(service::serve)
}
