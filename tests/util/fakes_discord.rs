//! A fake Discord for the Discord channel's tests: a WebSocket Gateway and the REST endpoints
//! the channel uses, on 127.0.0.1, recording everything the channel sends.
//!
//! The Gateway says HELLO with a short heartbeat interval, answers IDENTIFY with READY and
//! RESUME with RESUMED, acknowledges heartbeats (unless told to withhold the acks), and lets a
//! test inject `MESSAGE_CREATE`s and drop the connection. The REST side records posted
//! messages and typing requests, serves files for attachment downloads, and can answer with
//! scripted failures (a 429 with `retry_after`, a 500 forever).
//!
//! It runs on its own thread with its own tokio runtime, like the scripted LLM, and stops when
//! dropped.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::background::BackgroundServer;

/// The bot's user id in READY.
pub const BOT_ID: &str = "100000000000000001";
/// The session id in READY.
pub const SESSION_ID: &str = "fake-session-1";
/// The token the channel is configured with.
pub const TOKEN: &str = "fake-token";
/// The heartbeat interval the Gateway asks for.
pub const HEARTBEAT_MS: u64 = 200;

/// A heartbeat the Gateway received.
#[derive(Debug, Clone)]
pub struct Beat {
    /// Which connection (1, 2, …) it came on.
    pub connection: usize,
    /// When it arrived.
    pub at: Instant,
    /// Its `d`: the last sequence number the client saw.
    pub seq: Value,
}

/// A request to the REST side.
#[derive(Debug, Clone)]
pub struct Request {
    /// E.g. `POST`.
    pub method: String,
    /// The path, e.g. `/api/v10/channels/5/messages`.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is not JSON).
    pub json: Value,
    /// The body as text.
    pub raw: String,
    /// The status it was answered with.
    pub status: u16,
    /// When it arrived.
    pub at: Instant,
}

impl Request {
    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A scripted answer for message posts.
struct Failure {
    /// Posts answered normally before the failures start.
    after: usize,
    status: u16,
    body: String,
    remaining: usize,
}

/// What the fake has seen, and its switches.
#[derive(Default)]
struct State {
    connections: usize,
    /// Commands for the live Gateway connection.
    current: Option<mpsc::UnboundedSender<Command>>,
    seq: u64,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    beats: Vec<Beat>,
    withhold_acks: bool,
    reject_identify: bool,
    requests: Vec<Request>,
    failures: VecDeque<Failure>,
    files: HashMap<String, Vec<u8>>,
    posted: u64,
}

impl State {
    /// The next sequence number for a dispatch.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

/// Something a test asks the live Gateway connection to do.
enum Command {
    Send(String),
    Drop,
}

/// The running fake. Dropping it stops both servers.
pub struct FakeDiscord {
    gateway: SocketAddr,
    rest: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The servers' thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeDiscord {
    /// Starts the Gateway and the REST side on free ports.
    pub fn start() -> FakeDiscord {
        let gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        gateway.set_nonblocking(true).unwrap();
        rest.set_nonblocking(true).unwrap();
        let (gateway_addr, rest_addr) = (gateway.local_addr().unwrap(), rest.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-discord", move || async move {
            let gateway = TcpListener::from_std(gateway).unwrap();
            let rest = TcpListener::from_std(rest).unwrap();
            tokio::join!(accept_gateway(gateway, gateway_addr, server_state.clone()), accept_rest(rest, server_state));
        });
        FakeDiscord { gateway: gateway_addr, rest: rest_addr, state, _server: server }
    }

    /// The Gateway URL to configure.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}/?v=10&encoding=json", self.gateway)
    }

    /// The REST API base to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}/api/v10", self.rest)
    }

    /// A `channels.discord` section pointing at this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({"token": TOKEN, "gatewayUrl": self.gateway_url(), "apiBase": self.api_base()});
        if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
            config.extend(extra);
        }
        config
    }

    /// A URL under which the REST side serves `bytes` (for attachments).
    pub fn serve_file(&self, name: &str, bytes: &[u8]) -> String {
        self.lock().files.insert(name.to_owned(), bytes.to_vec());
        format!("http://{}/files/{name}", self.rest)
    }

    /// Dispatches a `MESSAGE_CREATE` with `message` as its data on the live connection;
    /// returns its sequence number.
    pub fn message_create(&self, message: Value) -> u64 {
        let mut state = self.lock();
        let seq = state.next_seq();
        let payload = json!({"op": 0, "t": "MESSAGE_CREATE", "s": seq, "d": message}).to_string();
        let sent = state.current.as_ref().is_some_and(|current| current.send(Command::Send(payload)).is_ok());
        assert!(sent, "no live gateway connection to dispatch to");
        seq
    }

    /// Dispatches an `INTERACTION_CREATE` with `interaction` as its data (a button press from
    /// [`button_press`]); returns its sequence number.
    pub fn interaction_create(&self, interaction: Value) -> u64 {
        let mut state = self.lock();
        let seq = state.next_seq();
        let payload = json!({"op": 0, "t": "INTERACTION_CREATE", "s": seq, "d": interaction}).to_string();
        let sent = state.current.as_ref().is_some_and(|current| current.send(Command::Send(payload)).is_ok());
        assert!(sent, "no live gateway connection to dispatch to");
        seq
    }

    /// Drops the live connection without a close frame, as a network failure would.
    pub fn disconnect(&self) {
        if let Some(current) = self.lock().current.take() {
            let _ = current.send(Command::Drop);
        }
    }

    /// Stops (or resumes) acknowledging heartbeats.
    pub fn withhold_acks(&self, withhold: bool) {
        self.lock().withhold_acks = withhold;
    }

    /// Answers every IDENTIFY by closing the connection with 4004 (authentication failed).
    pub fn reject_identify(&self) {
        self.lock().reject_identify = true;
    }

    /// Answers the next `times` message posts with `status` and `body`.
    pub fn fail_posts(&self, status: u16, body: &str, times: usize) {
        self.fail_posts_after(0, status, body, times);
    }

    /// Answers `after` message posts normally, then the next `times` with `status` and `body`.
    pub fn fail_posts_after(&self, after: usize, status: u16, body: &str, times: usize) {
        self.lock().failures.push_back(Failure { after, status, body: body.to_owned(), remaining: times });
    }

    /// How many Gateway connections were opened.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// The `d` of every IDENTIFY received.
    pub fn identifies(&self) -> Vec<Value> {
        self.lock().identifies.clone()
    }

    /// The `d` of every RESUME received.
    pub fn resumes(&self) -> Vec<Value> {
        self.lock().resumes.clone()
    }

    /// Every heartbeat received.
    pub fn beats(&self) -> Vec<Beat> {
        self.lock().beats.clone()
    }

    /// Every REST request, answered or failed.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// The messages posted successfully, in order.
    pub fn posts(&self) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.path.ends_with("/messages") && r.status == 200).collect()
    }

    /// The channel ids of typing requests, in order.
    pub fn typing(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter_map(|r| r.path.strip_suffix("/typing").and_then(|p| p.rsplit('/').next()).map(str::to_owned))
            .collect()
    }

    /// Waits (without blocking the caller's runtime) until `done` holds, failing the test
    /// with `what` after the generous [`crate::wait::DEADLINE`].
    pub async fn wait_until(&self, what: &str, done: impl Fn(&FakeDiscord) -> bool) {
        crate::wait::eventually(&format!("fake discord: {what}"), || done(self)).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

/// A direct message's `MESSAGE_CREATE` data.
pub fn direct_message(id: &str, channel_id: &str, author_id: &str, username: &str, content: &str) -> Value {
    json!({
        "id": id, "channel_id": channel_id, "content": content, "mentions": [], "attachments": [], "type": 0,
        "author": {"id": author_id, "username": username, "global_name": null},
    })
}

/// The `INTERACTION_CREATE` data of `user_id` pressing the button `custom_id` in the direct
/// message channel `channel_id`.
pub fn button_press(id: &str, channel_id: &str, user_id: &str, username: &str, custom_id: &str) -> Value {
    json!({
        "id": id, "application_id": "777", "type": 3, "token": format!("tok-{id}"), "version": 1,
        "channel_id": channel_id, "user": {"id": user_id, "username": username, "global_name": null},
        "data": {"custom_id": custom_id, "component_type": 2},
        "message": {"id": "90001", "channel_id": channel_id, "content": "Approval needed"},
    })
}

/// A guild message's `MESSAGE_CREATE` data; `mentions_bot` lists the bot in `mentions`.
pub fn guild_message(
    id: &str,
    guild_id: &str,
    channel_id: &str,
    author_id: &str,
    content: &str,
    mentions_bot: bool,
) -> Value {
    let mut message = direct_message(id, channel_id, author_id, &format!("user{author_id}"), content);
    message["guild_id"] = json!(guild_id);
    if mentions_bot {
        message["mentions"] = json!([{"id": BOT_ID, "username": "oxibot", "bot": true}]);
    }
    message
}

async fn accept_gateway(listener: TcpListener, addr: SocketAddr, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        tokio::spawn(gateway_connection(socket, addr, state.clone()));
    }
}

/// One Gateway connection: HELLO, then answers until the client leaves or a test drops it.
async fn gateway_connection(socket: TcpStream, addr: SocketAddr, state: Arc<Mutex<State>>) {
    let Ok(socket) = tokio_tungstenite::accept_async(socket).await else { return };
    let (mut write, mut read) = socket.split();
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let connection = {
        let mut state = state.lock().unwrap();
        state.connections += 1;
        state.current = Some(commands_tx);
        state.connections
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}}).to_string();
    if write.send(Frame::text(hello)).await.is_err() {
        return;
    }
    loop {
        let reply = tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Send(text)) => Some(Frame::text(text)),
                Some(Command::Drop) | None => return,
            },
            frame = read.next() => match frame {
                Some(Ok(Frame::Text(text))) => answer(&state, connection, addr, text.as_str()),
                Some(Ok(_)) => None,
                Some(Err(_)) | None => return,
            },
        };
        if let Some(frame) = reply
            && write.send(frame).await.is_err()
        {
            return;
        }
    }
}

/// Records a client payload and returns the answer to send, if any.
fn answer(state: &Mutex<State>, connection: usize, addr: SocketAddr, text: &str) -> Option<Frame> {
    let payload: Value = serde_json::from_str(text).ok()?;
    let mut state = state.lock().unwrap();
    match payload["op"].as_u64()? {
        1 => {
            state.beats.push(Beat { connection, at: Instant::now(), seq: payload["d"].clone() });
            (!state.withhold_acks).then(|| Frame::text(json!({"op": 11}).to_string()))
        }
        2 => {
            state.identifies.push(payload["d"].clone());
            if state.reject_identify {
                return Some(Frame::Close(Some(CloseFrame {
                    code: CloseCode::from(4004),
                    reason: "Authentication failed.".into(),
                })));
            }
            let seq = state.next_seq();
            let user = json!({"id": BOT_ID, "username": "oxibot", "bot": true});
            let ready = json!({"v": 10, "user": user, "session_id": SESSION_ID, "resume_gateway_url": format!("ws://{addr}"), "guilds": []});
            Some(Frame::text(json!({"op": 0, "t": "READY", "s": seq, "d": ready}).to_string()))
        }
        6 => {
            state.resumes.push(payload["d"].clone());
            let seq = state.next_seq();
            Some(Frame::text(json!({"op": 0, "t": "RESUMED", "s": seq, "d": null}).to_string()))
        }
        _ => None,
    }
}

async fn accept_rest(listener: TcpListener, state: Arc<Mutex<State>>) {
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        tokio::spawn(rest_connection(socket, state.clone()));
    }
}

/// Answers HTTP/1.1 requests on one connection until the client closes it.
async fn rest_connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some((method, path, headers, body)) = read_request(&mut socket).await {
        let (status, answer) = route(&state, method, path, headers, body);
        let reason = match status {
            200 => "OK",
            204 => "No Content",
            404 => "Not Found",
            429 => "Too Many Requests",
            _ => "Error",
        };
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            answer.len()
        );
        let stream = socket.get_mut();
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}

type RawRequest = (String, String, Vec<(String, String)>, Vec<u8>);

async fn read_request(socket: &mut BufReader<TcpStream>) -> Option<RawRequest> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_owned(), words.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        headers.push((name.trim().to_lowercase(), value.trim().to_owned()));
    }
    let length =
        headers.iter().find(|(name, _)| name == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    Some((method, path, headers, body))
}

/// Records a request and picks its answer.
fn route(
    state: &Mutex<State>,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let mut state = state.lock().unwrap();
    let (status, answer) = if let Some(name) = path.strip_prefix("/files/") {
        match state.files.get(name) {
            Some(bytes) => (200, bytes.clone()),
            None => (404, br#"{"message": "Unknown file"}"#.to_vec()),
        }
    } else if method == "POST"
        && (path.ends_with("/typing") || (path.contains("/interactions/") && path.ends_with("/callback")))
    {
        (204, Vec::new())
    } else if method == "POST" && path.ends_with("/messages") {
        answer_post(&mut state, &path)
    } else {
        (404, br#"{"message": "404: Not Found", "code": 0}"#.to_vec())
    };
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let raw = String::from_utf8_lossy(&body).into_owned();
    state.requests.push(Request { method, path, headers, json, raw, status, at: Instant::now() });
    (status, answer)
}

/// A message post: the next scripted failure, or the created message.
fn answer_post(state: &mut State, path: &str) -> (u16, Vec<u8>) {
    if let Some(failure) = state.failures.front_mut().filter(|failure| failure.after == 0) {
        failure.remaining -= 1;
        let answer = (failure.status, failure.body.clone().into_bytes());
        if failure.remaining == 0 {
            state.failures.pop_front();
        }
        return answer;
    }
    if let Some(failure) = state.failures.front_mut() {
        failure.after -= 1;
    }
    state.posted += 1;
    let channel_id = path.trim_end_matches("/messages").rsplit('/').next().unwrap_or_default();
    (200, json!({"id": format!("9000{}", state.posted), "channel_id": channel_id}).to_string().into_bytes())
}
