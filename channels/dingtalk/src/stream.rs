//! Stream Mode: register a connection for a ticket, open the WebSocket with it, answer pings,
//! hand robot messages on and acknowledge the rest, and connect again — with a fresh ticket —
//! when DingTalk says `disconnect` or the connection drops (with backoff).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use serde_json::{Value, json};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::acks::AckLine;
use crate::api::{ApiError, OpenApi, Recipient};
use crate::config::Config;
use crate::error::DingTalkError;
use crate::frames::{self, BOT_MESSAGE_TOPIC, Frame};
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
/// The waits between attempts to reach DingTalk: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// What a user writing to a robot that only answers in groups is told (nanobot's words).
pub const PRIVATE_CHAT_NOTICE: &str = "该机器人未开启私聊，请在群聊中与我对话。";

/// Everything the Stream side needs.
pub struct Listener {
    /// The open API, for tickets and the private chat notice.
    pub api: OpenApi,
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Messages seen lately, and the frames waiting for their acceptance.
    pub recent: RecentMessages,
    /// Where acknowledgements go.
    pub acks: AckLine,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

/// Why a connection ended.
#[derive(Debug)]
enum Ending {
    /// DingTalk said `disconnect`.
    Refresh(String),
    /// The connection broke or went silent.
    Dropped(String),
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot register a stream connection: {0}")]
    Register(ApiError),
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("cannot connect the websocket: no answer within {CONNECT_TIMEOUT:?}")]
    Timeout,
}

impl Listener {
    /// Keeps a Stream connection up for good; returns only when DingTalk refuses the app's
    /// credentials.
    pub async fn run(self) -> Result<(), DingTalkError> {
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
                    eprintln!("dingtalk asked for a new connection ({reason})");
                    if lasted {
                        continue;
                    }
                }
                Ok(Ending::Dropped(reason)) => eprintln!("the stream connection dropped: {reason}"),
                Err(ConnectError::Register(error)) if error.is_credentials_problem() => {
                    return Err(DingTalkError::Credentials(error));
                }
                Err(error) => eprintln!("{error}"),
            }
            let wait = backoff.next_wait();
            eprintln!("connecting again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it ends.
    async fn connection(&self) -> Result<Ending, ConnectError> {
        let ticket = self.api.open_connection().await.map_err(ConnectError::Register)?;
        let url = ticket.url().map_err(ConnectError::Register)?;
        let connecting = tokio_tungstenite::connect_async(url.as_str());
        let (socket, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| ConnectError::Timeout)??;
        eprintln!("stream connection open ({})", ticket.endpoint);
        let (mut sink, mut stream) = socket.split();
        let (answers, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.acks.attach(answers.clone());
        let mut keepalive = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        let mut last_heard = Instant::now();
        let ending = loop {
            tokio::select! {
                incoming = stream.next() => {
                    last_heard = Instant::now();
                    let text = match incoming {
                        Some(Ok(WsMessage::Text(text))) => text,
                        Some(Ok(WsMessage::Close(frame))) => break Ending::Dropped(format!("closed by dingtalk ({frame:?})")),
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => break Ending::Dropped(error.to_string()),
                        None => break Ending::Dropped("closed".to_owned()),
                    };
                    if let Some(ending) = self.on_frame(frames::parse(text.as_str()), &answers) {
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
        // Answers already queued (pongs, acks of ignored frames) still go out before the close.
        while let Ok(frame) = outgoing.try_recv() {
            if sink.send(WsMessage::Text(frame.into())).await.is_err() {
                break;
            }
        }
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
        Ok(ending)
    }

    /// Handles one frame, answering through `answers` (this connection's queue); returns how
    /// the connection ends if it does.
    fn on_frame(&self, frame: Frame, answers: &UnboundedSender<String>) -> Option<Ending> {
        match frame {
            Frame::Ping { message_id, data } => {
                let _ = answers.send(frames::pong(&message_id, &data));
            }
            Frame::Disconnect(reason) => return Some(Ending::Refresh(reason)),
            Frame::Callback { message_id, topic, data } if topic == BOT_MESSAGE_TOPIC => {
                self.on_message(&message_id, &data, answers)
            }
            Frame::Callback { message_id, .. } | Frame::OtherSystem { message_id, .. } => {
                let _ = answers.send(frames::ack(&message_id));
            }
            Frame::Unknown => {}
        }
        None
    }

    /// Acknowledges a robot message at once, or queues it for the kernel and leaves the
    /// acknowledgement to the submitter.
    fn on_message(&self, frame_id: &str, data: &Value, answers: &UnboundedSender<String>) {
        let message = match incoming::judge(data, &self.config) {
            Verdict::Submit(message) => message,
            Verdict::RefusePrivate { id, user } => {
                if self.recent.arrived(&id, frame_id) == Seen::New {
                    eprintln!("private chats are disabled; telling {user} to write in a group");
                    tokio::spawn(notify_private_chat_disabled(self.api.clone(), user));
                }
                self.recent.accepted(&id);
                let _ = answers.send(frames::ack(frame_id));
                return;
            }
            Verdict::Ignore(reason) => {
                eprintln!("callback {frame_id} ignored: {reason}");
                let _ = answers.send(frames::ack(frame_id));
                return;
            }
        };
        match self.recent.arrived(&message.id, frame_id) {
            Seen::New => {
                if self.submissions.send(message).is_err() {
                    eprintln!("the submitter is gone; callback {frame_id} stays unacknowledged");
                }
            }
            Seen::InFlight => {
                eprintln!("message {} arrived again while being submitted; acknowledged with the first", message.id)
            }
            Seen::Accepted => {
                let _ = answers.send(frames::ack(frame_id));
            }
        }
    }
}

/// Tells `user` the robot only answers in groups; failures are only logged.
async fn notify_private_chat_disabled(api: OpenApi, user: String) {
    let param = json!({"title": "oxibot", "text": PRIVATE_CHAT_NOTICE});
    if let Err(error) = api.send(&Recipient::User(user), "sampleMarkdown", &param).await {
        eprintln!("cannot send the private chat notice: {error}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_double_up_to_a_minute() {
        let mut backoff = super::BACKOFF;
        assert_eq!((0..8).map(|_| backoff.next_wait().as_secs()).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
