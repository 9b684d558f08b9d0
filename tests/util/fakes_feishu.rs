//! A fake Feishu for the Feishu channel's tests, speaking the event long connection and the
//! open API as Feishu does, on 127.0.0.1:
//!
//! - the open API: `POST /callback/ws/endpoint` (a WebSocket URL with a single-use ticket and
//!   a `service_id`, for the app's `AppID`/`AppSecret`), the tenant access token, `bot/v3/info`,
//!   and the message calls a bot makes — create, reply, update (`PATCH`), reactions and
//!   resources — each wanting `Authorization: Bearer <token>`; every request is recorded;
//! - the long connection: binary WebSocket messages holding protobuf `pbbp2.Frame`s (encoded
//!   and decoded here, independently of the channel's codec); a test pushes event frames
//!   (whole or in pieces) or cuts the connection; pings are answered with a pong carrying the
//!   client settings, and every frame the client sends is recorded.
//!
//! Both servers run on one thread with its own tokio runtime, like the scripted LLM, and stop
//! when the fake is dropped.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The app's id.
pub const APP_ID: &str = "cli_fake_app";
/// The app's secret.
pub const APP_SECRET: &str = "fake-app-secret";
/// The bot's open id, as `bot/v3/info` reports it.
pub const BOT_OPEN_ID: &str = "ou_fake_bot";
/// The `service_id` in every endpoint URL, which pings must carry.
pub const SERVICE_ID: i32 = 33;
/// Creating a message.
pub const MESSAGES: &str = "/open-apis/im/v1/messages";
/// Getting a tenant access token.
pub const TENANT_TOKEN: &str = "/open-apis/auth/v3/tenant_access_token/internal";
/// Getting a long connection endpoint.
pub const ENDPOINT: &str = "/callback/ws/endpoint";

/// One open API request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// `GET`, `POST` or `PATCH`.
    pub method: String,
    /// The path without the query, e.g. `/open-apis/im/v1/messages/om_1/reply`.
    pub path: String,
    /// The query, e.g. `receive_id_type=open_id`.
    pub query: String,
    /// The `Authorization` header (empty when absent).
    pub authorization: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
}

impl ApiCall {
    /// The Markdown of the card a create, reply or update call carries.
    pub fn card_markdown(&self) -> String {
        let card: Value = serde_json::from_str(self.body["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
        card["elements"][0]["content"].as_str().unwrap_or_default().to_owned()
    }
}

/// A protobuf frame, as the fake reads and writes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frame {
    pub seq_id: u64,
    pub log_id: u64,
    pub service: i32,
    pub method: i32,
    pub headers: Vec<(String, String)>,
    pub payload: Option<Vec<u8>>,
}

impl Frame {
    /// The value of header `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|(name, _)| name == key).map(|(_, value)| value.as_str())
    }

    /// The payload as JSON (`null` when there is none or it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(self.payload.as_deref().unwrap_or_default()).unwrap_or(Value::Null)
    }
}

/// One frame the client sent, with the connection it came on (0 for the first).
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub connection: usize,
    pub frame: Frame,
}

/// What the test asks of one WebSocket connection.
enum Command {
    Frame(Vec<u8>),
    /// Drop the TCP connection without a closing handshake.
    Cut,
}

#[derive(Default)]
struct State {
    calls: Vec<ApiCall>,
    sent: Vec<Sent>,
    connections: Vec<UnboundedSender<Command>>,
    tickets: HashSet<String>,
    tickets_issued: u32,
    tokens: HashSet<String>,
    tokens_issued: u32,
    messages_created: u32,
    /// Resource key → its bytes.
    files: HashMap<String, Vec<u8>>,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeFeishu {
    http: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeFeishu {
    /// Starts the open API and the long connection server on free ports.
    pub fn start() -> FakeFeishu {
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ws = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        ws.set_nonblocking(true).unwrap();
        let (http_addr, ws_addr) = (http.local_addr().unwrap(), ws.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-feishu", move || async move {
            let http = TcpListener::from_std(http).unwrap();
            let ws = TcpListener::from_std(ws).unwrap();
            tokio::join!(serve_api(http, ws_addr, server_state.clone()), serve_long_connection(ws, server_state));
        });
        FakeFeishu { http: http_addr, state, _server: server }
    }

    /// The `apiBase` to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.http)
    }

    /// A `channels.feishu` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config =
            json!({"appId": APP_ID, "appSecret": APP_SECRET, "apiBase": self.api_base(), "reactEmoji": ""});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` long connections have been opened.
    pub async fn wait_connections(&self, count: usize) {
        self.wait_for(&format!("{count} long connections"), |state| (state.connections.len() >= count).then_some(()))
            .await;
    }

    /// Pushes `event` in a data frame with frame message id `frame_id` on the newest
    /// connection.
    pub async fn push_event(&self, frame_id: &str, event: &Value) {
        self.push_event_in_pieces(frame_id, event, 1).await;
    }

    /// Pushes `event` cut into `pieces` data frames, the last piece first.
    pub async fn push_event_in_pieces(&self, frame_id: &str, event: &Value, pieces: usize) {
        let payload = event.to_string().into_bytes();
        let size = payload.len().div_ceil(pieces);
        let chunks: Vec<&[u8]> = payload.chunks(size).collect();
        self.wait_connections(1).await;
        for (seq, chunk) in chunks.iter().enumerate().rev() {
            let frame = Frame {
                seq_id: seq as u64 + 1,
                log_id: 7,
                service: SERVICE_ID,
                method: 1,
                headers: vec![
                    ("type".into(), "event".into()),
                    ("message_id".into(), frame_id.into()),
                    ("sum".into(), chunks.len().to_string()),
                    ("seq".into(), seq.to_string()),
                    ("trace_id".into(), format!("trace-{frame_id}")),
                ],
                payload: Some(chunk.to_vec()),
            };
            self.send(Command::Frame(encode(&frame)));
        }
    }

    /// Drops the newest connection without a closing handshake.
    pub async fn cut_connection(&self) {
        self.wait_connections(1).await;
        self.send(Command::Cut);
    }

    fn send(&self, command: Command) {
        let state = self.state.lock().unwrap();
        let newest = state.connections.last().expect("no long connection");
        assert!(newest.send(command).is_ok(), "the newest long connection is closed");
    }

    /// Every frame the client sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.state.lock().unwrap().sent.clone()
    }

    /// The frame message ids the client answered (data frames sent back), in order.
    pub fn answered(&self) -> Vec<String> {
        self.sent()
            .into_iter()
            .filter(|sent| sent.frame.method == 1)
            .map(|sent| sent.frame.header("message_id").unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until the data frame `frame_id` has been answered; returns the answer.
    pub async fn wait_answer(&self, frame_id: &str) -> Sent {
        self.wait_for(&format!("the answer to {frame_id}"), |state| {
            state
                .sent
                .iter()
                .find(|sent| sent.frame.method == 1 && sent.frame.header("message_id") == Some(frame_id))
                .cloned()
        })
        .await
    }

    /// Waits until the client has sent `count` pings; returns them.
    pub async fn wait_pings(&self, count: usize) -> Vec<Sent> {
        self.wait_for(&format!("{count} pings"), |state| {
            let pings: Vec<Sent> = state
                .sent
                .iter()
                .filter(|sent| sent.frame.method == 0 && sent.frame.header("type") == Some("ping"))
                .cloned()
                .collect();
            (pings.len() >= count).then_some(pings)
        })
        .await
    }

    /// The calls to `path` (without query) so far.
    pub fn calls(&self, path: &str) -> Vec<ApiCall> {
        self.state.lock().unwrap().calls.iter().filter(|call| call.path == path).cloned().collect()
    }

    /// The calls with `method` whose path starts with `prefix` so far.
    pub fn calls_like(&self, method: &str, prefix: &str) -> Vec<ApiCall> {
        let state = self.state.lock().unwrap();
        state.calls.iter().filter(|call| call.method == method && call.path.starts_with(prefix)).cloned().collect()
    }

    /// Waits until `path` was called `count` times; returns those calls.
    pub async fn wait_calls(&self, path: &str, count: usize) -> Vec<ApiCall> {
        self.wait_for(&format!("{count} calls of {path}"), |state| {
            let calls: Vec<ApiCall> = state.calls.iter().filter(|call| call.path == path).cloned().collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    /// Makes every token handed out so far invalid, as when one expires early.
    pub fn revoke_tokens(&self) {
        self.state.lock().unwrap().tokens.clear();
    }

    /// Serves `bytes` as the resource `key` of any message.
    pub fn add_file(&self, key: &str, bytes: &[u8]) {
        self.state.lock().unwrap().files.insert(key.to_owned(), bytes.to_vec());
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake feishu: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// An `im.message.receive_v1` event: `message_type` with `content` (a JSON document Feishu
/// sends as a string) from `sender` in chat `chat_id` (`p2p` or `group`).
pub fn message_event(
    message_id: &str,
    sender: &str,
    chat_id: &str,
    chat_type: &str,
    message_type: &str,
    content: &Value,
) -> Value {
    json!({
        "schema": "2.0",
        "header": {"event_id": format!("ev-{message_id}"), "event_type": "im.message.receive_v1", "create_time": "1700000000000",
                   "token": "", "app_id": APP_ID, "tenant_key": "tenant1"},
        "event": {
            "sender": {"sender_id": {"open_id": sender, "union_id": format!("on_{sender}"), "user_id": format!("u_{sender}")},
                       "sender_type": "user", "tenant_key": "tenant1"},
            "message": {"message_id": message_id, "root_id": "", "parent_id": "", "create_time": "1700000000000",
                        "chat_id": chat_id, "chat_type": chat_type, "message_type": message_type,
                        "content": content.to_string(), "mentions": [], "user_agent": "fake"}
        }
    })
}

/// A `card.action.trigger` callback: `operator` pressed a button whose value is `value` on
/// card message `message_id` in Feishu chat `chat_id`, as the long connection delivers it.
pub fn card_action(event_id: &str, operator: &str, chat_id: &str, message_id: &str, value: &Value) -> Value {
    json!({
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "card.action.trigger", "create_time": "1700000000000",
                   "token": "", "app_id": APP_ID, "tenant_key": "tenant1"},
        "event": {
            "operator": {"tenant_key": "tenant1", "user_id": format!("u_{operator}"), "open_id": operator,
                         "union_id": format!("on_{operator}")},
            "token": format!("c-{event_id}"),
            "action": {"value": value, "tag": "button"},
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id}
        }
    })
}

/// A text a user sends the bot in their one-to-one chat `oc_p2p_<user>`.
pub fn direct_text(message_id: &str, sender: &str, text: &str) -> Value {
    message_event(message_id, sender, &format!("oc_p2p_{sender}"), "p2p", "text", &json!({"text": text}))
}

/// A text in group `chat_id`, mentioning the bot (as `@_user_1` before the text) when
/// `mention` is set.
pub fn group_text(message_id: &str, sender: &str, chat_id: &str, text: &str, mention: bool) -> Value {
    let text = if mention { format!("@_user_1 {text}") } else { text.to_owned() };
    let mut event = message_event(message_id, sender, chat_id, "group", "text", &json!({"text": text}));
    if mention {
        event["event"]["message"]["mentions"] = json!([{"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID, "union_id": "on_bot", "user_id": ""}, "name": "oxibot", "tenant_key": "tenant1"}]);
    }
    event
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
        let (status, content_type, body) = answer(&call, ws_addr, &state);
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
    let method = words.next()?.to_owned();
    let target = words.next()?.to_owned();
    let (path, query) =
        target.split_once('?').map_or((target.clone(), String::new()), |(p, q)| (p.to_owned(), q.to_owned()));
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
    Some(ApiCall { method, path, query, authorization, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

fn json_reply(status: u16, body: Value) -> (u16, &'static str, Vec<u8>) {
    (status, "application/json; charset=utf-8", body.to_string().into_bytes())
}

/// Status, content type and body for one call.
fn answer(call: &ApiCall, ws_addr: SocketAddr, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    let mut state = state.lock().unwrap();
    match (call.method.as_str(), call.path.as_str()) {
        ("POST", ENDPOINT) => {
            if call.body["AppID"] != APP_ID || call.body["AppSecret"] != APP_SECRET {
                return json_reply(200, json!({"code": 10003, "msg": "invalid app_id or app_secret"}));
            }
            state.tickets_issued += 1;
            let ticket = format!("ticket-{}", state.tickets_issued);
            state.tickets.insert(ticket.clone());
            let url = format!(
                "ws://{ws_addr}/ws/v2?fpid=493&aid=552564&device_id=dev-{n}&access_key=k&service_id={SERVICE_ID}&ticket={ticket}",
                n = state.tickets_issued
            );
            json_reply(
                200,
                json!({"code": 0, "msg": "ok", "data": {"URL": url,
                "ClientConfig": {"ReconnectCount": -1, "ReconnectInterval": 120, "ReconnectNonce": 30, "PingInterval": 120}}}),
            )
        }
        ("POST", TENANT_TOKEN) => {
            if call.body["app_id"] != APP_ID || call.body["app_secret"] != APP_SECRET {
                return json_reply(400, json!({"code": 10014, "msg": "app secret invalid"}));
            }
            state.tokens_issued += 1;
            let token = format!("t-fake-{}", state.tokens_issued);
            state.tokens.insert(token.clone());
            json_reply(200, json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}))
        }
        _ if !state.tokens.iter().any(|token| call.authorization == format!("Bearer {token}")) => json_reply(
            400,
            json!({"code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached."}),
        ),
        ("GET", "/open-apis/bot/v3/info") => json_reply(
            200,
            json!({"code": 0, "msg": "ok",
            "bot": {"activate_status": 2, "app_name": "oxibot", "avatar_url": "", "ip_white_list": [], "open_id": BOT_OPEN_ID}}),
        ),
        ("POST", MESSAGES) => {
            let valid_type = ["open_id", "chat_id"].iter().any(|kind| call.query == format!("receive_id_type={kind}"));
            if !valid_type || !call.body["receive_id"].is_string() || !card_is_valid(&call.body) {
                return json_reply(
                    400,
                    json!({"code": 230001, "msg": "Your request contains an invalid request parameter."}),
                );
            }
            created(&mut state, call)
        }
        ("POST", path) if path.starts_with(MESSAGES) && path.ends_with("/reply") => {
            if !card_is_valid(&call.body) {
                return json_reply(
                    400,
                    json!({"code": 230001, "msg": "Your request contains an invalid request parameter."}),
                );
            }
            created(&mut state, call)
        }
        ("PATCH", path) if path.starts_with(MESSAGES) => {
            let content: Value =
                serde_json::from_str(call.body["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
            if content["config"]["update_multi"] != true {
                return json_reply(400, json!({"code": 230099, "msg": "the card is not shared; it cannot be updated"}));
            }
            json_reply(200, json!({"code": 0, "msg": "success", "data": {}}))
        }
        ("POST", path) if path.starts_with(MESSAGES) && path.ends_with("/reactions") => json_reply(
            200,
            json!({"code": 0, "msg": "success",
            "data": {"reaction_id": "r-1", "reaction_type": call.body["reaction_type"]}}),
        ),
        ("GET", path) if path.starts_with(MESSAGES) && path.contains("/resources/") => {
            let key = path.rsplit('/').next().unwrap_or_default();
            match state.files.get(key) {
                Some(bytes) if call.query.starts_with("type=") => (200, "application/octet-stream", bytes.clone()),
                _ => json_reply(400, json!({"code": 234003, "msg": "File not in msg."})),
            }
        }
        _ => json_reply(404, json!({"code": 404, "msg": "404 page not found"})),
    }
}

/// Whether a create or reply body carries an interactive card with a Markdown element.
fn card_is_valid(body: &Value) -> bool {
    let card: Value = serde_json::from_str(body["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
    body["msg_type"] == "interactive" && card["elements"][0]["tag"] == "markdown"
}

fn created(state: &mut State, call: &ApiCall) -> (u16, &'static str, Vec<u8>) {
    state.messages_created += 1;
    let message_id = format!("om_bot_{}", state.messages_created);
    json_reply(
        200,
        json!({"code": 0, "msg": "success", "data": {"message_id": message_id, "msg_type": "interactive",
        "body": {"content": call.body["content"]}, "create_time": "1700000001000"}}),
    )
}

async fn serve_long_connection(listener: TcpListener, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(long_connection(socket, state.clone()));
    }
}

/// Opens one long connection for a valid ticket, forwards the test's frames to it, answers
/// pings and records what the client sends.
async fn long_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let check_state = state.clone();
    // The error type is tungstenite's, as its handshake callback wants it.
    #[allow(clippy::result_large_err)]
    let check_ticket = move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        let query = request.uri().query().unwrap_or_default();
        let ticket = query.split('&').find_map(|pair| pair.strip_prefix("ticket=")).unwrap_or_default().to_owned();
        if check_state.lock().unwrap().tickets.remove(&ticket) {
            return Ok(response);
        }
        let mut refusal = ErrorResponse::new(Some("invalid ticket".into()));
        *refusal.status_mut() = StatusCode::FORBIDDEN;
        refusal.headers_mut().insert("handshake-status", "403".parse().unwrap());
        refusal.headers_mut().insert("handshake-msg", "invalid ticket".parse().unwrap());
        Err(refusal)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(socket, check_ticket).await else { return };
    let (commands, mut queue) = mpsc::unbounded_channel();
    let connection = {
        let mut state = state.lock().unwrap();
        state.connections.push(commands);
        state.connections.len() - 1
    };
    loop {
        tokio::select! {
            command = queue.recv() => match command {
                Some(Command::Frame(bytes)) => {
                    if socket.send(WsMessage::Binary(bytes.into())).await.is_err() {
                        return;
                    }
                }
                Some(Command::Cut) | None => return,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(WsMessage::Binary(bytes))) => {
                    let Some(frame) = decode(&bytes) else { continue };
                    let is_ping = frame.method == 0 && frame.header("type") == Some("ping");
                    state.lock().unwrap().sent.push(Sent { connection, frame: frame.clone() });
                    if is_ping {
                        let settings = json!({"ReconnectCount": -1, "ReconnectInterval": 120, "ReconnectNonce": 30, "PingInterval": 120});
                        let pong = Frame { service: frame.service, method: 0, headers: vec![("type".into(), "pong".into())],
                                           payload: Some(settings.to_string().into_bytes()), ..Frame::default() };
                        if socket.send(WsMessage::Binary(encode(&pong).into())).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn length_delimited(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A frame as protobuf bytes.
pub fn encode(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    for (field, value) in
        [(1, frame.seq_id), (2, frame.log_id), (3, frame.service as i64 as u64), (4, frame.method as i64 as u64)]
    {
        varint(&mut out, field << 3);
        varint(&mut out, value);
    }
    for (key, value) in &frame.headers {
        let mut header = Vec::new();
        length_delimited(&mut header, 1, key.as_bytes());
        length_delimited(&mut header, 2, value.as_bytes());
        length_delimited(&mut out, 5, &header);
    }
    if let Some(payload) = &frame.payload {
        length_delimited(&mut out, 8, payload);
    }
    out
}

/// Protobuf bytes as a frame (`None` when they are not one).
pub fn decode(bytes: &[u8]) -> Option<Frame> {
    let mut frame = Frame::default();
    for (field, value) in fields(bytes)? {
        match (field, value) {
            (1, Field::Number(n)) => frame.seq_id = n,
            (2, Field::Number(n)) => frame.log_id = n,
            (3, Field::Number(n)) => frame.service = n as i32,
            (4, Field::Number(n)) => frame.method = n as i32,
            (5, Field::Bytes(header)) => {
                let mut pair = (String::new(), String::new());
                for (field, value) in fields(&header)? {
                    match (field, value) {
                        (1, Field::Bytes(key)) => pair.0 = String::from_utf8(key).ok()?,
                        (2, Field::Bytes(value)) => pair.1 = String::from_utf8(value).ok()?,
                        _ => {}
                    }
                }
                frame.headers.push(pair);
            }
            (8, Field::Bytes(payload)) => frame.payload = Some(payload),
            _ => {}
        }
    }
    Some(frame)
}

enum Field {
    Number(u64),
    Bytes(Vec<u8>),
}

fn fields(mut bytes: &[u8]) -> Option<Vec<(u64, Field)>> {
    fn read_varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = read_varint(&mut bytes)?;
        let value = match key & 7 {
            0 => Field::Number(read_varint(&mut bytes)?),
            2 => {
                let length = read_varint(&mut bytes)? as usize;
                let (value, rest) = (bytes.get(..length)?, bytes.get(length..)?);
                bytes = rest;
                Field::Bytes(value.to_vec())
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}
