//! The gateway connection: an access token, the URL from `GET /gateway`, then the WebSocket:
//! Hello, Identify (or Resume with the session id and the last event handled), heartbeats at
//! the interval QQ gives, message events handed on (each message once), and a new connection
//! that resumes after a drop, a missed heartbeat answer or QQ's Reconnect.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_plugin::chat::{Backoff, RecentMessages, Seen};
use oxibot_plugin::{info, warn};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use crate::api::{Api, ApiError};
use crate::error::QqError;
use crate::incoming::{self, C2C_MESSAGE, GROUP_AT_MESSAGE, UserMessage};
use crate::payloads::{self, Payload};
use crate::replies::ChatKinds;
use crate::sequence::Sequence;

/// How long opening the WebSocket, and then QQ's Hello, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The shortest heartbeat interval honoured.
const MIN_HEARTBEAT: Duration = Duration::from_millis(20);
/// A connection that lasted this long worked: the next one starts over with short waits.
const STEADY: Duration = Duration::from_secs(10);
/// How long a closing handshake may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The waits between attempts to reach QQ: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::UP_TO_A_MINUTE;
/// Close codes after which the session cannot be resumed.
const SESSION_GONE: [u16; 3] = [4006, 4007, 4009];
/// Close codes that mean the bot may not connect at all (banned, offline, over its limits).
const FATAL: [u16; 4] = [4914, 4915, 4010, 4011];
/// The close code of an access token the gateway refused.
const BAD_TOKEN: u16 = 4004;

/// Everything the gateway side needs.
pub struct Listener {
    /// The API, for tokens and the gateway's URL.
    pub api: Api,
    /// Messages seen lately, with the events that brought them.
    pub recent: RecentMessages,
    /// Which events are handled.
    pub sequence: Sequence,
    /// Which chats are groups.
    pub kinds: ChatKinds,
    /// Messages for the kernel, in order.
    pub submissions: UnboundedSender<UserMessage>,
}

/// Why a connection ended.
#[derive(Debug)]
enum Ending {
    /// The connection broke or went silent: connect again and resume.
    Dropped(String),
    /// QQ asked for a new connection: connect again at once and resume.
    Reconnect,
    /// The session is gone: identify anew.
    SessionGone(String),
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("cannot connect the websocket: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("cannot connect to the qq gateway: no hello within {CONNECT_TIMEOUT:?}")]
    Timeout,
    #[error("the gateway closed the connection before its hello")]
    NoHello,
    #[error("the gateway refuses the bot: close code {0}, {1}")]
    Fatal(u16, String),
}

/// The session being resumed: its id, once READY gave it.
#[derive(Debug, Default)]
struct Session {
    id: Option<String>,
}

impl Listener {
    /// Keeps a gateway session up for good; returns only when QQ refuses the bot.
    pub async fn run(self) -> Result<(), QqError> {
        let mut backoff = BACKOFF;
        let mut session = Session::default();
        loop {
            let started = Instant::now();
            let outcome = self.connection(&mut session).await;
            let lasted = started.elapsed() >= STEADY;
            if lasted {
                backoff.reset();
            }
            match outcome {
                Ok(Ending::Reconnect) => {
                    info!("qq asked for a new connection; resuming");
                    // At once, unless QQ keeps asking: then with the usual waits.
                    if lasted {
                        continue;
                    }
                }
                Ok(Ending::Dropped(reason)) => warn!("the gateway connection dropped: {reason}"),
                Ok(Ending::SessionGone(reason)) => {
                    warn!("the gateway session is gone ({reason}); identifying anew");
                    session.id = None;
                    self.sequence.restart();
                }
                Err(ConnectError::Api(error)) if error.is_credentials_problem() => {
                    return Err(QqError::Credentials(error));
                }
                Err(ConnectError::Fatal(code, reason)) => return Err(QqError::Refused { code, reason }),
                Err(error) => warn!("{error}"),
            }
            let wait = backoff.next_wait();
            info!("connecting again in {wait:?}");
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs one connection until it ends.
    async fn connection(&self, session: &mut Session) -> Result<Ending, ConnectError> {
        let token = self.api.access_token().await?;
        let url = self.api.gateway_url().await?;
        let connecting = tokio_tungstenite::connect_async(url.as_str());
        let (socket, _) =
            tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| ConnectError::Timeout)??;
        let (mut sink, mut stream) = socket.split();
        let hello = async {
            while let Some(incoming) = stream.next().await {
                if let WsMessage::Text(text) = incoming?
                    && let Payload::Hello { heartbeat_interval } = payloads::parse(text.as_str())
                {
                    return Ok(heartbeat_interval);
                }
            }
            Err(ConnectError::NoHello)
        };
        let interval = tokio::time::timeout(CONNECT_TIMEOUT, hello).await.map_err(|_| ConnectError::Timeout)??;
        let interval = Duration::from_millis(interval).max(MIN_HEARTBEAT);
        let opening = match &session.id {
            Some(id) => payloads::resume(&token, id, self.sequence.handled_up_to().unwrap_or(0)),
            None => payloads::identify(&token),
        };
        sink.send(WsMessage::Text(opening.into())).await?;
        let mut heartbeat = tokio::time::interval_at(Instant::now() + interval, interval);
        let mut answered = true;
        let ending = loop {
            tokio::select! {
                incoming = stream.next() => {
                    let text = match incoming {
                        Some(Ok(WsMessage::Text(text))) => text,
                        Some(Ok(WsMessage::Close(frame))) => break self.closed(frame, &token).await?,
                        Some(Ok(_)) => continue,
                        Some(Err(error)) => break Ending::Dropped(error.to_string()),
                        None => break Ending::Dropped("closed".to_owned()),
                    };
                    match payloads::parse(text.as_str()) {
                        Payload::Dispatch { seq, event, data } => self.on_dispatch(seq, &event, &data, session),
                        Payload::HeartbeatAck => answered = true,
                        Payload::HeartbeatRequest => {
                            let beat = payloads::heartbeat(self.sequence.handled_up_to());
                            if let Err(error) = sink.send(WsMessage::Text(beat.into())).await {
                                break Ending::Dropped(error.to_string());
                            }
                        }
                        Payload::Reconnect => break Ending::Reconnect,
                        Payload::InvalidSession => break Ending::SessionGone("invalid session".to_owned()),
                        Payload::Hello { .. } | Payload::Unknown => {}
                    }
                }
                _ = heartbeat.tick() => {
                    if !answered {
                        break Ending::Dropped("the last heartbeat was not answered".to_owned());
                    }
                    answered = false;
                    let beat = payloads::heartbeat(self.sequence.handled_up_to());
                    if let Err(error) = sink.send(WsMessage::Text(beat.into())).await {
                        break Ending::Dropped(error.to_string());
                    }
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
        Ok(ending)
    }

    /// What a close frame from QQ means.
    async fn closed(&self, frame: Option<CloseFrame>, token: &str) -> Result<Ending, ConnectError> {
        let (code, reason) =
            frame.map_or((0, String::new()), |frame| (u16::from(frame.code), frame.reason.to_string()));
        match code {
            BAD_TOKEN => {
                self.api.forget_token(token).await;
                Ok(Ending::Dropped(format!("the gateway refused the access token ({reason})")))
            }
            code if SESSION_GONE.contains(&code) => Ok(Ending::SessionGone(format!("close code {code}, {reason}"))),
            code if FATAL.contains(&code) => Err(ConnectError::Fatal(code, reason)),
            code => Ok(Ending::Dropped(format!("closed by qq (code {code}, {reason})"))),
        }
    }

    /// Handles one event.
    fn on_dispatch(&self, seq: Option<u64>, event: &str, data: &Value, session: &mut Session) {
        if let Some(seq) = seq {
            self.sequence.seen(seq);
        }
        let handled = |sequence: &Sequence| {
            if let Some(seq) = seq {
                sequence.handled(seq);
            }
        };
        match event {
            "READY" => {
                session.id = data["session_id"].as_str().map(str::to_owned);
                let name = data["user"]["username"].as_str().unwrap_or_default();
                info!("connected to the qq gateway as {name} (session {:?})", session.id);
                handled(&self.sequence);
            }
            "RESUMED" => {
                info!("the qq gateway session is resumed");
                handled(&self.sequence);
            }
            C2C_MESSAGE | GROUP_AT_MESSAGE => match incoming::read(event, data) {
                Some(message) => self.on_message(message, seq),
                None => handled(&self.sequence),
            },
            _ => handled(&self.sequence),
        }
    }

    /// Queues a user's message for the kernel unless it came before.
    fn on_message(&self, message: UserMessage, seq: Option<u64>) {
        let delivery = seq.map(|seq| seq.to_string()).unwrap_or_default();
        match self.recent.arrived(&message.id, &delivery) {
            Seen::New => {
                self.kinds.note(&message.chat_id, message.is_group);
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; a message is dropped");
                }
            }
            Seen::InFlight => info!("message {} arrived again while being submitted", message.id),
            Seen::Accepted => {
                info!("message {} arrived again; the kernel has it already", message.id);
                if let Some(seq) = seq {
                    self.sequence.handled(seq);
                }
            }
        }
    }
}
