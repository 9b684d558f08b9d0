//! Stream Mode: register a connection for a ticket, open the WebSocket with it, answer pings,
//! hand robot messages on and acknowledge the rest, and connect again — with a fresh ticket —
//! when DingTalk says `disconnect` or the connection drops (with backoff).

use std::sync::Arc;
use std::time::Duration;

use oxibot_plugin::chat::socket::{self, CONNECT_TIMEOUT, Drive, Keepalive, Next, OpenError, reconnect};
use oxibot_plugin::chat::{AckLine, Backoff, RecentMessages, Seen};
use oxibot_plugin::info;
use oxibot_plugin::warn;
use serde_json::{Value, json};
use tokio::sync::mpsc::{self, UnboundedSender};

use crate::api::{ApiError, OpenApi, Recipient};
use crate::config::Config;
use crate::error::DingTalkError;
use crate::frames::{self, BOT_MESSAGE_TOPIC, Frame};
use crate::incoming::{self, UserMessage, Verdict};

/// A connection that lasted this long worked: the next one starts over with short waits, and a
/// `disconnect` is answered by connecting again at once.
const STEADY: Duration = Duration::from_secs(10);
/// The waits between attempts to reach DingTalk: 1 s, 2 s, 4 s, … up to 60 s.
pub const BACKOFF: Backoff = Backoff::UP_TO_A_MINUTE;
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
    #[error(transparent)]
    Socket(#[from] OpenError),
}

impl Listener {
    /// Keeps a Stream connection up for good; returns only when DingTalk refuses the app's
    /// credentials.
    pub async fn run(self) -> Result<(), DingTalkError> {
        reconnect(BACKOFF, STEADY, || async {
            match self.connection().await {
                Ok(Ending::Refresh(reason)) => Next::Refresh(format!("dingtalk asked for a new connection ({reason})")),
                Ok(Ending::Dropped(reason)) => Next::Retry(format!("the stream connection dropped: {reason}")),
                Err(ConnectError::Register(error)) if error.is_credentials_problem() => {
                    Next::Stop(Err(DingTalkError::Credentials(error)))
                }
                Err(error) => Next::Retry(error.to_string()),
            }
        })
        .await
    }

    /// Runs one connection until it ends.
    async fn connection(&self) -> Result<Ending, ConnectError> {
        let ticket = self.api.open_connection().await.map_err(ConnectError::Register)?;
        let url = ticket.url().map_err(ConnectError::Register)?;
        let socket = socket::open(url.as_str(), CONNECT_TIMEOUT).await?;
        info!("stream connection open ({})", ticket.endpoint);
        let (answers, mut outgoing) = mpsc::unbounded_channel::<String>();
        self.acks.attach(answers.clone());
        let options =
            Drive { service: "dingtalk", keepalive: Keepalive::DEFAULT, outgoing: Some(&mut outgoing), ping: None };
        let ending = socket::drive(socket, options, |text| self.on_frame(frames::parse(text), &answers)).await;
        Ok(ending.unwrap_or_else(Ending::Dropped))
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
                    info!("private chats are disabled; telling {user} to write in a group");
                    tokio::spawn(notify_private_chat_disabled(self.api.clone(), user));
                }
                self.recent.accepted(&id);
                let _ = answers.send(frames::ack(frame_id));
                return;
            }
            Verdict::Ignore(reason) => {
                info!("callback {frame_id} ignored: {reason}");
                let _ = answers.send(frames::ack(frame_id));
                return;
            }
        };
        match self.recent.arrived(&message.id, frame_id) {
            Seen::New => {
                if self.submissions.send(message).is_err() {
                    warn!("the submitter is gone; callback {frame_id} stays unacknowledged");
                }
            }
            Seen::InFlight => {
                info!("message {} arrived again while being submitted; acknowledged with the first", message.id)
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
        warn!("cannot send the private chat notice: {error}");
    }
}
