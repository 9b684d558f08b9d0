//! A fake Matrix homeserver for the Matrix channel's tests: the client-server API on 127.0.0.1
//! (`login`, `whoami`, the `/sync` long poll, `join`, `joined_members`, `typing`,
//! `send/m.room.message/{txn}`;
//! another access token than the fake's gets `401 M_UNKNOWN_TOKEN`) that records every request.
//!
//! The timeline is a list of batches a test pushes. A `/sync` without `since` answers the
//! pending invites and the position after the last batch (`s<count>`); one with `since=s<k>`
//! answers batch `k` (so an old position replays what came after it, as a real server does), or
//! holds the request until a batch is pushed or its `timeout` runs out. A transaction id sent
//! again gets the event id of its first sending and posts nothing new, as Matrix promises.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::TempDir;
use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's account.
pub const BOT: &str = "@oxibot:fake.test";
/// The access token the fake's config holds.
pub const TOKEN: &str = "syt_fake_token";
/// The password the fake's login takes.
pub const PASSWORD: &str = "correct horse";
/// A room of two members: a direct chat.
pub const DM_ROOM: &str = "!dm:fake.test";
/// A room of three members: a group.
pub const GROUP_ROOM: &str = "!group:fake.test";
/// The longest the fake holds a `/sync`, whatever the client asks (tests end sooner).
const LONGEST_HOLD: Duration = Duration::from_secs(5);

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET`, `PUT`, ….
    pub method: String,
    /// The decoded path, without the query.
    pub path: String,
    /// The decoded query parameters.
    pub query: HashMap<String, String>,
    /// The `Authorization` header.
    pub authorization: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
}

/// A message the bot sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// The room it went to.
    pub room: String,
    /// Its transaction id.
    pub txn: String,
    /// The event content.
    pub content: Value,
}

/// What the next `/sync` gets instead of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncFailure {
    /// This HTTP status with a Matrix error body.
    Status(u16, &'static str),
    /// The connection closed without an answer.
    Cut,
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    /// The `rooms` object of each batch, in order.
    batches: Vec<Value>,
    /// Invites answered to every `/sync` without `since`: room → inviter.
    pending_invites: Vec<(String, String)>,
    sync_failures: VecDeque<SyncFailure>,
    /// Unique messages, in the order they were first sent.
    sent: Vec<Sent>,
    /// Transaction id → event id.
    transactions: HashMap<String, String>,
    /// `send` requests answered so far.
    sends: usize,
    /// `send` requests (by number, from 1) to answer with this status instead.
    send_failures: HashMap<usize, u16>,
    members: HashMap<String, usize>,
}

/// The running fake. Dropping it stops the server.
pub struct FakeMatrix {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Where the channel keeps its sync position.
    media: TempDir,
    /// The server's thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeMatrix {
    /// Starts the homeserver on a free port, with a direct room and a group room.
    pub fn start() -> FakeMatrix {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut state = State::default();
        state.members.insert(DM_ROOM.to_owned(), 2);
        state.members.insert(GROUP_ROOM.to_owned(), 3);
        let state = Arc::new(Mutex::new(state));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-matrix", move || async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(connection(socket, server_state.clone()));
            }
        });
        FakeMatrix { addr, state, media: TempDir::new("matrix-media"), _server: server }
    }

    /// The `homeserver` to configure.
    pub fn homeserver(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The channel's media directory, where it keeps its sync position.
    pub fn media_dir(&self) -> &std::path::Path {
        self.media.path()
    }

    /// A `channels.matrix` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({"homeserver": self.homeserver(), "userId": BOT, "accessToken": TOKEN,
                                "deviceId": "OXIDEVICE", "mediaDir": self.media.path()});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Appends a batch with `events` in the timeline of `room`.
    pub fn push(&self, room: &str, events: Vec<Value>) {
        self.push_rooms(json!({"join": {room: {"timeline": {"events": events, "limited": false}}}}));
    }

    /// Appends a batch with this `rooms` object.
    pub fn push_rooms(&self, rooms: Value) {
        self.state.lock().unwrap().batches.push(rooms);
    }

    /// Invites the bot into `room` on behalf of `inviter`.
    pub fn invite(&self, room: &str, inviter: &str) {
        let state_event =
            json!({"type": "m.room.member", "state_key": BOT, "sender": inviter, "content": {"membership": "invite"}});
        self.push_rooms(json!({"invite": {room: {"invite_state": {"events": [state_event]}}}}));
        self.state.lock().unwrap().pending_invites.push((room.to_owned(), inviter.to_owned()));
    }

    /// Makes `send` request number `nth` (from 1, counting every `send`) fail with `status`,
    /// storing nothing.
    pub fn fail_send_number(&self, nth: usize, status: u16) {
        self.state.lock().unwrap().send_failures.insert(nth, status);
    }

    /// Makes the next `/sync` fail this way.
    pub fn fail_next_sync(&self, failure: SyncFailure) {
        self.state.lock().unwrap().sync_failures.push_back(failure);
    }

    /// The `since` of every `/sync` so far (`None` for a sync from scratch).
    pub fn syncs(&self) -> Vec<Option<String>> {
        let state = self.state.lock().unwrap();
        let syncs = state.requests.iter().filter(|request| request.path.ends_with("/sync"));
        syncs.map(|request| request.query.get("since").cloned()).collect()
    }

    /// Waits until a `/sync` from `since` was made.
    pub async fn wait_sync_from(&self, since: &str) {
        self.wait_for(&format!("a sync from {since}"), |state| {
            let from = |request: &Request| {
                request.path.ends_with("/sync") && request.query.get("since").is_some_and(|s| s == since)
            };
            state.requests.iter().any(from).then_some(())
        })
        .await;
    }

    /// The requests whose path ends with `suffix`.
    pub fn requests(&self, suffix: &str) -> Vec<Request> {
        self.state.lock().unwrap().requests.iter().filter(|request| request.path.ends_with(suffix)).cloned().collect()
    }

    /// The messages sent so far (each transaction once).
    pub fn sent(&self) -> Vec<Sent> {
        self.state.lock().unwrap().sent.clone()
    }

    /// Waits until `count` messages were sent; returns them.
    pub async fn wait_sent(&self, count: usize) -> Vec<Sent> {
        self.wait_for(&format!("{count} messages"), |state| (state.sent.len() >= count).then(|| state.sent.clone()))
            .await
    }

    /// The saved sync position, as the channel wrote it.
    pub fn saved_position(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.media.path().join("sync-position.json")).ok()?;
        let saved: Value = serde_json::from_str(&text).unwrap();
        saved["since"].as_str().map(str::to_owned)
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(Instant::now() < deadline, "fake matrix: no {what} within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// An `m.text` message event.
pub fn text(event_id: &str, sender: &str, body: &str) -> Value {
    json!({"type": "m.room.message", "event_id": event_id, "sender": sender, "origin_server_ts": 1_700_000_000_000_u64,
           "content": {"msgtype": "m.text", "body": body}})
}

/// An `m.text` message whose `m.mentions` names the bot.
pub fn mention(event_id: &str, sender: &str, body: &str) -> Value {
    let mut event = text(event_id, sender, body);
    event["content"]["m.mentions"] = json!({"user_ids": [BOT]});
    event
}

/// An `m.text` message in the thread rooted at `root`.
pub fn in_thread(event_id: &str, sender: &str, body: &str, root: &str) -> Value {
    let mut event = text(event_id, sender, body);
    event["content"]["m.relates_to"] = json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true});
    event
}

async fn connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(request) = read_request(&mut socket).await {
        let Some((status, body)) = answer(&request, &state).await else { return };
        let body = body.to_string();
        let head =
            format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
        if socket.get_mut().write_all(format!("{head}{body}").as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn read_request(socket: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let method = words.next()?.to_owned();
    let target = words.next()?.to_owned();
    let (mut length, mut authorization) = (0, String::new());
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => authorization = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query.split('&').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Request { method, path: decode(path), query, authorization, body })
}

/// Percent-decoding.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| u8::from_str_radix(&text[i + 1..i + 3], 16).ok())
            .flatten();
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

fn error(status: u16, errcode: &str, message: &str) -> Option<(u16, Value)> {
    Some((status, json!({"errcode": errcode, "error": message})))
}

/// Status and body for one request; `None` cuts the connection.
async fn answer(request: &Request, state: &Mutex<State>) -> Option<(u16, Value)> {
    state.lock().unwrap().requests.push(request.clone());
    if request.method == "POST" && request.path == "/_matrix/client/v3/login" {
        return login(request);
    }
    if request.authorization != format!("Bearer {TOKEN}") {
        return error(401, "M_UNKNOWN_TOKEN", "Invalid access token passed.");
    }
    let Some(path) = request.path.strip_prefix("/_matrix/client/v3/") else {
        return error(404, "M_UNRECOGNIZED", "Unrecognized request");
    };
    let segments: Vec<&str> = path.split('/').collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["account", "whoami"]) => Some((200, json!({"user_id": BOT, "device_id": "OXIDEVICE"}))),
        ("GET", ["sync"]) => sync(request, state).await,
        ("POST", ["rooms", room, "join"]) => {
            let mut state = state.lock().unwrap();
            state.pending_invites.retain(|(invited, _)| invited != room);
            state.members.entry((*room).to_owned()).or_insert(3);
            Some((200, json!({"room_id": room})))
        }
        ("GET", ["rooms", room, "joined_members"]) => {
            let count = state.lock().unwrap().members.get(*room).copied();
            let Some(count) = count else { return error(403, "M_FORBIDDEN", "not in room") };
            let joined: serde_json::Map<String, Value> =
                (0..count).map(|n| (format!("@member{n}:fake.test"), json!({"display_name": null}))).collect();
            Some((200, json!({"joined": joined})))
        }
        ("PUT", ["rooms", _, "typing", user]) if *user == BOT => Some((200, json!({}))),
        ("PUT", ["rooms", room, "send", "m.room.message", txn]) => {
            let mut state = state.lock().unwrap();
            state.sends += 1;
            let nth = state.sends;
            if let Some(status) = state.send_failures.remove(&nth) {
                return error(status, "M_UNKNOWN", "scripted failure");
            }
            let known = state.transactions.get(*txn).cloned();
            let event_id = known.unwrap_or_else(|| {
                let event_id = format!("$sent{}", state.sent.len() + 1);
                state.transactions.insert((*txn).to_owned(), event_id.clone());
                let sent = Sent { room: (*room).to_owned(), txn: (*txn).to_owned(), content: request.body.clone() };
                state.sent.push(sent);
                event_id
            });
            Some((200, json!({"event_id": event_id})))
        }
        _ => error(404, "M_UNRECOGNIZED", "Unrecognized request"),
    }
}

/// `POST /login` with a password: the fake's token for the right one.
fn login(request: &Request) -> Option<(u16, Value)> {
    let body = &request.body;
    let right = body["type"] == "m.login.password" && body["identifier"]["user"] == BOT && body["password"] == PASSWORD;
    if !right {
        return error(403, "M_FORBIDDEN", "Invalid username or password");
    }
    let device = body["device_id"].as_str().unwrap_or("NEWDEVICE");
    Some((200, json!({"user_id": BOT, "access_token": TOKEN, "device_id": device, "home_server": "fake.test"})))
}

/// A `/sync`: a scripted failure, the position from scratch, the batch after `since`, or an
/// empty answer once the hold is over.
async fn sync(request: &Request, state: &Mutex<State>) -> Option<(u16, Value)> {
    match state.lock().unwrap().sync_failures.pop_front() {
        Some(SyncFailure::Status(status, errcode)) => return error(status, errcode, "scripted failure"),
        Some(SyncFailure::Cut) => return None,
        None => {}
    }
    let Some(since) = request.query.get("since") else {
        let state = state.lock().unwrap();
        let invites: serde_json::Map<String, Value> = state
            .pending_invites
            .iter()
            .map(|(room, inviter)| {
                let event = json!({"type": "m.room.member", "state_key": BOT, "sender": inviter, "content": {"membership": "invite"}});
                (room.clone(), json!({"invite_state": {"events": [event]}}))
            })
            .collect();
        return Some((200, json!({"next_batch": format!("s{}", state.batches.len()), "rooms": {"invite": invites}})));
    };
    let position: usize = since.strip_prefix('s').and_then(|n| n.parse().ok()).unwrap_or(0);
    let timeout =
        request.query.get("timeout").and_then(|t| t.parse().ok()).map_or(Duration::ZERO, Duration::from_millis);
    let deadline = Instant::now() + timeout.min(LONGEST_HOLD);
    loop {
        if let Some(rooms) = state.lock().unwrap().batches.get(position) {
            return Some((200, json!({"next_batch": format!("s{}", position + 1), "rooms": rooms})));
        }
        if Instant::now() >= deadline {
            return Some((200, json!({"next_batch": since, "rooms": {}})));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
