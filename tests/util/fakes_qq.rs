//! A fake QQ bot platform for the QQ channel's tests, speaking QQ's wire formats on 127.0.0.1:
//!
//! - HTTP: `POST /app/getAppAccessToken` (a token for `appId`/`clientSecret`, its lifetime a
//!   string as QQ writes it), `GET /gateway` (the WebSocket URL), `POST
//!   /v2/users/{openid}/messages` and `POST /v2/groups/{group_openid}/messages` (a token in
//!   `Authorization: QQBot …` required; a passive reply must name a message the fake sent, and a
//!   `msg_seq` used for that message before is refused as QQ does, code 40054005), and
//!   `GET /files/{name}` for attachments; every request is recorded;
//! - the gateway WebSocket: Hello with a heartbeat interval, Identify (a valid token, else close
//!   4004) answered with READY and a new session, Resume answered with the session's events
//!   after the given sequence number and RESUMED (or Invalid Session), heartbeats answered with
//!   ACKs. A test dispatches events into the current session (kept for a Resume even while no
//!   connection is open), cuts connections, or asks for a reconnect.
//!
//! Both servers run on one thread with its own tokio runtime and stop when the fake is dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's app id.
pub const APP_ID: &str = "102030405";
/// Its app secret.
pub const SECRET: &str = "fake-qq-secret";
/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/app/getAppAccessToken";
/// The code QQ refuses a reused `msg_seq` with.
pub const DUPLICATE_SEQ: i64 = 40_054_005;

/// One HTTP request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// `POST` or `GET`.
    pub method: String,
    /// E.g. `/v2/users/U1/messages`.
    pub path: String,
    /// The `Authorization` header (empty when absent).
    pub authorization: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
    /// The HTTP status the fake answered with.
    pub status: u16,
}

impl ApiCall {
    /// The text of a message send: `content`, or `markdown.content`.
    pub fn text(&self) -> &str {
        self.body["content"].as_str().or_else(|| self.body["markdown"]["content"].as_str()).unwrap_or_default()
    }
}

/// One payload the bot sent on the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct BotPayload {
    /// Which connection it came on (0 for the first).
    pub connection: usize,
    /// `op`.
    pub op: u64,
    /// `d`.
    pub data: Value,
}

/// What the test asks of one connection.
enum Command {
    Text(String),
    Cut,
}

/// A session's events, for replays.
#[derive(Default)]
struct Session {
    events: Vec<(u64, String, Value)>,
}

#[derive(Default)]
struct State {
    calls: Vec<ApiCall>,
    payloads: Vec<BotPayload>,
    connections: Vec<UnboundedSender<Command>>,
    /// Connection number → the session it serves.
    serving: HashMap<usize, String>,
    sessions: HashMap<String, Session>,
    current_session: Option<String>,
    /// How many READY and RESUMED were sent.
    readies: usize,
    tokens: HashSet<String>,
    tokens_issued: u32,
    /// Message ids dispatched, which passive replies may name.
    messages: HashSet<String>,
    /// `(msg_id, msg_seq)` pairs used.
    seqs_used: HashSet<(String, u64)>,
    refusals: VecDeque<(u16, i64, String)>,
    files: HashMap<String, Vec<u8>>,
    sends: u32,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeQq {
    http: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeQq {
    /// Starts the fake with QQ's usual heartbeat interval (41.25 s).
    pub fn start() -> FakeQq {
        FakeQq::with_heartbeat(41_250)
    }

    /// Starts the fake asking for a heartbeat every `interval_ms` milliseconds.
    pub fn with_heartbeat(interval_ms: u64) -> FakeQq {
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ws = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        ws.set_nonblocking(true).unwrap();
        let (http_addr, ws_addr) = (http.local_addr().unwrap(), ws.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-qq", move || async move {
            let http = TcpListener::from_std(http).unwrap();
            let ws = TcpListener::from_std(ws).unwrap();
            tokio::join!(serve_api(http, ws_addr, server_state.clone()), serve_gateway(ws, interval_ms, server_state));
        });
        FakeQq { http: http_addr, state, _server: server }
    }

    /// A `channels.qq` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let base = format!("http://{}", self.http);
        let mut config =
            json!({"appId": APP_ID, "secret": SECRET, "apiBase": base, "tokenUrl": format!("{base}{TOKEN_PATH}")});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// The URL of a file served as `name`.
    pub fn file_url(&self, name: &str) -> String {
        format!("http://{}/files/{name}", self.http)
    }

    /// Serves `bytes` as `/files/{name}`.
    pub fn add_file(&self, name: &str, bytes: &[u8]) {
        self.state.lock().unwrap().files.insert(name.to_owned(), bytes.to_vec());
    }

    /// Waits until the bot sent `count` payloads with op `op`; returns them.
    pub async fn wait_payloads(&self, op: u64, count: usize) -> Vec<BotPayload> {
        self.wait_for(&format!("{count} payloads with op {op}"), |state| {
            let found: Vec<BotPayload> = state.payloads.iter().filter(|payload| payload.op == op).cloned().collect();
            (found.len() >= count).then_some(found)
        })
        .await
    }

    /// Waits until a heartbeat carrying `seq` arrives.
    pub async fn wait_heartbeat(&self, seq: Value) {
        self.wait_for(&format!("a heartbeat with {seq}"), |state| {
            state.payloads.iter().any(|payload| payload.op == 1 && payload.data == seq).then_some(())
        })
        .await;
    }

    /// Waits until `count` sessions have been identified or resumed (READY or RESUMED sent).
    pub async fn wait_ready(&self, count: usize) {
        self.wait_for(&format!("{count} ready connections"), |state| (state.readies >= count).then_some(())).await;
    }

    /// Dispatches event `event` with data `data` into the current session (sent at once when a
    /// connection serves it, else kept for a Resume); returns its sequence number.
    pub async fn dispatch(&self, event: &str, data: Value) -> u64 {
        self.wait_ready(1).await;
        let mut state = self.state.lock().unwrap();
        if let Some(id) = data["id"].as_str() {
            state.messages.insert(id.to_owned());
        }
        let session_id = state.current_session.clone().unwrap();
        let seq = state.sessions[&session_id].events.last().map_or(1, |(seq, _, _)| seq + 1);
        state.sessions.get_mut(&session_id).unwrap().events.push((seq, event.to_owned(), data.clone()));
        let frame = json!({"op": 0, "s": seq, "t": event, "d": data, "id": format!("{event}:{seq}")}).to_string();
        let open = state.serving.iter().filter(|(_, session)| **session == session_id).map(|(n, _)| *n).max();
        if let Some(connection) = open {
            let _ = state.connections[connection].send(Command::Text(frame));
        }
        seq
    }

    /// Drops every connection without a closing handshake.
    pub fn cut_connections(&self) {
        let mut state = self.state.lock().unwrap();
        for connection in &state.connections {
            let _ = connection.send(Command::Cut);
        }
        state.serving.retain(|_, _| false);
    }

    /// Sends Reconnect (op 7) on the newest connection.
    pub fn ask_to_reconnect(&self) {
        let state = self.state.lock().unwrap();
        let _ = state.connections.last().unwrap().send(Command::Text(json!({"op": 7}).to_string()));
    }

    /// Forgets every session, so a Resume is answered with Invalid Session.
    pub fn forget_sessions(&self) {
        self.state.lock().unwrap().sessions.clear();
    }

    /// Answers the next message send with `status` and `{"code": code, "message": message}`.
    pub fn refuse_next_send(&self, status: u16, code: i64, message: &str) {
        self.state.lock().unwrap().refusals.push_back((status, code, message.to_owned()));
    }

    /// Every payload the bot sent with op `op`.
    pub fn payloads(&self, op: u64) -> Vec<BotPayload> {
        self.state.lock().unwrap().payloads.iter().filter(|payload| payload.op == op).cloned().collect()
    }

    /// The calls to `path` so far.
    pub fn calls(&self, path: &str) -> Vec<ApiCall> {
        self.state.lock().unwrap().calls.iter().filter(|call| call.path == path).cloned().collect()
    }

    /// Waits until `path` was called successfully `count` times; returns those calls.
    pub async fn wait_sends(&self, path: &str, count: usize) -> Vec<ApiCall> {
        self.wait_for(&format!("{count} successful calls of {path}"), |state| {
            let calls: Vec<ApiCall> =
                state.calls.iter().filter(|call| call.path == path && call.status == 200).cloned().collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake qq: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// The path replies to user `openid` are posted to.
pub fn user_messages(openid: &str) -> String {
    format!("/v2/users/{openid}/messages")
}

/// The path replies to group `openid` are posted to.
pub fn group_messages(openid: &str) -> String {
    format!("/v2/groups/{openid}/messages")
}

/// The data of a `C2C_MESSAGE_CREATE`: `text` from user `openid`.
pub fn c2c_message(id: &str, openid: &str, text: &str) -> Value {
    json!({"id": id, "content": text, "timestamp": "2026-11-24T08:00:00+08:00",
           "author": {"id": openid, "user_openid": openid, "union_openid": format!("union-{openid}")},
           "message_scene": {"source": "default"}})
}

/// The data of a `GROUP_AT_MESSAGE_CREATE`: `text` mentioning the bot in group `group`.
pub fn group_message(id: &str, group: &str, member: &str, text: &str) -> Value {
    // QQ takes the mention of the bot out and leaves the space after it.
    json!({"id": id, "content": format!(" {text}"), "timestamp": "2026-11-24T08:00:00+08:00",
           "group_id": group, "group_openid": group, "author": {"id": member, "member_openid": member}})
}

async fn serve_api(listener: TcpListener, ws: SocketAddr, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(api_connection(socket, ws, state.clone()));
    }
}

/// Answers requests on one keep-alive connection.
async fn api_connection(socket: TcpStream, ws: SocketAddr, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(mut call) = read_call(&mut socket).await {
        let (status, content_type, body) = answer(&call, ws, &state);
        call.status = status;
        state.lock().unwrap().calls.push(call);
        let head =
            format!("HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n", body.len());
        let mut response = head.into_bytes();
        response.extend_from_slice(&body);
        if socket.get_mut().write_all(&response).await.is_err() {
            return;
        }
    }
}

async fn read_call(socket: &mut BufReader<TcpStream>) -> Option<ApiCall> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_owned(), words.next()?.to_owned());
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
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(ApiCall { method, path, authorization, body, status: 0 })
}

fn json_answer(status: u16, body: Value) -> (u16, &'static str, Vec<u8>) {
    (status, "application/json", body.to_string().into_bytes())
}

fn error_answer(status: u16, code: i64, message: &str) -> (u16, &'static str, Vec<u8>) {
    json_answer(status, json!({"code": code, "message": message, "err_code": code, "trace_id": "trace-fake"}))
}

/// Status, content type and body for one call.
fn answer(call: &ApiCall, ws: SocketAddr, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    let mut state = state.lock().unwrap();
    if call.method == "GET"
        && let Some(name) = call.path.strip_prefix("/files/")
    {
        return match state.files.get(name) {
            Some(bytes) => (200, "application/octet-stream", bytes.clone()),
            None => (404, "text/plain", b"not found".to_vec()),
        };
    }
    if call.path == TOKEN_PATH {
        if call.body["appId"] != APP_ID || call.body["clientSecret"] != SECRET {
            return error_answer(401, 100_016, "invalid appid or secret");
        }
        state.tokens_issued += 1;
        let token = format!("token-{}", state.tokens_issued);
        state.tokens.insert(token.clone());
        return json_answer(200, json!({"access_token": token, "expires_in": "7200"}));
    }
    let token_ok = call.authorization.strip_prefix("QQBot ").is_some_and(|token| state.tokens.contains(token));
    if !token_ok {
        return error_answer(401, 11_244, "token not exist or expire");
    }
    if call.method == "GET" && call.path == "/gateway" {
        return json_answer(200, json!({"url": format!("ws://{ws}/websocket")}));
    }
    let is_send = call.method == "POST"
        && call.path.ends_with("/messages")
        && (call.path.starts_with("/v2/users/") || call.path.starts_with("/v2/groups/"));
    if !is_send {
        return error_answer(404, 404, "no such api");
    }
    send_answer(call, &mut state)
}

/// Checks a message send as QQ does.
fn send_answer(call: &ApiCall, state: &mut State) -> (u16, &'static str, Vec<u8>) {
    let body = &call.body;
    let text_ok = match body["msg_type"].as_u64() {
        Some(0) => body["content"].as_str().is_some_and(|text| !text.is_empty()),
        Some(2) => body["markdown"]["content"].as_str().is_some_and(|text| !text.is_empty()),
        _ => false,
    };
    let Some(seq) = body["msg_seq"].as_u64().filter(|_| text_ok) else {
        return error_answer(400, 40_034_001, "invalid msg_type, content or msg_seq");
    };
    if let Some(msg_id) = body["msg_id"].as_str() {
        if !state.messages.contains(msg_id) {
            return error_answer(400, 40_034_024, "msg_id invalid");
        }
        if !state.seqs_used.insert((msg_id.to_owned(), seq)) {
            return error_answer(400, DUPLICATE_SEQ, "消息被去重，请检查请求msgseq");
        }
    }
    if let Some((status, code, message)) = state.refusals.pop_front() {
        return error_answer(status, code, &message);
    }
    state.sends += 1;
    json_answer(200, json!({"id": format!("reply-{}", state.sends), "timestamp": "2026-11-24T08:00:01+08:00"}))
}

async fn serve_gateway(listener: TcpListener, interval_ms: u64, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(gateway_connection(socket, interval_ms, state.clone()));
    }
}

/// Serves one gateway connection.
async fn gateway_connection(socket: TcpStream, interval_ms: u64, state: Arc<Mutex<State>>) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(socket).await else { return };
    let (commands, mut queue) = mpsc::unbounded_channel();
    let number = {
        let mut state = state.lock().unwrap();
        state.connections.push(commands);
        state.connections.len() - 1
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval_ms}});
    if socket.send(WsMessage::Text(hello.to_string().into())).await.is_err() {
        return;
    }
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
                let Some(Ok(WsMessage::Text(text))) = incoming else { break };
                let payload: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                let replies = respond(&payload, number, &state);
                for reply in replies {
                    let message = match reply {
                        Reply::Text(text) => WsMessage::Text(text.into()),
                        Reply::Close(code, reason) => {
                            WsMessage::Close(Some(CloseFrame { code: CloseCode::from(code), reason: reason.into() }))
                        }
                    };
                    if socket.send(message).await.is_err() {
                        break;
                    }
                }
            }
        }
    }
    state.lock().unwrap().serving.remove(&number);
}

/// What the gateway sends back.
enum Reply {
    Text(String),
    Close(u16, &'static str),
}

/// Records a payload of the bot and makes the gateway's answers to it.
fn respond(payload: &Value, connection: usize, state: &Mutex<State>) -> Vec<Reply> {
    let mut state = state.lock().unwrap();
    let op = payload["op"].as_u64().unwrap_or(u64::MAX);
    let data = payload.get("d").cloned().unwrap_or(Value::Null);
    state.payloads.push(BotPayload { connection, op, data: data.clone() });
    let token_ok = data["token"]
        .as_str()
        .and_then(|token| token.strip_prefix("QQBot "))
        .is_some_and(|token| state.tokens.contains(token));
    match op {
        1 => vec![Reply::Text(json!({"op": 11}).to_string())],
        2 if !token_ok => vec![Reply::Close(4004, "invalid token")],
        2 => {
            let session_id = format!("session-{}", state.sessions.len() + 1);
            let ready = json!({"version": 1, "session_id": session_id, "shard": [0, 1],
                               "user": {"id": "bot-1", "username": "oxibot-test", "bot": true}});
            state.sessions.insert(session_id.clone(), Session { events: vec![(1, "READY".into(), ready.clone())] });
            state.current_session = Some(session_id.clone());
            state.serving.insert(connection, session_id);
            state.readies += 1;
            vec![Reply::Text(json!({"op": 0, "s": 1, "t": "READY", "d": ready}).to_string())]
        }
        6 if !token_ok => vec![Reply::Close(4004, "invalid token")],
        6 => {
            let session_id = data["session_id"].as_str().unwrap_or_default().to_owned();
            let after = data["seq"].as_u64().unwrap_or(0);
            let Some(session) = state.sessions.get_mut(&session_id) else {
                return vec![Reply::Text(json!({"op": 9, "d": false}).to_string())];
            };
            let mut replies: Vec<Reply> = session
                .events
                .iter()
                .filter(|(seq, _, _)| *seq > after)
                .map(|(seq, event, data)| Reply::Text(json!({"op": 0, "s": seq, "t": event, "d": data}).to_string()))
                .collect();
            let seq = session.events.last().map_or(1, |(seq, _, _)| seq + 1);
            session.events.push((seq, "RESUMED".into(), json!("")));
            replies.push(Reply::Text(json!({"op": 0, "s": seq, "t": "RESUMED", "d": ""}).to_string()));
            state.current_session = Some(session_id.clone());
            state.serving.insert(connection, session_id);
            state.readies += 1;
            replies
        }
        _ => vec![],
    }
}
