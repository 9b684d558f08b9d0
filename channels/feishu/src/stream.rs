//! The event long connection: ask the open API for an endpoint, open the WebSocket, ping as
//! often as Feishu says, hand messages on and answer every other event at once, and connect
//! again — with a fresh endpoint — when the connection drops (with backoff).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::{Acknowledge, Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use serde_json::Value;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::acks::AckLine;
use crate::api::{ApiError, OpenApi};
use crate::config::Config;
use crate::error::FeishuError;
use crate::fragments::Fragments;
use crate::incoming::{self, UserMessage, Verdict};
use crate::pbbp2::{CONTROL, DATA, Frame};

/// How long opening the WebSocket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A connection that lasted this long worked: the next one starts over with short waits.
const STEADY: Duration = Duration::from_secs(10);
/// How long a closing handshake may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many ping intervals may pass without a word from Feishu before the connection counts
/// as dead.
const SILENT_PINGS: u32 = 3;
/// The waits between attempts to reach Feishu: 1 s, 2 s, 4 s, … up to 60 s, shortened at
/// random so many clients do not retry in step.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// Everything the long connection needs.
pub struct Listener {
    /// The open API, for endpoints.
    pub api: OpenApi,
    /// The channel's settings.
    pub config: Arc<Config>,
    /// The bot's open id, to spot mentions.
    pub bot_open_id: String,
    /// Messages seen lately, and the frames waiting for their acceptance.
    pub recent: RecentMessages,
    /// Where answers go.
    pub acks: AckLine,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot get a long connection endpoint: {0}")]
    Endpoint(ApiError),
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("cannot connect the websocket: no answer within {CONNECT_TIMEOUT:?}")]
    Timeout,
}

impl Listener {
    /// Keeps a long connection up for good; returns only when Feishu refuses the app's
    /// credentials.
    pub async fn run(self) -> Result<(), FeishuError> {
        let mut backoff = BACKOFF.jitter(0.3);
        let mut fragments = Fragments::default();
        loop {
            let started = Instant::now();
            match self.connection(&mut fragments).await {
                Ok(reason) => warn!("the long connection dropped: {reason}"),
                Err(ConnectError::Endpoint(error)) if error.is_credentials_problem() => {
                    return Err(FeishuError::Credentials(error));
                }
                Err(error) => warn!("{error}"),
            }
            if started.elapsed() >= STEADY {
                backoff.reset();
            }
            let wait = backoff.next_wait();
            info!("connecting again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it drops; returns why.
    async fn connection(&self, fragments: &mut Fragments) -> Result<String, ConnectError> {
        let endpoint = self.api.endpoint().await.map_err(ConnectError::Endpoint)?;
        let connecting = tokio_tungstenite::connect_async(endpoint.url.as_str());
        let (socket, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| ConnectError::Timeout)??;
        info!("long connection open (service {})", endpoint.service_id);
        let (mut sink, mut stream) = socket.split();
        let (answers, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
        self.acks.attach(answers.clone());
        let mut ping_every = endpoint.ping_interval;
        let mut pings = tokio::time::interval(ping_every);
        let mut last_heard = Instant::now();
        let reason = loop {
            tokio::select! {
                incoming = stream.next() => {
                    last_heard = Instant::now();
                    let bytes = match incoming {
                        Some(Ok(WsMessage::Binary(bytes))) => bytes,
                        Some(Ok(WsMessage::Close(frame))) => break format!("closed by feishu ({frame:?})"),
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => break error.to_string(),
                        None => break "closed".to_owned(),
                    };
                    match Frame::decode(&bytes) {
                        Ok(frame) => {
                            let asked = self.on_frame(frame, fragments, &answers);
                            if let Some(interval) = asked.filter(|interval| *interval != ping_every) {
                                ping_every = interval;
                                pings = tokio::time::interval_at(Instant::now() + ping_every, ping_every);
                            }
                        }
                        Err(error) => warn!("a frame from feishu cannot be read: {error}"),
                    }
                }
                Some(bytes) = outgoing.recv() => {
                    if let Err(error) = sink.send(WsMessage::Binary(bytes.into())).await {
                        break error.to_string();
                    }
                }
                _ = pings.tick() => {
                    if last_heard.elapsed() > ping_every * SILENT_PINGS {
                        break format!("nothing heard for {:?}", ping_every * SILENT_PINGS);
                    }
                    if let Err(error) = sink.send(WsMessage::Binary(Frame::ping(endpoint.service_id).encode().into())).await {
                        break error.to_string();
                    }
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
        Ok(reason)
    }

    /// Handles one frame, answering through `answers` (this connection's queue); returns a new
    /// ping interval when a pong brings one.
    fn on_frame(
        &self,
        frame: Frame,
        fragments: &mut Fragments,
        answers: &UnboundedSender<Vec<u8>>,
    ) -> Option<Duration> {
        let kind = frame.header("type").unwrap_or_default().to_owned();
        match (frame.method, kind.as_str()) {
            (CONTROL, "pong") => {
                let settings: Value = serde_json::from_slice(frame.payload.as_deref().unwrap_or_default()).ok()?;
                settings["PingInterval"].as_u64().filter(|seconds| *seconds > 0).map(Duration::from_secs)
            }
            (DATA, "event") => {
                let key = frame.header("message_id").unwrap_or_default().to_owned();
                let number = |name: &str| frame.header(name).and_then(|value| value.parse::<usize>().ok());
                let (sum, seq) = (number("sum").unwrap_or(1), number("seq").unwrap_or(0));
                let piece = frame.payload.clone().unwrap_or_default();
                let payload = fragments.add(&key, sum, seq, piece)?;
                self.on_event(&key, frame, &payload, answers);
                None
            }
            // Old-style card callback frames are not subscribed to and, like the SDK, left
            // unanswered; a press of an approval card arrives as a `card.action.trigger` event.
            _ => None,
        }
    }

    /// Answers an event at once, or queues its message for the kernel and leaves the answer to
    /// the submitter.
    fn on_event(&self, key: &str, frame: Frame, payload: &[u8], answers: &UnboundedSender<Vec<u8>>) {
        let answer_now = |frame: &Frame| {
            let _ = answers.send(frame.answer(200, 0).encode());
        };
        let event: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
        let message = match incoming::judge(&event, &self.bot_open_id, &self.config) {
            Verdict::Submit(message) => message,
            Verdict::Ignore(_) => return answer_now(&frame),
        };
        // Held before the list knows of it: the kernel's acceptance may come at any moment
        // after, and answers every frame the list names.
        self.acks.hold(key, frame);
        match self.recent.arrived(&message.id, key) {
            Seen::New => {
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; event {key} stays unanswered");
                }
            }
            Seen::InFlight => {
                info!("message {} arrived again while being submitted; answered with the first", message.id);
            }
            Seen::Accepted => {
                self.acks.ack(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_grow_up_to_a_minute() {
        let mut backoff = super::BACKOFF;
        assert_eq!((0..8).map(|_| backoff.next_wait().as_secs()).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
