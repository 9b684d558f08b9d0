//! Socket Mode: open a WebSocket URL with the app token, read envelopes, acknowledge them, and
//! connect again when Slack asks to (`disconnect`) or the connection drops (with backoff).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::acks::AckLine;
use crate::api::{BotIdentity, WebApi, WebError};
use crate::config::Config;
use crate::envelope::{self, Frame};
use crate::error::SlackError;
use crate::incoming::{self, UserMessage, Verdict};

/// How often the connection is probed with a WebSocket ping.
const PING_EVERY: Duration = Duration::from_secs(30);
/// A connection silent for this long (not even a pong) is considered dead.
const SILENCE_LIMIT: Duration = Duration::from_secs(90);
/// How long opening the WebSocket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A connection that lasted this long worked: the next one starts over with short waits, and a
/// `disconnect` is answered by connecting again at once.
const STEADY: Duration = Duration::from_secs(10);
/// How long a closing handshake may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
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

/// Why a connection ended.
#[derive(Debug)]
enum Ending {
    /// Slack asked for a new connection.
    Refresh(String),
    /// The connection broke or went silent.
    Dropped(String),
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot get a socket mode url: {0}")]
    Open(WebError),
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("cannot connect the websocket: no answer within {CONNECT_TIMEOUT:?}")]
    Timeout,
}

impl Listener {
    /// Keeps a Socket Mode connection up for good; returns only when the app token is refused.
    pub async fn run(self) -> Result<(), SlackError> {
        let mut backoff = BACKOFF;
        loop {
            let started = Instant::now();
            let outcome = self.connection().await;
            let lasted = started.elapsed() >= STEADY;
            if lasted {
                backoff.reset();
            }
            match outcome {
                Ok(Ending::Refresh(reason)) => {
                    eprintln!("slack asked for a new connection ({reason})");
                    if lasted {
                        continue;
                    }
                }
                Ok(Ending::Dropped(reason)) => eprintln!("the socket mode connection dropped: {reason}"),
                Err(ConnectError::Open(error)) if error.is_token_problem() => return Err(SlackError::AppToken(error)),
                Err(error) => eprintln!("{error}"),
            }
            let wait = backoff.next_wait();
            eprintln!("connecting again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it ends.
    async fn connection(&self) -> Result<Ending, ConnectError> {
        let url = self.web.open_connection(&self.config.app_token).await.map_err(ConnectError::Open)?;
        let connecting = tokio_tungstenite::connect_async(url.as_str());
        let (socket, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| ConnectError::Timeout)??;
        let (mut sink, mut stream) = socket.split();
        let (frames, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.acks.attach(frames);
        let mut keepalive = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        let mut last_heard = Instant::now();
        let ending = loop {
            tokio::select! {
                incoming = stream.next() => {
                    last_heard = Instant::now();
                    let text = match incoming {
                        Some(Ok(WsMessage::Text(text))) => text,
                        Some(Ok(WsMessage::Close(frame))) => break Ending::Dropped(format!("closed by slack ({frame:?})")),
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => break Ending::Dropped(error.to_string()),
                        None => break Ending::Dropped("closed".to_owned()),
                    };
                    if let Some(ending) = self.on_frame(envelope::parse(text.as_str())) {
                        break ending;
                    }
                }
                Some(frame) = outgoing.recv() => {
                    if let Err(error) = sink.send(WsMessage::Text(frame.into())).await {
                        break Ending::Dropped(error.to_string());
                    }
                }
                _ = keepalive.tick() => {
                    if last_heard.elapsed() > SILENCE_LIMIT {
                        break Ending::Dropped(format!("nothing heard for {SILENCE_LIMIT:?}"));
                    }
                    if let Err(error) = sink.send(WsMessage::Ping(Default::default())).await {
                        break Ending::Dropped(error.to_string());
                    }
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
        Ok(ending)
    }

    /// Handles one frame; returns how the connection ends if it does.
    fn on_frame(&self, frame: Frame) -> Option<Ending> {
        match frame {
            Frame::Hello => eprintln!("socket mode connection ready"),
            Frame::Disconnect(reason) => return Some(Ending::Refresh(reason)),
            Frame::Event { envelope_id, retry_attempt, payload } => {
                self.on_event(&envelope_id, retry_attempt, &payload)
            }
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
        let seen = self.recent.arrived(&message.id, envelope_id);
        match seen {
            Seen::New => {
                if retry_attempt > 0 {
                    eprintln!("message {} arrived again (retry {retry_attempt}); submitting it", message.id);
                }
                if self.submissions.send(message).is_err() {
                    eprintln!("the submitter is gone; envelope {envelope_id} stays unacknowledged");
                }
            }
            Seen::InFlight => {
                eprintln!("message {} arrived again while being submitted; acknowledged with the first", message.id)
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
