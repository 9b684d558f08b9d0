//! Receiving: check that the daemon is up, open its event stream, turn each `receive` event
//! into a message for the kernel, and open the stream again (with growing waits) when it ends.
//! signal-cli acknowledges messages to Signal itself, so what the stream brought while the
//! channel was down is not sent again: the channel can only avoid answering one twice.

use std::sync::Arc;
use std::time::Duration;

use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::api::{Daemon, DaemonError};
use crate::config::Config;
use crate::incoming::{self, GroupContext, UserMessage, Verdict};
use crate::sse::EventReader;

/// The waits between attempts to reach the daemon: 1 s, 2 s, 4 s, … up to 30 s, as nanobot.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// Everything the receiving side needs.
pub struct Receiver {
    /// The daemon.
    pub daemon: Daemon,
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Messages seen lately, so one delivered twice reaches the kernel once.
    pub recent: RecentMessages,
    /// Recent group messages, shown with the next one answered.
    pub groups: GroupContext,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

impl Receiver {
    /// Keeps the event stream open for good.
    pub async fn run(mut self) {
        let mut backoff = BACKOFF;
        loop {
            let ended = self.stream(&mut backoff).await;
            let wait = backoff.next_wait();
            match ended {
                Ok(()) => info!("the signal-cli event stream ended; opening it again in {wait:?}"),
                Err(error) => warn!(
                    "{error} (is `signal-cli -a {} daemon --http` running?); trying again in {wait:?}",
                    self.config.account
                ),
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Reads one event stream until it ends; resets `backoff` once it is open.
    async fn stream(&mut self, backoff: &mut Backoff) -> Result<(), DaemonError> {
        self.daemon.check().await?;
        let mut response = self.daemon.events().await?;
        backoff.reset();
        info!("receiving messages from the signal-cli daemon at {}", self.config.daemon_url);
        let mut reader = EventReader::default();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Ok(()),
                Err(error) => {
                    let reason = oxibot_plugin::util::error_chain(&error);
                    return Err(DaemonError::Network { what: "events".into(), reason });
                }
            };
            for event in reader.feed(&chunk) {
                self.on_event(&event);
            }
        }
    }

    /// Queues the message an event carries, unless it is left out or was seen before.
    fn on_event(&mut self, data: &str) {
        let Ok(params) = serde_json::from_str::<Value>(data) else {
            warn!("ignoring an event that is not json");
            return;
        };
        let message = match incoming::judge(&params, &self.config, &mut self.groups) {
            Verdict::Submit(message) => message,
            Verdict::Ignore(_) => return,
        };
        match self.recent.arrived(&message.id, &message.id) {
            Seen::New => {
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; a message is dropped");
                }
            }
            Seen::InFlight | Seen::Accepted => info!("message {} arrived again; answered once", message.id),
        }
    }
}
