//! A fake WeCom for the WeCom channel's tests, speaking the AI bot long connection as WeCom
//! does, on 127.0.0.1: a WebSocket where the bot must first `aibot_subscribe` with its id and
//! secret; `ping`s, replies (`aibot_respond_msg`, `aibot_respond_welcome_msg`) and pushes
//! (`aibot_send_msg`) are answered with the command's `req_id` and an `errcode`. A reply is
//! refused (errcode 846605, as WeCom does) unless it answers a callback sent on the same
//! connection; a new subscription takes the bot over, so the older connection gets a
//! `disconnected_event` and is closed. A test pushes message and event callbacks on the newest
//! subscribed connection, cuts connections, and reads every frame the bot sent.
//!
//! The server runs on its own thread and tokio runtime and stops when the fake is dropped.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The AI bot's id.
pub const BOT_ID: &str = "aib-fake-bot";
/// Its long-connection secret.
pub const SECRET: &str = "fake-wecom-secret";
/// The errcode WeCom answers a reply to an unknown callback with.
pub const INVALID_REQ_ID: i64 = 846_605;

/// One frame the bot sent.
#[derive(Debug, Clone, PartialEq)]
pub struct BotFrame {
    /// Which connection it came on (0 for the first).
    pub connection: usize,
    /// `cmd`.
    pub cmd: String,
    /// `headers.req_id`.
    pub req_id: String,
    /// `body` (`null` when absent).
    pub body: Value,
    /// The errcode the fake answered with.
    pub errcode: i64,
}

impl BotFrame {
    /// `body.stream.content` of a stream reply.
    pub fn stream_content(&self) -> &str {
        self.body["stream"]["content"].as_str().unwrap_or_default()
    }

    /// `body.stream.finish` of a stream reply.
    pub fn finished(&self) -> bool {
        self.body["stream"]["finish"].as_bool().unwrap_or(false)
    }
}

/// What the test asks of one connection.
enum Command {
    Text(String),
    /// Drop the TCP connection without a closing handshake.
    Cut,
}

/// One subscribed connection.
struct Connection {
    commands: UnboundedSender<Command>,
    /// Callback request ids sent on it.
    callbacks: HashSet<String>,
    open: bool,
}

#[derive(Default)]
struct State {
    frames: Vec<BotFrame>,
    /// Subscribed connections, oldest first, by connection number.
    connections: Vec<Connection>,
    /// Errcodes for the next replies or pushes, in order.
    refusals: VecDeque<(i64, String)>,
}

/// The running fake. Dropping it stops the server.
pub struct FakeWeCom {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The server's thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeWeCom {
    /// Starts the long-connection server on a free port.
    pub fn start() -> FakeWeCom {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-wecom", move || async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(connection(socket, server_state.clone()));
            }
        });
        FakeWeCom { addr, state, _server: server }
    }

    /// A `channels.wecom` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({"botId": BOT_ID, "secret": SECRET, "wsUrl": format!("ws://{}", self.addr)});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` connections have subscribed.
    pub async fn wait_subscriptions(&self, count: usize) {
        self.wait_for(&format!("{count} subscriptions"), |state| (state.connections.len() >= count).then_some(()))
            .await;
    }

    /// Pushes a message callback with request id `req_id` on the newest subscribed connection.
    pub async fn deliver(&self, req_id: &str, body: Value) {
        self.push_callback("aibot_msg_callback", req_id, body).await;
    }

    /// Pushes the `enter_chat` event of user `user_id` with request id `req_id`.
    pub async fn enter_chat(&self, req_id: &str, user_id: &str) {
        let body = json!({"msgid": format!("ev-{req_id}"), "create_time": 1_700_000_000, "aibotid": BOT_ID,
                          "from": {"userid": user_id}, "msgtype": "event", "event": {"eventtype": "enter_chat"}});
        self.push_callback("aibot_event_callback", req_id, body).await;
    }

    async fn push_callback(&self, cmd: &str, req_id: &str, body: Value) {
        self.wait_subscriptions(1).await;
        let frame = json!({"cmd": cmd, "headers": {"req_id": req_id}, "body": body});
        let mut state = self.state.lock().unwrap();
        let newest = state.connections.iter_mut().rev().find(|connection| connection.open).expect("no open connection");
        newest.callbacks.insert(req_id.to_owned());
        assert!(newest.commands.send(Command::Text(frame.to_string())).is_ok(), "the newest connection is closed");
    }

    /// Drops the newest subscribed connection without a closing handshake.
    pub async fn cut_connection(&self) {
        self.wait_subscriptions(1).await;
        let state = self.state.lock().unwrap();
        let newest = state.connections.iter().rev().find(|connection| connection.open).expect("no open connection");
        let _ = newest.commands.send(Command::Cut);
    }

    /// Does what a subscription of the bot elsewhere does: every open connection gets a
    /// `disconnected_event` and is closed.
    pub async fn take_over_elsewhere(&self) {
        self.wait_subscriptions(1).await;
        take_over(&mut self.state.lock().unwrap());
    }

    /// Answers the next reply or push with `errcode` instead of success.
    pub fn refuse_next(&self, errcode: i64, errmsg: &str) {
        self.state.lock().unwrap().refusals.push_back((errcode, errmsg.to_owned()));
    }

    /// Every frame the bot sent with command `cmd`, in order.
    pub fn frames(&self, cmd: &str) -> Vec<BotFrame> {
        self.state.lock().unwrap().frames.iter().filter(|frame| frame.cmd == cmd).cloned().collect()
    }

    /// Waits until the bot sent `count` frames with command `cmd`; returns them.
    pub async fn wait_frames(&self, cmd: &str, count: usize) -> Vec<BotFrame> {
        self.wait_for(&format!("{count} {cmd} frames"), |state| {
            let frames: Vec<BotFrame> = state.frames.iter().filter(|frame| frame.cmd == cmd).cloned().collect();
            (frames.len() >= count).then_some(frames)
        })
        .await
    }

    /// Waits until the reply to callback `req_id` is finished; returns every reply frame to it.
    pub async fn wait_finished_reply(&self, req_id: &str) -> Vec<BotFrame> {
        self.wait_for(&format!("the finished reply to {req_id}"), |state| {
            let replies: Vec<BotFrame> = state
                .frames
                .iter()
                .filter(|frame| frame.cmd == "aibot_respond_msg" && frame.req_id == req_id)
                .cloned()
                .collect();
            replies.iter().any(|reply| reply.finished() && reply.errcode == 0).then_some(replies)
        })
        .await
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake wecom: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// The body of a text message to the bot in a one-to-one chat with `user_id`.
pub fn direct_text(msg_id: &str, user_id: &str, text: &str) -> Value {
    json!({"msgid": msg_id, "aibotid": BOT_ID, "chattype": "single", "from": {"userid": user_id},
           "msgtype": "text", "text": {"content": text}})
}

/// The body of a text message mentioning the bot in group `chat_id`.
pub fn group_text(msg_id: &str, chat_id: &str, user_id: &str, text: &str) -> Value {
    json!({"msgid": msg_id, "aibotid": BOT_ID, "chatid": chat_id, "chattype": "group", "from": {"userid": user_id},
           "msgtype": "text", "text": {"content": format!("@oxibot {text}")}})
}

/// Serves one WebSocket connection: the subscription first, then the test's callbacks out and
/// the bot's frames answered and recorded.
async fn connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(socket).await else { return };
    let (commands, mut queue) = mpsc::unbounded_channel();
    let mut commands = Some(commands);
    let mut number = None;
    loop {
        tokio::select! {
            command = queue.recv() => match command {
                Some(Command::Text(text)) => {
                    if socket.send(WsMessage::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Command::Cut) | None => break,
            },
            incoming = socket.next() => {
                let Some(Ok(message)) = incoming else { break };
                let WsMessage::Text(text) = message else { continue };
                let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                let answer = answer(&frame, &state, &mut number, &mut commands);
                if socket.send(WsMessage::Text(answer.to_string().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    if let Some(number) = number {
        state.lock().unwrap().connections[number].open = false;
    }
}

/// Records a frame of the bot and makes WeCom's answer to it.
fn answer(
    frame: &Value,
    state: &Mutex<State>,
    number: &mut Option<usize>,
    commands: &mut Option<UnboundedSender<Command>>,
) -> Value {
    let mut state = state.lock().unwrap();
    let cmd = frame["cmd"].as_str().unwrap_or_default().to_owned();
    let req_id = frame["headers"]["req_id"].as_str().unwrap_or_default().to_owned();
    let (errcode, errmsg) = match (cmd.as_str(), *number) {
        ("aibot_subscribe", None) => {
            if frame["body"]["bot_id"] == BOT_ID && frame["body"]["secret"] == SECRET {
                take_over(&mut state);
                let connection =
                    Connection { commands: commands.take().unwrap(), callbacks: HashSet::new(), open: true };
                state.connections.push(connection);
                *number = Some(state.connections.len() - 1);
                (0, "ok".to_owned())
            } else {
                (40_058, "invalid bot_id or secret".to_owned())
            }
        }
        (_, None) => (846_609, "not subscribed".to_owned()),
        ("ping", Some(_)) => (0, "ok".to_owned()),
        ("aibot_respond_msg" | "aibot_respond_welcome_msg", Some(n))
            if !state.connections[n].callbacks.contains(&req_id) =>
        {
            (INVALID_REQ_ID, "invalid req_id".to_owned())
        }
        ("aibot_respond_msg" | "aibot_respond_welcome_msg" | "aibot_send_msg", Some(_)) => {
            state.refusals.pop_front().unwrap_or((0, "ok".to_owned()))
        }
        (_, Some(_)) => (40_008, "unknown cmd".to_owned()),
    };
    let body = frame.get("body").cloned().unwrap_or(Value::Null);
    let connection = number.unwrap_or(usize::MAX);
    state.frames.push(BotFrame { connection, cmd, req_id: req_id.clone(), body, errcode });
    json!({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg})
}

/// A new subscription takes the bot over: older connections are told and closed.
fn take_over(state: &mut State) {
    for older in state.connections.iter_mut().filter(|connection| connection.open) {
        let event = json!({"cmd": "aibot_event_callback", "headers": {"req_id": "ev-disconnect"},
                           "body": {"msgtype": "event", "aibotid": BOT_ID, "event": {"eventtype": "disconnected_event"}}});
        let _ = older.commands.send(Command::Text(event.to_string()));
        let _ = older.commands.send(Command::Cut);
        older.open = false;
    }
}
