//! A fake signal-cli daemon for the Signal channel's tests: its HTTP interface on 127.0.0.1
//! (`GET /api/v1/check`, `GET /api/v1/events` as server-sent events, `POST /api/v1/rpc` with
//! JSON-RPC 2.0 `send`), recording every call. A test pushes `receive` events to the open event
//! streams, cuts them, or scripts an error answer for the next `send`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::Instant;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot's account.
pub const ACCOUNT: &str = "+15550009999";
/// The bot's UUID, as mentions of it carry.
pub const ACCOUNT_UUID: &str = "b0b0b0b0-0000-4000-8000-000000000001";

/// One JSON-RPC call.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcCall {
    /// E.g. `send`.
    pub method: String,
    /// Its params.
    pub params: Value,
}

enum Command {
    Event(String),
    /// Close the stream without a word.
    Cut,
}

#[derive(Default)]
struct State {
    calls: Vec<RpcCall>,
    /// One queue per event stream opened, oldest first.
    streams: Vec<UnboundedSender<Command>>,
    checks: usize,
    /// Error messages for the next `send` calls.
    send_errors: VecDeque<String>,
}

/// The running fake. Dropping it stops the server.
pub struct FakeSignal {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The server's thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeSignal {
    /// Starts the daemon's HTTP interface on a free port.
    pub fn start() -> FakeSignal {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-signal", move || async move {
            let listener = TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(connection(socket, server_state.clone()));
            }
        });
        FakeSignal { addr, state, _server: server }
    }

    /// A `channels.signal` section for this fake, with `extra` keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({"phoneNumber": ACCOUNT, "daemonHost": "127.0.0.1", "daemonPort": self.addr.port()});
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        config
    }

    /// Waits until `count` event streams have been opened.
    pub async fn wait_streams(&self, count: usize) {
        self.wait_for(&format!("{count} event streams"), |state| (state.streams.len() >= count).then_some(())).await;
    }

    /// How many times `/api/v1/check` was asked.
    pub fn checks(&self) -> usize {
        self.state.lock().unwrap().checks
    }

    /// Sends a `receive` event carrying `envelope` on the newest stream.
    pub async fn receive(&self, envelope: Value) {
        self.wait_streams(1).await;
        let data = json!({"envelope": envelope, "account": ACCOUNT}).to_string();
        self.send(Command::Event(format!("event:receive\ndata:{data}\n\n")));
    }

    /// Closes the newest event stream.
    pub async fn cut(&self) {
        self.wait_streams(1).await;
        self.send(Command::Cut);
    }

    fn send(&self, command: Command) {
        let state = self.state.lock().unwrap();
        assert!(state.streams.last().unwrap().send(command).is_ok(), "the newest event stream is closed");
    }

    /// Makes the next `send` call fail with this message.
    pub fn fail_next_send(&self, message: &str) {
        self.state.lock().unwrap().send_errors.push_back(message.to_owned());
    }

    /// The calls of `method` so far.
    pub fn calls(&self, method: &str) -> Vec<RpcCall> {
        self.state.lock().unwrap().calls.iter().filter(|call| call.method == method).cloned().collect()
    }

    /// Waits until `method` was called `count` times; returns those calls.
    pub async fn wait_calls(&self, method: &str, count: usize) -> Vec<RpcCall> {
        self.wait_for(&format!("{count} calls of {method}"), |state| {
            let calls: Vec<RpcCall> = state.calls.iter().filter(|call| call.method == method).cloned().collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    async fn wait_for<T>(&self, what: &str, found: impl Fn(&State) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(value) = found(&self.state.lock().unwrap()) {
                return value;
            }
            assert!(Instant::now() < deadline, "fake signal-cli: no {what} within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// An envelope with a text message from `number` (named `name`) sent at `timestamp`.
pub fn direct_text(number: &str, name: &str, text: &str, timestamp: u64) -> Value {
    json!({"source": number, "sourceNumber": number, "sourceUuid": format!("uuid-{}", number.trim_start_matches('+')),
           "sourceName": name, "sourceDevice": 1, "timestamp": timestamp,
           "dataMessage": {"timestamp": timestamp, "message": text, "expiresInSeconds": 0, "viewOnce": false}})
}

/// An envelope with a text message in group `group`; `mention_bot` puts a mention of the bot
/// (the placeholder character and its mention entry) in front.
pub fn group_text(number: &str, name: &str, group: &str, text: &str, timestamp: u64, mention_bot: bool) -> Value {
    let mut envelope = direct_text(number, name, text, timestamp);
    let data = &mut envelope["dataMessage"];
    data["groupInfo"] = json!({"groupId": group, "groupName": "Friends", "revision": 3, "type": "DELIVER"});
    if mention_bot {
        data["message"] = json!(format!("\u{fffc} {text}"));
        data["mentions"] = json!([{"name": ACCOUNT, "number": ACCOUNT, "uuid": ACCOUNT_UUID, "start": 0, "length": 1}]);
    }
    envelope
}

async fn connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some((method, path, body)) = read_request(&mut socket).await {
        let stream = socket.get_mut();
        match (method.as_str(), path.as_str()) {
            ("GET", "/api/v1/events") => return events(stream, &state).await,
            ("GET", "/api/v1/check") => {
                state.lock().unwrap().checks += 1;
                if stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.is_err() {
                    return;
                }
            }
            ("POST", "/api/v1/rpc") => {
                let answer = rpc(&body, &state).to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    answer.len()
                );
                if stream.write_all(format!("{head}{answer}").as_bytes()).await.is_err() {
                    return;
                }
            }
            _ => {
                if stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Serves one event stream until the test cuts it or the client goes.
async fn events(stream: &mut TcpStream, state: &Mutex<State>) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let (commands, mut queue) = mpsc::unbounded_channel();
    state.lock().unwrap().streams.push(commands);
    while let Some(Command::Event(event)) = queue.recv().await {
        if stream.write_all(event.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The JSON-RPC answer to one request.
fn rpc(body: &[u8], state: &Mutex<State>) -> Value {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id = request["id"].clone();
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    let mut state = state.lock().unwrap();
    state.calls.push(RpcCall { method: method.clone(), params: request["params"].clone() });
    match method.as_str() {
        "send" => match state.send_errors.pop_front() {
            Some(message) => json!({"jsonrpc": "2.0", "error": {"code": -1, "message": message}, "id": id}),
            None => {
                let timestamp = 1_700_000_100_000_u64 + state.calls.len() as u64;
                json!({"jsonrpc": "2.0", "result": {"timestamp": timestamp, "results": [{"type": "SUCCESS"}]}, "id": id})
            }
        },
        _ => json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not implemented"}, "id": id}),
    }
}

async fn read_request(socket: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let method = words.next()?.to_owned();
    let path = words.next()?.to_owned();
    let mut length = 0;
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    Some((method, path, body))
}
