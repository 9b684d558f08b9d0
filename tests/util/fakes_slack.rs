//! A fake Slack for the Slack channel's tests: a Web API on 127.0.0.1 (`auth.test`,
//! `apps.connections.open`, `chat.postMessage`, `reactions.add`; other tokens than the fake's
//! get `invalid_auth`) that records every call, and
//! a Socket Mode WebSocket server that says hello, sends the envelopes a test injects (also as
//! redeliveries, or a `disconnect`), and records the acknowledgements it gets back.
//!
//! Both servers run on one thread with its own tokio runtime, like the scripted LLM, and stop
//! when the fake is dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's user id `auth.test` reports.
pub const BOT_USER: &str = "UBOT";
/// The team id the fake's envelopes carry.
pub const TEAM: &str = "T1";
/// The bot token the fake's config holds.
pub const BOT_TOKEN: &str = "xoxb-test-bot";
/// The app token the fake's config holds.
pub const APP_TOKEN: &str = "xapp-test-app";

/// One Web API request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// E.g. `chat.postMessage`.
    pub method: String,
    /// The `Authorization` header.
    pub authorization: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
}

/// A scripted answer to the next `chat.postMessage`.
#[derive(Debug, Clone, PartialEq)]
pub enum PostReply {
    /// HTTP 200 with `{"ok": false, "error": …}`.
    Error(String),
    /// HTTP 429 with this `Retry-After` (seconds).
    RateLimited(u64),
}

/// What the test asks of one WebSocket connection.
enum Command {
    Text(String),
    /// Drop the TCP connection without a closing handshake.
    Cut,
}

#[derive(Default)]
struct State {
    calls: Vec<ApiCall>,
    acks: Vec<String>,
    /// One queue per WebSocket connection that got its hello, oldest first.
    connections: Vec<UnboundedSender<Command>>,
    post_replies: VecDeque<PostReply>,
    posts_served: u32,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeSlack {
    http: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeSlack {
    /// Starts the Web API and the WebSocket server on free ports.
    pub fn start() -> FakeSlack {
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ws = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        ws.set_nonblocking(true).unwrap();
        let (http_addr, ws_addr) = (http.local_addr().unwrap(), ws.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-slack", move || async move {
            let http = TcpListener::from_std(http).unwrap();
            let ws = TcpListener::from_std(ws).unwrap();
            tokio::join!(serve_api(http, ws_addr, server_state.clone()), serve_sockets(ws, server_state));
        });
        FakeSlack { http: http_addr, state, _server: server }
    }

    /// The `apiBase` to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}/api", self.http)
    }

    /// A `channels.slack` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config =
            json!({"botToken": BOT_TOKEN, "appToken": APP_TOKEN, "apiBase": self.api_base(), "reactEmoji": ""});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` WebSocket connections have been greeted.
    pub async fn wait_connections(&self, count: usize) {
        self.wait_for(&format!("{count} socket mode connections"), |state| {
            (state.connections.len() >= count).then_some(())
        })
        .await;
    }

    /// Sends an Events API envelope carrying `event` on the newest connection.
    pub async fn deliver(&self, envelope_id: &str, event: Value, retry_attempt: u64) {
        self.wait_connections(1).await;
        self.send(Command::Text(envelope(envelope_id, event, retry_attempt).to_string()));
    }

    /// Sends an `interactive` envelope carrying `payload` (a `block_actions` from
    /// [`block_actions`]) on the newest connection, as Slack does when a button is pressed.
    pub async fn interact(&self, envelope_id: &str, payload: Value) {
        self.wait_connections(1).await;
        let frame = json!({"type": "interactive", "envelope_id": envelope_id, "accepts_response_payload": false, "payload": payload});
        self.send(Command::Text(frame.to_string()));
    }

    /// Asks the plugin for a new connection, as Slack does before recycling one.
    pub async fn disconnect(&self) {
        self.wait_connections(1).await;
        self.send(Command::Text(json!({"type": "disconnect", "reason": "refresh_requested"}).to_string()));
    }

    /// Drops the newest connection without a closing handshake.
    pub async fn cut_connection(&self) {
        self.wait_connections(1).await;
        self.send(Command::Cut);
    }

    fn send(&self, command: Command) {
        let state = self.state.lock().unwrap();
        let newest = state.connections.last().expect("no socket mode connection");
        assert!(newest.send(command).is_ok(), "the newest socket mode connection is closed");
    }

    /// The envelope ids acknowledged so far, in order.
    pub fn acks(&self) -> Vec<String> {
        self.state.lock().unwrap().acks.clone()
    }

    /// Waits until `envelope_id` has been acknowledged.
    pub async fn wait_ack(&self, envelope_id: &str) {
        self.wait_for(&format!("the ack of {envelope_id}"), |state| {
            state.acks.iter().any(|ack| ack == envelope_id).then_some(())
        })
        .await;
    }

    /// The calls of `method` so far.
    pub fn calls(&self, method: &str) -> Vec<ApiCall> {
        self.state.lock().unwrap().calls.iter().filter(|call| call.method == method).cloned().collect()
    }

    /// Waits until `method` was called `count` times; returns those calls.
    pub async fn wait_calls(&self, method: &str, count: usize) -> Vec<ApiCall> {
        self.wait_for(&format!("{count} calls of {method}"), |state| {
            let calls: Vec<ApiCall> = state.calls.iter().filter(|call| call.method == method).cloned().collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    /// Scripts the answer to the next `chat.postMessage` not yet scripted.
    pub fn push_post_reply(&self, reply: PostReply) {
        self.state.lock().unwrap().post_replies.push_back(reply);
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake slack: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// An Events API envelope; the event id is derived from the event's `ts`, so a redelivery of
/// the same event carries the same one.
pub fn envelope(envelope_id: &str, event: Value, retry_attempt: u64) -> Value {
    let event_id = format!("Ev{}", event["ts"].as_str().unwrap_or_default().replace('.', ""));
    json!({
        "type": "events_api", "envelope_id": envelope_id, "accepts_response_payload": false,
        "retry_attempt": retry_attempt, "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        "payload": {"token": "verification", "team_id": TEAM, "api_app_id": "A1", "type": "event_callback",
                    "event_id": event_id, "event_time": 1_700_000_000, "event": event},
    })
}

/// The `block_actions` interaction of `user` pressing the button with `value` under the bot's
/// message `message_ts` in `channel`.
pub fn block_actions(user: &str, channel: &str, message_ts: &str, value: &str) -> Value {
    json!({
        "type": "block_actions", "team": {"id": TEAM, "domain": "fake"}, "user": {"id": user, "team_id": TEAM},
        "api_app_id": "A1", "trigger_id": format!("trigger-{user}-{message_ts}"),
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false},
        "channel": {"id": channel, "name": "directmessage"},
        "message": {"type": "message", "ts": message_ts, "text": "Approval needed"},
        "actions": [{"type": "button", "action_id": "oxibot_approval_0", "block_id": "b1", "value": value,
                     "action_ts": "1700000100.000001", "text": {"type": "plain_text", "text": "Approve"}}]
    })
}

/// A direct message from `user` in the DM channel `channel`.
pub fn direct_message(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "channel_type": "im", "channel": channel, "user": user, "text": text, "ts": ts, "team": TEAM, "client_msg_id": format!("cm-{ts}")})
}

/// A message in the public channel `channel`.
pub fn channel_message(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "channel_type": "channel", "channel": channel, "user": user, "text": text, "ts": ts, "team": TEAM, "client_msg_id": format!("cm-{ts}")})
}

/// An `app_mention` in `channel` (Slack sends no `channel_type` with these).
pub fn app_mention(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts, "team": TEAM, "client_msg_id": format!("cm-{ts}")})
}

async fn serve_api(listener: TcpListener, ws_addr: SocketAddr, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(api_connection(socket, ws_addr, state.clone()));
    }
}

/// Answers requests on one keep-alive connection.
async fn api_connection(socket: TcpStream, ws_addr: SocketAddr, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(call) = read_call(&mut socket).await {
        let (status, headers, body) = answer(&call, ws_addr, &state);
        state.lock().unwrap().calls.push(call);
        let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
        let body = body.to_string();
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\n{extra}\r\n",
            body.len()
        );
        let written = socket.get_mut().write_all(format!("{head}{body}").as_bytes()).await;
        if written.is_err() {
            return;
        }
    }
}

async fn read_call(socket: &mut BufReader<TcpStream>) -> Option<ApiCall> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let (mut length, mut authorization) = (0, String::new());
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        match name.trim().to_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => authorization = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    let method = path.rsplit('/').next().unwrap_or_default().to_owned();
    Some(ApiCall { method, authorization, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

/// Status, extra headers and body for one call.
fn answer(call: &ApiCall, ws_addr: SocketAddr, state: &Mutex<State>) -> (u16, Vec<(&'static str, String)>, Value) {
    let token = if call.method == "apps.connections.open" { APP_TOKEN } else { BOT_TOKEN };
    if call.authorization != format!("Bearer {token}") {
        return (200, vec![], json!({"ok": false, "error": "invalid_auth"}));
    }
    match call.method.as_str() {
        "auth.test" => (
            200,
            vec![],
            json!({"ok": true, "url": "https://test.slack.com/", "team": "Test Team", "user": "oxibot", "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BBOT"}),
        ),
        "apps.connections.open" => {
            (200, vec![], json!({"ok": true, "url": format!("ws://{ws_addr}/link/?ticket=fake")}))
        }
        "chat.postMessage" => {
            let mut state = state.lock().unwrap();
            match state.post_replies.pop_front() {
                Some(PostReply::Error(error)) => (200, vec![], json!({"ok": false, "error": error})),
                Some(PostReply::RateLimited(seconds)) => {
                    (429, vec![("retry-after", seconds.to_string())], json!({"ok": false, "error": "ratelimited"}))
                }
                None => {
                    state.posts_served += 1;
                    let ts = format!("1700000100.{:06}", state.posts_served);
                    (
                        200,
                        vec![],
                        json!({"ok": true, "channel": call.body["channel"], "ts": ts, "message": {"text": call.body["text"], "ts": ts}}),
                    )
                }
            }
        }
        "reactions.add" => (200, vec![], json!({"ok": true})),
        _ => (200, vec![], json!({"ok": false, "error": "unknown_method"})),
    }
}

async fn serve_sockets(listener: TcpListener, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(socket_connection(socket, state.clone()));
    }
}

/// Greets one WebSocket client, forwards the test's frames to it and records its acks.
async fn socket_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(socket).await else { return };
    let hello = json!({"type": "hello", "num_connections": 1, "debug_info": {"host": "fake-slack"}});
    if socket.send(WsMessage::Text(hello.to_string().into())).await.is_err() {
        return;
    }
    let (commands, mut queue) = mpsc::unbounded_channel();
    state.lock().unwrap().connections.push(commands);
    loop {
        tokio::select! {
            command = queue.recv() => match command {
                Some(Command::Text(text)) => {
                    if socket.send(WsMessage::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Some(Command::Cut) | None => return,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(WsMessage::Text(text))) => {
                    let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    if let Some(envelope_id) = frame["envelope_id"].as_str() {
                        state.lock().unwrap().acks.push(envelope_id.to_owned());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}
