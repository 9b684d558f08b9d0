//! A fake Telegram Bot API for tests: a real HTTP/1.1 server on 127.0.0.1 answering the
//! methods the Telegram channel uses with the real JSON (`{"ok": true, "result": …}`), and
//! recording every call.
//!
//! `getUpdates` behaves like Telegram's: updates stay queued until a call's `offset` passes
//! them, and a call with nothing to return is held until an update is queued or its `timeout`
//! runs out. `sendMessage` and `editMessageText` check the HTML the way Telegram does (known
//! tags, balanced, at most 4096 characters) and answer 400 otherwise. Files registered with
//! [`FakeTelegram::add_file`] are served by `getFile` and `file/bot<token>/<path>`. It runs on
//! its own thread with its own tokio runtime and stops when dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::background::BackgroundServer;
use crate::channels::WAIT;

/// The bot token the fake accepts.
pub const TOKEN: &str = "123456:fake-token";
/// The bot's user id.
pub const BOT_ID: i64 = 999;
/// The bot's username.
pub const BOT_USERNAME: &str = "oxitestbot";
/// The id of the first queued update.
pub const FIRST_UPDATE_ID: i64 = 100;

/// One Bot API call as the fake received it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method, e.g. `sendMessage`.
    pub method: String,
    /// Its parameters (JSON body, or multipart fields: files as `{"filename", "size"}`).
    pub params: Value,
    /// When it arrived.
    pub at: Instant,
}

/// A file `getFile` knows.
struct FakeFile {
    unique_id: String,
    path: String,
    bytes: Vec<u8>,
}

/// An error to answer the next call of a method with.
struct Failure {
    method: String,
    code: u16,
    description: String,
}

#[derive(Default)]
struct State {
    /// Updates not yet confirmed by an offset.
    updates: Vec<Value>,
    next_update_id: i64,
    next_message_id: i64,
    calls: Vec<Call>,
    files: HashMap<String, FakeFile>,
    failures: Vec<Failure>,
}

/// The running fake. Dropping it stops the server and joins its thread.
pub struct FakeTelegram {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The server thread; stops when dropped.
    _server: BackgroundServer,
}

impl FakeTelegram {
    /// Starts the fake on a free port.
    pub fn start() -> FakeTelegram {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state =
            Arc::new(Mutex::new(State { next_update_id: FIRST_UPDATE_ID, next_message_id: 500, ..State::default() }));
        let server_state = state.clone();
        let server = BackgroundServer::start("fake-telegram", move || serve(listener, server_state));
        FakeTelegram { addr, state, _server: server }
    }

    /// The `apiBase` to configure: `http://127.0.0.1:PORT`.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A channel config pointing at the fake: its token, 1 s polls, `media_dir`.
    pub fn config(&self, media_dir: &std::path::Path) -> Value {
        json!({"enabled": true, "token": TOKEN, "apiBase": self.api_base(), "pollTimeout": 1, "mediaDir": media_dir, "allowFrom": ["*"]})
    }

    /// Queues an update carrying `message`; returns its update id.
    pub fn push_message(&self, message: Value) -> i64 {
        let mut state = self.state.lock().unwrap();
        let id = state.next_update_id;
        state.next_update_id += 1;
        state.updates.push(json!({"update_id": id, "message": message}));
        id
    }

    /// Queues a `callback_query` update: `from` pressed the inline button with `data` under
    /// the bot's message `message` (as `sendMessage` returned it); returns its update id.
    pub fn push_button_press(&self, from: &Value, message: &Value, data: &str) -> i64 {
        let mut state = self.state.lock().unwrap();
        let id = state.next_update_id;
        state.next_update_id += 1;
        let query =
            json!({"id": format!("cb{id}"), "from": from, "message": message, "chat_instance": "1", "data": data});
        state.updates.push(json!({"update_id": id, "callback_query": query}));
        id
    }

    /// Makes `file_id` downloadable as `path` with `bytes`.
    pub fn add_file(&self, file_id: &str, unique_id: &str, path: &str, bytes: &[u8]) {
        let file = FakeFile { unique_id: unique_id.into(), path: path.into(), bytes: bytes.to_vec() };
        self.state.lock().unwrap().files.insert(file_id.into(), file);
    }

    /// Answers the next call of `method` with error `code` and `description`.
    pub fn fail_next(&self, method: &str, code: u16, description: &str) {
        let failure = Failure { method: method.into(), code, description: description.into() };
        self.state.lock().unwrap().failures.push(failure);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The parameters of every call of `method` so far.
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        self.calls().into_iter().filter(|c| c.method == method).map(|c| c.params).collect()
    }

    /// Waits until `method` was called with parameters matching `wanted`; returns them.
    pub async fn wait_for(&self, method: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(params) = self.calls_of(method).into_iter().find(|p| wanted(p)) {
                return params;
            }
            assert!(Instant::now() < deadline, "no matching {method} call within {WAIT:?}; calls: {:#?}", self.calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A user who writes to the bot.
pub fn user(id: i64, first_name: &str, username: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": first_name, "username": username})
}

/// A text message from `from` in a private chat with them.
pub fn private_text(message_id: i64, from: &Value, text: &str) -> Value {
    json!({"message_id": message_id, "date": 1_700_000_000, "from": from, "chat": {"id": from["id"], "type": "private", "first_name": from["first_name"]}, "text": text})
}

/// A text message from `from` in the supergroup `chat_id`.
pub fn group_text(message_id: i64, chat_id: i64, from: &Value, text: &str) -> Value {
    json!({"message_id": message_id, "date": 1_700_000_000, "from": from, "chat": {"id": chat_id, "type": "supergroup", "title": "Team"}, "text": text})
}

async fn serve(listener: std::net::TcpListener, state: Arc<Mutex<State>>) {
    let listener = TcpListener::from_std(listener).unwrap();
    loop {
        if let Ok((socket, _)) = listener.accept().await {
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(socket, state.clone()));
        }
    }
}

/// One HTTP request.
struct Request {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

async fn connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    while let Some(request) = read_request(&mut socket).await {
        let (status, content_type, body) = respond(request, &state).await;
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            reason(status),
            body.len()
        );
        let stream = socket.get_mut();
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&body).await.is_err() {
            return;
        }
    }
}

async fn read_request(socket: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let (mut length, mut content_type) = (0, String::new());
    loop {
        line.clear();
        socket.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "content-type" => content_type = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.ok()?;
    Some(Request { path, content_type, body })
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Status",
    }
}

/// Status, content type and body for one request.
async fn respond(request: Request, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    if let Some(file_path) = request.path.strip_prefix(&format!("/file/bot{TOKEN}/")) {
        let state = state.lock().unwrap();
        return match state.files.values().find(|f| f.path == file_path) {
            Some(file) => (200, "application/octet-stream", file.bytes.clone()),
            None => (404, "text/plain", b"not found".to_vec()),
        };
    }
    let Some(method) = request.path.strip_prefix(&format!("/bot{TOKEN}/")).map(str::to_owned) else {
        return answer(Err((401, "Unauthorized".into())));
    };
    let params = parse_params(&request);
    let failure = {
        let mut state = state.lock().unwrap();
        state.calls.push(Call { method: method.clone(), params: params.clone(), at: Instant::now() });
        let index = state.failures.iter().position(|f| f.method == method);
        index.map(|i| state.failures.remove(i))
    };
    if let Some(failure) = failure {
        return answer(Err((failure.code, failure.description)));
    }
    if method == "getUpdates" {
        return answer(Ok(get_updates(&params, state).await));
    }
    answer(call(&method, &params, &mut state.lock().unwrap()))
}

fn answer(result: Result<Value, (u16, String)>) -> (u16, &'static str, Vec<u8>) {
    match result {
        Ok(result) => (200, "application/json", json!({"ok": true, "result": result}).to_string().into_bytes()),
        Err((code, description)) => (
            code,
            "application/json",
            json!({"ok": false, "error_code": code, "description": description}).to_string().into_bytes(),
        ),
    }
}

/// The updates from `offset` on (confirming the ones before), held up to `timeout` seconds
/// while there are none.
async fn get_updates(params: &Value, state: &Mutex<State>) -> Value {
    let offset = params["offset"].as_i64();
    let deadline = Instant::now() + Duration::from_secs(params["timeout"].as_u64().unwrap_or(0));
    loop {
        {
            let mut state = state.lock().unwrap();
            if let Some(offset) = offset {
                state.updates.retain(|u| u["update_id"].as_i64().unwrap() >= offset);
            }
            if !state.updates.is_empty() || Instant::now() >= deadline {
                return Value::Array(state.updates.clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every method but `getUpdates`.
fn call(method: &str, params: &Value, state: &mut State) -> Result<Value, (u16, String)> {
    match method {
        "getMe" => Ok(json!({"id": BOT_ID, "is_bot": true, "first_name": "Oxi", "username": BOT_USERNAME})),
        "sendMessage" | "editMessageText" => {
            check_message(params)?;
            Ok(sent_message(params, state, method == "sendMessage"))
        }
        "sendPhoto" | "sendDocument" => Ok(sent_message(params, state, true)),
        "sendChatAction" | "deleteMessage" | "answerCallbackQuery" => Ok(json!(true)),
        "getFile" => {
            let file_id = params["file_id"].as_str().unwrap_or_default();
            let file = state.files.get(file_id).ok_or((400, "Bad Request: invalid file_id".to_owned()))?;
            Ok(
                json!({"file_id": file_id, "file_unique_id": file.unique_id, "file_size": file.bytes.len(), "file_path": file.path}),
            )
        }
        _ => Err((404, "Not Found".into())),
    }
}

/// The Message object Telegram returns for a sent (or edited) message.
fn sent_message(params: &Value, state: &mut State, new: bool) -> Value {
    let message_id = if new {
        state.next_message_id += 1;
        json!(state.next_message_id)
    } else {
        params["message_id"].clone()
    };
    json!({"message_id": message_id, "date": 1_700_000_000, "chat": {"id": params["chat_id"], "type": "private"},
           "from": {"id": BOT_ID, "is_bot": true, "first_name": "Oxi", "username": BOT_USERNAME}, "text": params["text"]})
}

/// Rejects what Telegram would: an empty or too long text, or HTML it cannot parse.
fn check_message(params: &Value) -> Result<(), (u16, String)> {
    let text = params["text"].as_str().unwrap_or_default();
    let visible = if params["parse_mode"] == "HTML" { visible_html(text)? } else { text.to_owned() };
    if visible.trim().is_empty() {
        return Err((400, "Bad Request: message text is empty".into()));
    }
    if visible.encode_utf16().count() > 4096 {
        return Err((400, "Bad Request: message is too long".into()));
    }
    Ok(())
}

/// The text of Telegram-style HTML, or the parse error Telegram would give.
fn visible_html(html: &str) -> Result<String, (u16, String)> {
    const TAGS: [&str; 15] = [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
        "span",
    ];
    let bad = |why: String| (400, format!("Bad Request: can't parse entities: {why}"));
    let mut open: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').ok_or_else(|| bad("unclosed tag".into()))?;
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                if open.pop().as_deref() != Some(name) {
                    return Err(bad(format!("unexpected end tag {name}")));
                }
            } else {
                let name = tag.split_whitespace().next().unwrap_or_default();
                if !TAGS.contains(&name) {
                    return Err(bad(format!("unsupported start tag \"{name}\"")));
                }
                open.push(name.to_owned());
            }
            rest = &rest[end + 1..];
        } else if c == '&' {
            let end = rest.find(';').ok_or_else(|| bad("unfinished entity".into()))?;
            text.push(match &rest[..=end] {
                "&lt;" => '<',
                "&gt;" => '>',
                "&amp;" => '&',
                "&quot;" => '"',
                other => return Err(bad(format!("unsupported entity {other}"))),
            });
            rest = &rest[end + 1..];
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    match open.last() {
        Some(name) => Err(bad(format!("can't find end tag corresponding to start tag \"{name}\""))),
        None => Ok(text),
    }
}

/// The request's parameters: its JSON body, or its multipart fields.
fn parse_params(request: &Request) -> Value {
    match request.content_type.split_once("boundary=") {
        Some((_, boundary)) if request.content_type.starts_with("multipart/form-data") => {
            multipart_fields(&request.body, boundary)
        }
        _ => serde_json::from_slice(&request.body).unwrap_or_else(|_| json!({})),
    }
}

/// Multipart fields as JSON: text fields as strings, files as `{"filename", "size"}`.
fn multipart_fields(body: &[u8], boundary: &str) -> Value {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut fields = serde_json::Map::new();
    for part in split_bytes(body, &delimiter) {
        let Some(head_end) = part.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&part[..head_end]);
        let content = &part[head_end + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let attribute =
            |key: &str| head.split(&format!("{key}=\"")).nth(1).and_then(|s| s.split('"').next()).map(str::to_owned);
        let Some(name) = attribute("name") else { continue };
        let value = match attribute("filename") {
            Some(filename) => json!({"filename": filename, "size": content.len()}),
            None => json!(String::from_utf8_lossy(content)),
        };
        fields.insert(name, value);
    }
    Value::Object(fields)
}

/// The pieces of `bytes` between occurrences of `delimiter`.
fn split_bytes<'a>(bytes: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut k = 0;
    while k + delimiter.len() <= bytes.len() {
        if &bytes[k..k + delimiter.len()] == delimiter {
            pieces.push(&bytes[start..k]);
            k += delimiter.len();
            start = k;
        } else {
            k += 1;
        }
    }
    pieces.push(&bytes[start..]);
    pieces
}
