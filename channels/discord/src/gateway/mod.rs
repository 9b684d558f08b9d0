//! The Discord Gateway client: keeps one session alive across dropped connections (resuming
//! it where possible) and hands every `MESSAGE_CREATE` to the inbound pipeline.

mod connection;
mod heartbeat;
mod payload;
mod state;

use std::time::Duration;

use oxibot_plugin::chat::{Backoff, jitter};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::Config;
use crate::error::DiscordError;
use crate::events::MessageCreate;
use state::{Ending, GatewayState};

/// A message from the Gateway, with the bot's id to judge it by.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The message.
    pub message: MessageCreate,
    /// The bot's own user id (from READY).
    pub bot_id: String,
    /// For an approval button's answer: the interaction's id and token, to respond to it.
    pub pressed: Option<(String, String)>,
}

/// Runs the Gateway client until Discord refuses the config for good (an error) or nobody
/// takes the messages any more (`Ok`).
pub async fn run(config: &Config, incoming: UnboundedSender<Incoming>) -> Result<(), DiscordError> {
    let mut state =
        GatewayState::new(config.token.clone(), config.intents, config.gateway_url.clone(), RECONNECT_BACKOFF);
    loop {
        match connection::run(&mut state, &incoming).await {
            Ending::Fatal(error) => return Err(error),
            Ending::Stopped => return Ok(()),
            Ending::Reconnect => {}
            // Discord asks for a random 1–5 s wait before identifying again.
            Ending::NewSession => tokio::time::sleep(Duration::from_secs(1).mul_f64(1.0 + 4.0 * jitter())).await,
        }
        tokio::time::sleep(state.backoff.next_wait()).await;
    }
}

/// The waits between connections (reset by READY or RESUMED): none after a healthy
/// connection, then 1 s doubling up to a minute.
const RECONNECT_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60)).at_once_after_reset();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_healthy_connection_is_retried_at_once_and_failures_back_off_to_a_minute() {
        let mut backoff = RECONNECT_BACKOFF;
        let waits: Vec<u64> = (1..=9).map(|_| backoff.next_wait().as_secs()).collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
