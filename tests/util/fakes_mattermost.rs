//! A fake Mattermost server for the Mattermost channel's tests, on one port like the real one:
//! the REST API v4 (`users/me`, `posts`, `posts/{id}/patch`, `reactions`, `channels/{id}`;
//! another token than the fake's gets 401) recording every request, and the WebSocket at
//! `/api/v4/websocket`, which waits for an `authentication_challenge`, says `hello` with a
//! connection id, and sends the `posted` events a test injects, each with the connection's next
//! sequence number. Events injected while no socket is open wait in the connection's queue; a
//! client that connects again with `connection_id` and `sequence_number` gets them replayed,
//! as Mattermost's reliable WebSockets do.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::server::{Request as WsRequest, Response as WsResponse};

use crate::TempDir;
use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's user id.
pub const BOT_ID: &str = "botuserid00000000000000000";
/// The bot's username.
pub const BOT_NAME: &str = "oxibot";
/// The token the fake's config holds.
pub const TOKEN: &str = "mm-fake-token";
/// The team of the fake's channels.
pub const TEAM: &str = "team1";

/// One REST request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET`, `POST`, `PUT`, ….
    pub method: String,
    /// The path, e.g. `/api/v4/posts`.
    pub path: String,
    /// The `Authorization` header.
    pub authorization: String,
    /// The JSON body (`null` when there was none).
    pub body: Value,
}

/// One WebSocket connection attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    /// The query string of the upgrade request (`connection_id=…&sequence_number=…` to resume).
    pub query: String,
    /// The token of its authentication challenge, once sent.
    pub token: Option<String>,
}

/// A server-side connection: its id, its next sequence number, the events of it, and the
/// socket currently serving it.
struct Session {
    id: String,
    next_seq: u64,
    events: Vec<(u64, String)>,
    socket: Option<UnboundedSender<Command>>,
}

enum Command {
    Text(String),
    /// Drop the TCP connection without a closing handshake.
    Cut,
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    connections: Vec<Connection>,
    sessions: Vec<Session>,
    posts: HashMap<String, Value>,
    created: u32,
    /// Authenticated sockets so far.
    greeted: usize,
}

/// The running fake. Dropping it stops the server.
pub struct FakeMattermost {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The channel's media directory, where it keeps its resume point.
    media: TempDir,
    /// The server's thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeMattermost {
    /// Starts the server on a free port.
    pub fn start() -> FakeMattermost {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-mattermost", move || async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, server_state.clone()));
            }
        });
        FakeMattermost { addr, state, media: TempDir::new("mattermost-media"), _server: server }
    }

    /// The `serverUrl` to configure.
    pub fn server_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `channels.mattermost` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config =
            json!({"serverUrl": self.server_url(), "token": TOKEN, "reactEmoji": "", "mediaDir": self.media.path()});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` sockets have been authenticated and greeted.
    pub async fn wait_greeted(&self, count: usize) {
        self.wait_for(&format!("{count} greeted websockets"), |state| (state.greeted >= count).then_some(())).await;
    }

    /// The WebSocket connection attempts so far.
    pub fn connections(&self) -> Vec<Connection> {
        self.state.lock().unwrap().connections.clone()
    }

    /// Sends a `posted` event for `post` on the newest server-side connection (queued when
    /// its socket is gone).
    pub async fn post(&self, post: Value, channel_type: &str) {
        self.wait_greeted(1).await;
        let mut state = self.state.lock().unwrap();
        let session = state.sessions.last_mut().unwrap();
        let seq = session.next_seq;
        session.next_seq += 1;
        let event = json!({"event": "posted", "seq": seq,
                           "data": {"channel_type": channel_type, "post": post.to_string(), "sender_name": "@ada", "team_id": TEAM},
                           "broadcast": {"channel_id": post["channel_id"], "team_id": if channel_type == "D" { "" } else { TEAM }, "user_id": ""}})
        .to_string();
        session.events.push((seq, event.clone()));
        if let Some(socket) = &session.socket {
            let _ = socket.send(Command::Text(event));
        }
    }

    /// Drops the newest socket without a closing handshake.
    pub async fn cut(&self) {
        self.wait_greeted(1).await;
        let mut state = self.state.lock().unwrap();
        if let Some(socket) = state.sessions.last_mut().unwrap().socket.take() {
            let _ = socket.send(Command::Cut);
        }
    }

    /// The REST requests of `method` whose path ends with `suffix`.
    pub fn requests(&self, method: &str, suffix: &str) -> Vec<Request> {
        let state = self.state.lock().unwrap();
        let matching =
            state.requests.iter().filter(|request| request.method == method && request.path.ends_with(suffix));
        matching.cloned().collect()
    }

    /// Waits until `count` requests of `method` to paths ending with `suffix` were made.
    pub async fn wait_requests(&self, method: &str, suffix: &str, count: usize) -> Vec<Request> {
        self.wait_for(&format!("{count} {method} …{suffix}"), |state| {
            let found: Vec<Request> = state
                .requests
                .iter()
                .filter(|request| request.method == method && request.path.ends_with(suffix))
                .cloned()
                .collect();
            (found.len() >= count).then_some(found)
        })
        .await
    }

    /// The current text of post `id`.
    pub fn post_text(&self, id: &str) -> Option<String> {
        self.state.lock().unwrap().posts.get(id).and_then(|post| post["message"].as_str().map(str::to_owned))
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(Instant::now() < deadline, "fake mattermost: no {what} within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A post by `user` in `channel` (26-character ids are not needed by the channel).
pub fn post(id: &str, channel: &str, user: &str, message: &str) -> Value {
    json!({"id": id, "channel_id": channel, "user_id": user, "message": message, "root_id": "", "type": "",
           "create_at": 1_700_000_000_000_u64, "update_at": 1_700_000_000_000_u64, "props": {}, "file_ids": []})
}

/// A reply by `user` in the thread of `root`.
pub fn thread_post(id: &str, channel: &str, user: &str, message: &str, root: &str) -> Value {
    let mut post = post(id, channel, user, message);
    post["root_id"] = json!(root);
    post
}

/// Serves one TCP connection: a WebSocket upgrade of `/api/v4/websocket`, else REST.
async fn serve(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut head = [0u8; 64];
    let Ok(read) = socket.peek(&mut head).await else { return };
    if head[..read].starts_with(b"GET /api/v4/websocket") {
        websocket(socket, state).await;
    } else {
        rest(socket, state).await;
    }
}

async fn websocket(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut query = String::new();
    // The callback's error type is tungstenite's, not ours.
    #[allow(clippy::result_large_err)]
    let keep_query = |request: &WsRequest, response: WsResponse| {
        query = request.uri().query().unwrap_or_default().to_owned();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(socket, keep_query).await else { return };
    let index = {
        let mut state = state.lock().unwrap();
        state.connections.push(Connection { query: query.clone(), token: None });
        state.connections.len() - 1
    };
    // Nothing is sent before the authentication challenge.
    let token = loop {
        match socket.next().await {
            Some(Ok(WsMessage::Text(text))) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                if frame["action"] == "authentication_challenge" {
                    break frame["data"]["token"].as_str().unwrap_or_default().to_owned();
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return,
        }
    };
    state.lock().unwrap().connections[index].token = Some(token.clone());
    if token != TOKEN {
        let fail = json!({"status": "FAIL", "seq_reply": 1, "error": {"id": "api.web_socket_router.not_authenticated.app_error", "message": "invalid token"}});
        let _ = socket.send(WsMessage::Text(fail.to_string().into())).await;
        let _ = socket.close(None).await;
        return;
    }
    let _ = socket.send(WsMessage::Text(json!({"status": "OK", "seq_reply": 1}).to_string().into())).await;
    let (commands, mut queue) = mpsc::unbounded_channel();
    let greeting = attach(&state, &query, commands);
    for frame in greeting {
        if socket.send(WsMessage::Text(frame.into())).await.is_err() {
            return;
        }
    }
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
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

/// Attaches a socket to the session its query resumes, or to a new one; returns the frames to
/// send first: the hello, then (when resuming) the events from the asked sequence number on.
fn attach(state: &Mutex<State>, query: &str, socket: UnboundedSender<Command>) -> Vec<String> {
    let params: HashMap<&str, &str> = query.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let mut state = state.lock().unwrap();
    state.greeted += 1;
    let resumed = params.get("connection_id").and_then(|id| state.sessions.iter().position(|s| s.id == *id));
    let from: u64 = params.get("sequence_number").and_then(|n| n.parse().ok()).unwrap_or(0);
    let index = resumed.unwrap_or_else(|| {
        let id = format!("conn{}", state.sessions.len() + 1);
        state.sessions.push(Session { id, next_seq: 0, events: Vec::new(), socket: None });
        state.sessions.len() - 1
    });
    let session = &mut state.sessions[index];
    session.socket = Some(socket);
    let seq = session.next_seq;
    session.next_seq += 1;
    let hello = json!({"event": "hello", "seq": seq, "broadcast": {"user_id": BOT_ID},
                       "data": {"connection_id": session.id, "server_version": "9.11.0.fake"}});
    let mut frames = vec![hello.to_string()];
    if resumed.is_some() {
        frames
            .extend(session.events.iter().filter(|(event_seq, _)| *event_seq >= from).map(|(_, event)| event.clone()));
    }
    frames
}

async fn rest(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(request) = read_request(&mut socket).await {
        let (status, body) = answer(&request, &state);
        state.lock().unwrap().requests.push(request);
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
    let path = words.next()?.to_owned();
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
    Some(Request { method, path, authorization, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

fn error(status: u16, id: &str, message: &str) -> (u16, Value) {
    (status, json!({"id": id, "message": message, "status_code": status}))
}

/// Status and body for one REST request.
fn answer(request: &Request, state: &Mutex<State>) -> (u16, Value) {
    if request.authorization != format!("Bearer {TOKEN}") {
        return error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.");
    }
    let Some(path) = request.path.strip_prefix("/api/v4/") else {
        return error(404, "api.context.404.app_error", "not found");
    };
    let segments: Vec<&str> = path.split('/').collect();
    let mut state = state.lock().unwrap();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["users", "me"]) => (200, json!({"id": BOT_ID, "username": BOT_NAME, "is_bot": true})),
        ("POST", ["posts"]) => {
            state.created += 1;
            let id = format!("botpost{}", state.created);
            let mut post = request.body.clone();
            post["id"] = json!(id);
            post["user_id"] = json!(BOT_ID);
            state.posts.insert(id, post.clone());
            (201, post)
        }
        ("PUT", ["posts", id, "patch"]) => match state.posts.get_mut(*id) {
            Some(post) => {
                post["message"] = request.body["message"].clone();
                (200, post.clone())
            }
            None => error(404, "app.post.get.app_error", "post not found"),
        },
        ("POST", ["reactions"]) => (201, request.body.clone()),
        ("GET", ["channels", id]) => (200, json!({"id": id, "type": "O", "team_id": TEAM})),
        _ => error(404, "api.context.404.app_error", "not found"),
    }
}
