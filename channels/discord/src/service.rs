//! The channel service: reads the config, starts the Gateway client and the inbound pipeline,
//! and delivers the kernel's replies until the kernel hangs up or Discord refuses the bot.

use oxibot_plugin::ChannelHandle;
use oxibot_plugin::chat::PartsSent;
use oxibot_plugin::info;
use tokio::sync::mpsc;

use crate::api::Rest;
use crate::config::Config;
use crate::error::DiscordError;
use crate::gateway;
use crate::incoming::{self, Filter, Pipeline};
use crate::replies::Outbox;

/// Runs the Discord channel for the kernel behind `channel`.
pub async fn serve(channel: ChannelHandle) -> Result<(), DiscordError> {
    let config = Config::from_value(channel.config())?;
    let rest = Rest::new(&config)?;
    let typing = incoming::typing_indicators();
    let (incoming_tx, incoming_rx) = mpsc::unbounded_channel();
    let pipeline = Pipeline {
        channel: channel.clone(),
        filter: Filter::from_config(&config),
        rest: rest.clone(),
        typing: typing.clone(),
        media_dir: config.media_dir(),
    };
    tokio::spawn(pipeline.run(incoming_rx));
    info!("discord: connecting to {}", config.gateway_url);
    let mut outbox = Outbox::new(rest, typing, PartsSent::kept_in(&config.media_dir()));
    tokio::select! {
        ended = gateway::run(&config, incoming_tx) => ended,
        () = outbox.serve(&channel) => Ok(()),
    }
}
