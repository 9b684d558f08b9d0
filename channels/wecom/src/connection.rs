//! The long connection: open the WebSocket, subscribe the bot, send heartbeats, hand users'
//! messages on (each `msgid` once), welcome users who open a chat, and connect again with
//! backoff when the connection drops; when another connection takes the bot over, stop.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitStream;
use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::chats::LatestCallbacks;
use crate::config::Config;
use crate::error::WeComError;
use crate::frames::{self, Frame};
use crate::incoming::{self, UserMessage, Verdict};
use crate::link::Link;

/// How often the heartbeat goes out (WeCom's SDKs use 30 s).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);
/// A connection silent for this long (not even a heartbeat answer) is considered dead.
const SILENCE_LIMIT: Duration = Duration::from_secs(90);
/// How long opening the WebSocket, and then the subscription, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A connection that lasted this long worked: the next one starts over with short waits.
const STEADY: Duration = Duration::from_secs(10);
/// How long a closing handshake may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The waits between attempts to reach WeCom: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Everything the connection side needs.
pub struct Listener {
    /// The channel's settings.
    pub config: Arc<Config>,
    /// Where replies find the current connection.
    pub link: Link,
    /// Messages seen lately, so one delivered twice reaches the kernel once.
    pub recent: RecentMessages,
    /// The latest callback of each chat, for streamed replies.
    pub latest: LatestCallbacks,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

/// Why a connection ended.
#[derive(Debug)]
enum Ending {
    /// The connection broke or went silent.
    Dropped(String),
    /// WeCom said another connection took the bot over.
    Replaced,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("cannot connect to wecom: no answer within {CONNECT_TIMEOUT:?}")]
    Timeout,
    #[error("the connection closed before wecom answered the subscription")]
    ClosedEarly,
    #[error("wecom refused the subscription: errcode {errcode}, {errmsg}")]
    Refused { errcode: i64, errmsg: String },
}

impl Listener {
    /// Keeps a subscribed connection up for good; returns only when WeCom refuses the bot's
    /// credentials or another connection took the bot over.
    pub async fn run(self) -> Result<(), WeComError> {
        let mut backoff = BACKOFF;
        loop {
            let started = Instant::now();
            let outcome = self.connection().await;
            self.link.detach();
            if started.elapsed() >= STEADY {
                backoff.reset();
            }
            match outcome {
                Ok(Ending::Dropped(reason)) => eprintln!("the wecom connection dropped: {reason}"),
                // Connecting again would take the bot back from whoever has it now, who would
                // take it back in turn; the channel stops and the kernel decides (it gives up
                // after a few quick restarts).
                Ok(Ending::Replaced) => return Err(WeComError::TakenOver),
                Err(ConnectError::Refused { errcode, errmsg }) => {
                    return Err(WeComError::Credentials { errcode, errmsg });
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
        let connecting = tokio_tungstenite::connect_async(self.config.ws_url.as_str());
        let (socket, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| ConnectError::Timeout)??;
        let (mut sink, mut stream) = socket.split();
        let req_id = frames::request_id("aibot_subscribe");
        sink.send(WsMessage::Text(frames::subscribe(&req_id, &self.config.bot_id, &self.config.secret).into())).await?;
        tokio::time::timeout(CONNECT_TIMEOUT, subscribed(&mut stream, &req_id))
            .await
            .map_err(|_| ConnectError::Timeout)??;
        eprintln!("subscribed to wecom as bot {}", self.config.bot_id);
        let (frames_out, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.link.attach(frames_out);
        let mut heartbeat = tokio::time::interval_at(Instant::now() + HEARTBEAT_EVERY, HEARTBEAT_EVERY);
        let mut last_heard = Instant::now();
        let ending = loop {
            tokio::select! {
                incoming = stream.next() => {
                    last_heard = Instant::now();
                    let text = match incoming {
                        Some(Ok(WsMessage::Text(text))) => text,
                        Some(Ok(WsMessage::Close(frame))) => break Ending::Dropped(format!("closed by wecom ({frame:?})")),
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => break Ending::Dropped(error.to_string()),
                        None => break Ending::Dropped("closed".to_owned()),
                    };
                    if let Some(ending) = self.on_frame(frames::parse(text.as_str())) {
                        break ending;
                    }
                }
                Some(frame) = outgoing.recv() => {
                    if let Err(error) = sink.send(WsMessage::Text(frame.into())).await {
                        break Ending::Dropped(error.to_string());
                    }
                }
                _ = heartbeat.tick() => {
                    if last_heard.elapsed() > SILENCE_LIMIT {
                        break Ending::Dropped(format!("nothing heard for {SILENCE_LIMIT:?}"));
                    }
                    if let Err(error) = sink.send(WsMessage::Text(frames::ping(&frames::request_id("ping")).into())).await {
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
            Frame::Message { req_id, body } => self.on_message(&req_id, &body),
            Frame::Event { req_id, body } => return self.on_event(&req_id, &body),
            Frame::Answer { req_id, errcode, errmsg } => self.link.answered(&req_id, errcode, &errmsg),
            Frame::Unknown => {}
        }
        None
    }

    /// Queues a user's message for the kernel unless it came before.
    fn on_message(&self, req_id: &str, body: &Value) {
        let message = match incoming::judge(req_id, body) {
            Verdict::Submit(message) => message,
            Verdict::Ignore(reason) => {
                eprintln!("callback {req_id} ignored: {reason}");
                return;
            }
        };
        match self.recent.arrived(&message.id, req_id) {
            Seen::New => {
                self.latest.note(&message.chat_id, req_id);
                if self.submissions.send(message).is_err() {
                    eprintln!("the submitter is gone; callback {req_id} is dropped");
                }
            }
            Seen::InFlight | Seen::Accepted => {
                eprintln!("message {} arrived again (callback {req_id}); it is answered once", message.id);
            }
        }
    }

    /// Welcomes a user who opened a chat; notes that WeCom moved the bot to another connection.
    fn on_event(&self, req_id: &str, body: &Value) -> Option<Ending> {
        match body["event"]["eventtype"].as_str().unwrap_or_default() {
            "enter_chat" if !self.config.welcome_message.is_empty() => {
                // Fire and forget: WeCom's answer is routed to nobody and dropped.
                if !self.link.send(frames::respond_welcome(req_id, &self.config.welcome_message)) {
                    eprintln!("cannot send the welcome message: no connection");
                }
                None
            }
            "disconnected_event" => Some(Ending::Replaced),
            _ => None,
        }
    }
}

/// Reads frames until WeCom answers the subscription `req_id`.
async fn subscribed(stream: &mut SplitStream<Socket>, req_id: &str) -> Result<(), ConnectError> {
    while let Some(incoming) = stream.next().await {
        let WsMessage::Text(text) = incoming? else { continue };
        if let Frame::Answer { req_id: answered, errcode, errmsg } = frames::parse(text.as_str())
            && answered == req_id
        {
            return if errcode == 0 { Ok(()) } else { Err(ConnectError::Refused { errcode, errmsg }) };
        }
    }
    Err(ConnectError::ClosedEarly)
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_double_up_to_a_minute() {
        let mut backoff = super::BACKOFF;
        assert_eq!((0..8).map(|_| backoff.next_wait().as_secs()).collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
