//! Socket Mode: open a WebSocket URL with the app token, read envelopes, acknowledge them, and
//! connect again when Slack asks to (`disconnect`) or the connection drops (with backoff).

use std::sync::Arc;
use std::time::Duration;

use oxibot_plugin::chat::socket::{self, CONNECT_TIMEOUT, Drive, Keepalive, Next, OpenError, reconnect};
use oxibot_plugin::chat::{AckLine, Acknowledge, Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use tokio::sync::mpsc::{self, UnboundedSender};

use crate::api::{BotIdentity, WebApi, WebError};
use crate::config::Config;
use crate::envelope::{self, Frame};
use crate::error::SlackError;
use crate::incoming::{self, UserMessage, Verdict};

/// A connection that lasted this long worked: the next one starts over with short waits, and a
/// `disconnect` is answered by connecting again at once.
const STEADY: Duration = Duration::from_secs(10);
/// The waits between attempts to reach Slack: 1 s, 2 s, 4 s, … up to 30 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// Everything the Socket Mode side needs.
pub struct Listener {
    /// The Web API, for `apps.connections.open`.
    pub web: WebApi,
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Who the bot is, to spot mentions and its own messages.
    pub bot: BotIdentity,
    /// Messages seen lately, to drop redeliveries.
    pub recent: RecentMessages,
    /// Where acknowledgements go.
    pub acks: AckLine,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot get a socket mode url: {0}")]
    Open(WebError),
    #[error(transparent)]
    Socket(#[from] OpenError),
}

/// Why a connection ended.
#[derive(Debug)]
enum Ending {
    /// Slack asked for a new connection.
    Refresh(String),
    /// The connection broke or went silent.
    Dropped(String),
}

impl Listener {
    /// Keeps a Socket Mode connection up for good; returns only when the app token is refused.
    pub async fn run(self) -> Result<(), SlackError> {
        reconnect(BACKOFF, STEADY, || async {
            match self.connection().await {
                Ok(Ending::Refresh(reason)) => Next::Refresh(format!("slack asked for a new connection ({reason})")),
                Ok(Ending::Dropped(reason)) => Next::Retry(format!("the socket mode connection dropped: {reason}")),
                Err(ConnectError::Open(error)) if error.is_token_problem() => {
                    Next::Stop(Err(SlackError::AppToken(error)))
                }
                Err(error) => Next::Retry(error.to_string()),
            }
        })
        .await
    }

    /// Runs one connection until it ends.
    async fn connection(&self) -> Result<Ending, ConnectError> {
        let url = self.web.open_connection(&self.config.app_token).await.map_err(ConnectError::Open)?;
        let socket = socket::open(url.as_str(), CONNECT_TIMEOUT).await?;
        let (frames, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.acks.attach(frames);
        let options =
            Drive { service: "slack", keepalive: Keepalive::DEFAULT, outgoing: Some(&mut outgoing), ping: None };
        let ending = socket::drive(socket, options, |text| self.on_frame(envelope::parse(text))).await;
        Ok(ending.unwrap_or_else(Ending::Dropped))
    }

    /// Handles one frame; returns how the connection ends if it does.
    fn on_frame(&self, frame: Frame) -> Option<Ending> {
        match frame {
            Frame::Hello => info!("socket mode connection ready"),
            Frame::Disconnect(reason) => return Some(Ending::Refresh(reason)),
            Frame::Event { envelope_id, retry_attempt, payload } => {
                self.on_event(&envelope_id, retry_attempt, &payload)
            }
            Frame::Interaction { envelope_id, payload } => match incoming::button_press(&payload, &self.config) {
                Some(message) => self.queue(&envelope_id, 0, message),
                None => {
                    self.acks.ack(&envelope_id);
                }
            },
            Frame::OtherEnvelope(envelope_id) => {
                self.acks.ack(&envelope_id);
            }
            Frame::Unknown => {}
        }
        None
    }

    /// Acknowledges an event at once, or queues its message for the kernel and leaves the
    /// acknowledgement to the submitter.
    fn on_event(&self, envelope_id: &str, retry_attempt: u64, payload: &serde_json::Value) {
        let message = match incoming::judge(payload, &self.bot, &self.config) {
            Verdict::Submit(message) => message,
            Verdict::Ignore(_) => {
                self.acks.ack(envelope_id);
                return;
            }
        };
        self.queue(envelope_id, retry_attempt, message);
    }

    /// Queues a user's message for the kernel (once, however often it arrives); its envelope
    /// is acknowledged once the kernel accepted it.
    fn queue(&self, envelope_id: &str, retry_attempt: u64, message: UserMessage) {
        let seen = self.recent.arrived(&message.id, envelope_id);
        match seen {
            Seen::New => {
                if retry_attempt > 0 {
                    info!("message {} arrived again (retry {retry_attempt}); submitting it", message.id);
                }
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; envelope {envelope_id} stays unacknowledged");
                }
            }
            Seen::InFlight => {
                info!("message {} arrived again while being submitted; acknowledged with the first", message.id)
            }
            Seen::Accepted => {
                self.acks.ack(envelope_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_double_up_to_thirty_seconds() {
        let mut backoff = super::BACKOFF;
        assert_eq!((0..7).map(|_| backoff.next_wait().as_secs()).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 30, 30]);
    }

    #[tokio::test]
    async fn a_wss_connection_sets_up_tls_with_the_ring_provider_instead_of_panicking() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // A peer that accepts and hangs up: the TLS handshake fails, as an error.
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        let outcome = tokio_tungstenite::connect_async(format!("wss://localhost:{port}/link")).await;
        assert!(outcome.is_err());
    }
}
