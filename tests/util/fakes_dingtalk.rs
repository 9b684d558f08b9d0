//! A fake DingTalk for the DingTalk channel's tests, speaking Stream Mode and the open API as
//! DingTalk does, on 127.0.0.1:
//!
//! - the open API: `POST /v1.0/gateway/connections/open` (an endpoint and a single-use
//!   ticket for the app's credentials), `POST /v1.0/oauth2/accessToken` (a token for
//!   `appKey`/`appSecret`), the robot's `oToMessages/batchSend` and `groupMessages/send` (a
//!   token in `x-acs-dingtalk-access-token` required), `messageFiles/download` and the file
//!   URLs it hands out; every request is recorded, and sends can be scripted to fail;
//! - the Stream WebSocket, opened only with an issued ticket, over which a test sends
//!   `CALLBACK` frames with robot messages, `SYSTEM` `ping`s and `disconnect`s, or cuts the
//!   connection; every answer the client sends back is recorded.
//!
//! Both servers run on one thread with its own tokio runtime, like the scripted LLM, and stop
//! when the fake is dropped.

use std::collections::{HashMap, HashSet, VecDeque};
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

/// The app's client id (AppKey), also its robot code.
pub const CLIENT_ID: &str = "dingfaketestapp";
/// The app's client secret (AppSecret).
pub const CLIENT_SECRET: &str = "fake-client-secret";
/// The robot message callback topic.
pub const BOT_TOPIC: &str = "/v1.0/im/bot/messages/get";
/// The robot's user id in the callbacks.
pub const CHATBOT_USER: &str = "$:LWCP_v1:$robot";

/// One open API request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// `POST` or `GET`.
    pub method: String,
    /// E.g. `/v1.0/robot/groupMessages/send`.
    pub path: String,
    /// The `x-acs-dingtalk-access-token` header (empty when absent).
    pub token: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
}

impl ApiCall {
    /// The `msgParam` of a send, parsed (DingTalk takes it as a JSON string).
    pub fn msg_param(&self) -> Value {
        serde_json::from_str(self.body["msgParam"].as_str().unwrap_or("null")).unwrap_or(Value::Null)
    }
}

/// One answer the client sent on a Stream connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Which connection it came on (0 for the first).
    pub connection: usize,
    /// `headers.messageId`: the frame it answers.
    pub message_id: String,
    /// `code`.
    pub code: u64,
    /// `data`, as written.
    pub data: String,
}

/// A scripted answer to the next robot send.
#[derive(Debug, Clone, PartialEq)]
pub enum SendReply {
    /// This HTTP status with `{"code": …, "message": …}`.
    Error(u16, String),
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
    answers: Vec<Answer>,
    /// One queue per open Stream connection, oldest first.
    connections: Vec<UnboundedSender<Command>>,
    /// Tickets handed out and not used yet.
    tickets: HashSet<String>,
    tickets_issued: u32,
    /// Tokens handed out that are still good.
    tokens: HashSet<String>,
    tokens_issued: u32,
    send_replies: VecDeque<SendReply>,
    sends_served: u32,
    /// Download code → the file's bytes.
    files: HashMap<String, Vec<u8>>,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeDingTalk {
    http: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeDingTalk {
    /// Starts the open API and the Stream server on free ports.
    pub fn start() -> FakeDingTalk {
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ws = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        ws.set_nonblocking(true).unwrap();
        let (http_addr, ws_addr) = (http.local_addr().unwrap(), ws.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-dingtalk", move || async move {
            let http = TcpListener::from_std(http).unwrap();
            let ws = TcpListener::from_std(ws).unwrap();
            let addrs = Addrs { http: http_addr, ws: ws_addr };
            tokio::join!(serve_api(http, addrs, server_state.clone()), serve_stream(ws, server_state));
        });
        FakeDingTalk { http: http_addr, state, _server: server }
    }

    /// The `apiBase` (and gateway base) to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.http)
    }

    /// A `channels.dingtalk` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "apiBase": self.api_base()});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` Stream connections have been opened.
    pub async fn wait_connections(&self, count: usize) {
        self.wait_for(&format!("{count} stream connections"), |state| (state.connections.len() >= count).then_some(()))
            .await;
    }

    /// Sends a robot message callback with frame id `message_id` on the newest connection.
    pub async fn deliver(&self, message_id: &str, data: Value) {
        self.send_frame(callback_frame(message_id, &data)).await;
    }

    /// Sends a `SYSTEM` `ping` with frame id `message_id` on the newest connection.
    pub async fn ping(&self, message_id: &str) {
        self.send_frame(system_frame("ping", message_id, &json!({"opaque": format!("opaque-{message_id}")}))).await;
    }

    /// Sends a `SYSTEM` `disconnect` on the newest connection, as DingTalk does before it
    /// closes one.
    pub async fn disconnect(&self) {
        self.send_frame(system_frame("disconnect", "disconnect-1", &json!({"reason": "server rebalance"}))).await;
    }

    /// Drops the newest connection without a closing handshake.
    pub async fn cut_connection(&self) {
        self.wait_connections(1).await;
        self.send(Command::Cut);
    }

    async fn send_frame(&self, frame: Value) {
        self.wait_connections(1).await;
        self.send(Command::Text(frame.to_string()));
    }

    fn send(&self, command: Command) {
        let state = self.state.lock().unwrap();
        let newest = state.connections.last().expect("no stream connection");
        assert!(newest.send(command).is_ok(), "the newest stream connection is closed");
    }

    /// Every answer the client sent, in order.
    pub fn answers(&self) -> Vec<Answer> {
        self.state.lock().unwrap().answers.clone()
    }

    /// The frame ids answered so far, in order.
    pub fn acks(&self) -> Vec<String> {
        self.answers().into_iter().map(|answer| answer.message_id).collect()
    }

    /// Waits until frame `message_id` has been answered; returns the answer.
    pub async fn wait_ack(&self, message_id: &str) -> Answer {
        self.wait_for(&format!("the answer to {message_id}"), |state| {
            state.answers.iter().find(|answer| answer.message_id == message_id).cloned()
        })
        .await
    }

    /// The calls to `path` so far.
    pub fn calls(&self, path: &str) -> Vec<ApiCall> {
        self.state.lock().unwrap().calls.iter().filter(|call| call.path == path).cloned().collect()
    }

    /// Waits until `path` was called `count` times; returns those calls.
    pub async fn wait_calls(&self, path: &str, count: usize) -> Vec<ApiCall> {
        self.wait_for(&format!("{count} calls of {path}"), |state| {
            let calls: Vec<ApiCall> = state.calls.iter().filter(|call| call.path == path).cloned().collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    /// Scripts the answer to the next robot send not yet scripted.
    pub fn push_send_reply(&self, reply: SendReply) {
        self.state.lock().unwrap().send_replies.push_back(reply);
    }

    /// Makes every token handed out so far invalid, as when one expires early.
    pub fn revoke_tokens(&self) {
        self.state.lock().unwrap().tokens.clear();
    }

    /// Serves `bytes` as the file behind `download_code`.
    pub fn add_file(&self, download_code: &str, bytes: &[u8]) {
        self.state.lock().unwrap().files.insert(download_code.to_owned(), bytes.to_vec());
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(tokio::time::Instant::now() < deadline, "fake dingtalk: no {what} within {WAIT:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// The robot paths of the two send calls.
pub const BATCH_SEND: &str = "/v1.0/robot/oToMessages/batchSend";
/// Sending to a group.
pub const GROUP_SEND: &str = "/v1.0/robot/groupMessages/send";
/// Getting an access token.
pub const ACCESS_TOKEN: &str = "/v1.0/oauth2/accessToken";
/// Registering a Stream connection.
pub const CONNECTIONS_OPEN: &str = "/v1.0/gateway/connections/open";

/// The data of a text message sent to the robot in a one-to-one chat by `staff_id`.
pub fn one_to_one_text(msg_id: &str, staff_id: &str, nick: &str, text: &str) -> Value {
    let mut data = message_base(msg_id, staff_id, nick, "1", &format!("cidp2p{staff_id}"));
    data["msgtype"] = json!("text");
    data["text"] = json!({"content": text});
    data
}

/// The data of a text message mentioning the robot in the group `conversation_id`.
pub fn group_text(msg_id: &str, conversation_id: &str, staff_id: &str, nick: &str, text: &str) -> Value {
    let mut data = message_base(msg_id, staff_id, nick, "2", conversation_id);
    data["msgtype"] = json!("text");
    // DingTalk leaves out the mention of the robot and keeps the space after it.
    data["text"] = json!({"content": format!(" {text}")});
    data["conversationTitle"] = json!("Project team");
    data["atUsers"] = json!([{"dingtalkId": CHATBOT_USER}]);
    data
}

/// The data of a picture sent to the robot in a one-to-one chat.
pub fn one_to_one_picture(msg_id: &str, staff_id: &str, nick: &str, download_code: &str) -> Value {
    let mut data = message_base(msg_id, staff_id, nick, "1", &format!("cidp2p{staff_id}"));
    data["msgtype"] = json!("picture");
    data["content"] = json!({"downloadCode": download_code, "pictureDownloadCode": format!("pdc-{download_code}")});
    data
}

fn message_base(msg_id: &str, staff_id: &str, nick: &str, conversation_type: &str, conversation_id: &str) -> Value {
    json!({
        "conversationId": conversation_id, "conversationType": conversation_type,
        "chatbotCorpId": "dingcorp1", "chatbotUserId": CHATBOT_USER, "robotCode": CLIENT_ID,
        "msgId": msg_id, "senderNick": nick, "isAdmin": false, "senderStaffId": staff_id,
        "senderId": format!("$:LWCP_v1:${staff_id}"), "senderCorpId": "dingcorp1",
        "sessionWebhook": format!("https://oapi.dingtalk.com/robot/sendBySession?session={msg_id}"),
        "sessionWebhookExpiredTime": 1_700_005_400_000_u64, "createAt": 1_700_000_000_000_u64,
        "isInAtList": true,
    })
}

/// A `CALLBACK` frame carrying a robot message.
pub fn callback_frame(message_id: &str, data: &Value) -> Value {
    json!({
        "specVersion": "1.0", "type": "CALLBACK",
        "headers": {"appId": "app-1", "connectionId": "conn-1", "contentType": "application/json",
                    "messageId": message_id, "time": "1700000000000", "topic": BOT_TOPIC},
        "data": data.to_string(),
    })
}

fn system_frame(topic: &str, message_id: &str, data: &Value) -> Value {
    json!({
        "specVersion": "1.0", "type": "SYSTEM",
        "headers": {"contentType": "application/json", "messageId": message_id, "time": "1700000000000", "topic": topic},
        "data": data.to_string(),
    })
}

/// Where the two servers listen.
#[derive(Clone, Copy)]
struct Addrs {
    http: SocketAddr,
    ws: SocketAddr,
}

async fn serve_api(listener: TcpListener, addrs: Addrs, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(api_connection(socket, addrs, state.clone()));
    }
}

/// Answers requests on one keep-alive connection.
async fn api_connection(socket: TcpStream, addrs: Addrs, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(call) = read_call(&mut socket).await {
        let (status, headers, content_type, body) = answer(&call, addrs, &state);
        state.lock().unwrap().calls.push(call);
        let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}\r\n",
            body.len()
        );
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
    let (mut length, mut token) = (0, String::new());
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        match name.trim().to_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "x-acs-dingtalk-access-token" => token = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    Some(ApiCall { method, path, token, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

type Reply = (u16, Vec<(&'static str, String)>, &'static str, Vec<u8>);

fn json_reply(status: u16, body: Value) -> Reply {
    (status, vec![], "application/json;charset=utf-8", body.to_string().into_bytes())
}

fn error_reply(status: u16, code: &str, message: &str) -> Reply {
    json_reply(status, json!({"code": code, "message": message, "requestid": "req-fake"}))
}

/// Status, extra headers, content type and body for one call.
fn answer(call: &ApiCall, addrs: Addrs, state: &Mutex<State>) -> Reply {
    let mut state = state.lock().unwrap();
    if call.method == "GET" {
        let code = call.path.strip_prefix("/files/").unwrap_or_default();
        return match state.files.get(code) {
            Some(bytes) => (200, vec![], "application/octet-stream", bytes.clone()),
            None => (404, vec![], "text/plain", b"not found".to_vec()),
        };
    }
    match call.path.as_str() {
        CONNECTIONS_OPEN => {
            if call.body["clientId"] != CLIENT_ID || call.body["clientSecret"] != CLIENT_SECRET {
                return error_reply(401, "Unauthorized", "clientId or clientSecret is wrong");
            }
            let subscribed = call.body["subscriptions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|subscription| subscription["type"] == "CALLBACK" && subscription["topic"] == BOT_TOPIC);
            if !subscribed {
                return error_reply(400, "invalidParameter", "no subscription");
            }
            state.tickets_issued += 1;
            let ticket = format!("ticket+{}/x=", state.tickets_issued);
            state.tickets.insert(ticket.clone());
            json_reply(200, json!({"endpoint": format!("ws://{}/connect", addrs.ws), "ticket": ticket}))
        }
        ACCESS_TOKEN => {
            if call.body["appKey"] != CLIENT_ID || call.body["appSecret"] != CLIENT_SECRET {
                return error_reply(400, "invalidClientSecret", "appKey or appSecret is wrong");
            }
            state.tokens_issued += 1;
            let token = format!("token-{}", state.tokens_issued);
            state.tokens.insert(token.clone());
            json_reply(200, json!({"accessToken": token, "expireIn": 7200}))
        }
        BATCH_SEND | GROUP_SEND | "/v1.0/robot/messageFiles/download" if !state.tokens.contains(&call.token) => {
            error_reply(401, "InvalidAuthentication", "the access token is not valid")
        }
        BATCH_SEND | GROUP_SEND => {
            let target =
                if call.path == BATCH_SEND { &call.body["userIds"][0] } else { &call.body["openConversationId"] };
            let well_formed = call.body["robotCode"] == CLIENT_ID
                && target.as_str().is_some_and(|target| !target.is_empty())
                && call.body["msgKey"].is_string()
                && call.body["msgParam"].as_str().is_some_and(|param| serde_json::from_str::<Value>(param).is_ok());
            if !well_formed {
                return error_reply(400, "invalidParameter", "robotCode, the recipient, msgKey or msgParam is wrong");
            }
            match state.send_replies.pop_front() {
                Some(SendReply::Error(status, code)) => error_reply(status, &code, "scripted failure"),
                Some(SendReply::RateLimited(seconds)) => {
                    let (_, _, content_type, body) = error_reply(429, "Throttling", "too many requests");
                    (429, vec![("retry-after", seconds.to_string())], content_type, body)
                }
                None => {
                    state.sends_served += 1;
                    let key = format!("pqk-{}", state.sends_served);
                    if call.path == BATCH_SEND {
                        json_reply(
                            200,
                            json!({"processQueryKey": key, "invalidStaffIdList": [], "flowControlledStaffIdList": []}),
                        )
                    } else {
                        json_reply(200, json!({"processQueryKey": key}))
                    }
                }
            }
        }
        "/v1.0/robot/messageFiles/download" => {
            let code = call.body["downloadCode"].as_str().unwrap_or_default();
            if call.body["robotCode"] != CLIENT_ID || !state.files.contains_key(code) {
                return error_reply(404, "resource.not.found", "no such download code");
            }
            json_reply(200, json!({"downloadUrl": format!("http://{}/files/{code}", addrs.http)}))
        }
        _ => error_reply(404, "NotFound", "no such api"),
    }
}

async fn serve_stream(listener: TcpListener, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(stream_connection(socket, state.clone()));
    }
}

/// Opens one Stream connection for a valid ticket, forwards the test's frames to it and
/// records the client's answers.
async fn stream_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let check_state = state.clone();
    // The error type is tungstenite's, as its handshake callback wants it.
    #[allow(clippy::result_large_err)]
    let check_ticket = move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        let query = request.uri().query().unwrap_or_default();
        let ticket = query.split('&').find_map(|pair| pair.strip_prefix("ticket=")).map(decode).unwrap_or_default();
        if check_state.lock().unwrap().tickets.remove(&ticket) {
            return Ok(response);
        }
        let mut refusal = ErrorResponse::new(Some(format!("unknown or used ticket {ticket:?}")));
        *refusal.status_mut() = StatusCode::UNAUTHORIZED;
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
                    let answer = Answer {
                        connection,
                        message_id: frame["headers"]["messageId"].as_str().unwrap_or_default().to_owned(),
                        code: frame["code"].as_u64().unwrap_or_default(),
                        data: frame["data"].as_str().unwrap_or_default().to_owned(),
                    };
                    state.lock().unwrap().answers.push(answer);
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

/// A query parameter's value with `%XX` and `+` decoded.
fn decode(value: &str) -> String {
    let mut bytes = Vec::new();
    let mut rest = value.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        match first {
            b'%' if tail.len() >= 2 => {
                let hex = std::str::from_utf8(&tail[..2]).ok().and_then(|hex| u8::from_str_radix(hex, 16).ok());
                bytes.push(hex.unwrap_or(b'%'));
                rest = if hex.is_some() { &tail[2..] } else { tail };
            }
            b'+' => {
                bytes.push(b' ');
                rest = tail;
            }
            other => {
                bytes.push(other);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
