//! The long connection: open the WebSocket, subscribe the bot, send heartbeats, hand users'
//! messages on (each `msgid` once), welcome users who open a chat, and connect again with
//! backoff when the connection drops; when another connection takes the bot over, stop.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::socket::{self, CONNECT_TIMEOUT, Drive, Keepalive, Next, OpenError, WebSocket, reconnect};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use oxibot_plugin::info;
use oxibot_plugin::warn;
use serde_json::Value;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::chats::LatestCallbacks;
use crate::config::Config;
use crate::error::WeComError;
use crate::frames::{self, Frame};
use crate::incoming::{self, UserMessage, Verdict};
use crate::link::Link;

/// The heartbeat goes out every 30 s (as WeCom's SDKs send it); a connection silent for 90 s
/// (not even a heartbeat answer) is considered dead.
const HEARTBEAT: Keepalive = Keepalive::DEFAULT;
/// A connection that lasted this long worked: the next one starts over with short waits.
const STEADY: Duration = Duration::from_secs(10);
/// The waits between attempts to reach WeCom: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::UP_TO_A_MINUTE;

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
    #[error(transparent)]
    Socket(#[from] OpenError),
    #[error("cannot subscribe: {0}")]
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
        reconnect(BACKOFF, STEADY, || async {
            let outcome = self.connection().await;
            self.link.detach();
            match outcome {
                Ok(Ending::Dropped(reason)) => Next::Retry(format!("the wecom connection dropped: {reason}")),
                // Connecting again would take the bot back from whoever has it now, who would
                // take it back in turn; the channel stops and the kernel decides (it gives up
                // after a few quick restarts).
                Ok(Ending::Replaced) => Next::Stop(Err(WeComError::TakenOver)),
                Err(ConnectError::Refused { errcode, errmsg }) => {
                    Next::Stop(Err(WeComError::Credentials { errcode, errmsg }))
                }
                Err(error) => Next::Retry(error.to_string()),
            }
        })
        .await
    }

    /// Runs one connection until it ends.
    async fn connection(&self) -> Result<Ending, ConnectError> {
        let mut socket = socket::open(&self.config.ws_url, CONNECT_TIMEOUT).await?;
        let req_id = frames::request_id("aibot_subscribe");
        let subscribe = frames::subscribe(&req_id, &self.config.bot_id, &self.config.secret);
        socket.send(WsMessage::Text(subscribe.into())).await?;
        tokio::time::timeout(CONNECT_TIMEOUT, subscribed(&mut socket, &req_id))
            .await
            .map_err(|_| ConnectError::Timeout)??;
        info!("subscribed to wecom as bot {}", self.config.bot_id);
        let (frames_out, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.link.attach(frames_out);
        let ping = || frames::ping(&frames::request_id("ping"));
        let options =
            Drive { service: "wecom", keepalive: HEARTBEAT, outgoing: Some(&mut outgoing), ping: Some(&ping) };
        let ending = socket::drive(socket, options, |text| self.on_frame(frames::parse(text))).await;
        Ok(ending.unwrap_or_else(Ending::Dropped))
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
                info!("callback {req_id} ignored: {reason}");
                return;
            }
        };
        match self.recent.arrived(&message.id, req_id) {
            Seen::New => {
                self.latest.note(&message.chat_id, req_id);
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; callback {req_id} is dropped");
                }
            }
            Seen::InFlight | Seen::Accepted => {
                info!("message {} arrived again (callback {req_id}); it is answered once", message.id);
            }
        }
    }

    /// Welcomes a user who opened a chat; notes that WeCom moved the bot to another connection.
    fn on_event(&self, req_id: &str, body: &Value) -> Option<Ending> {
        match body["event"]["eventtype"].as_str().unwrap_or_default() {
            "enter_chat" if !self.config.welcome_message.is_empty() => {
                // Fire and forget: WeCom's answer is routed to nobody and dropped.
                if !self.link.send(frames::respond_welcome(req_id, &self.config.welcome_message)) {
                    warn!("cannot send the welcome message: no connection");
                }
                None
            }
            "disconnected_event" => Some(Ending::Replaced),
            _ => None,
        }
    }
}

/// Reads frames until WeCom answers the subscription `req_id`.
async fn subscribed(stream: &mut WebSocket, req_id: &str) -> Result<(), ConnectError> {
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
