//! A scripted LLM for tests: a real HTTP/1.1 server on 127.0.0.1 that answers OpenAI Chat
//! Completions (`POST …/chat/completions`) and Anthropic Messages (`POST …/messages`) with
//! the replies a test queued, whole or as SSE streams, and records every request body. It
//! also answers OpenAI embeddings (`POST …/embeddings`) with deterministic vectors: a hashed
//! bag of words ([`embed`]), so texts sharing words are similar, and lists one model at
//! `GET …/v1/models`, as a local model server does.
//!
//! It runs on its own thread with its own tokio runtime, so in-process tests and tests that
//! spawn the `oxibot` binary use it alike. It stops when dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::background::BackgroundServer;

/// Connections the listener queues before accepting them: a burst of a thousand sessions
/// (the gateway benchmark) must not meet dropped SYNs and their one-second retry.
const LISTEN_BACKLOG: u32 = 4096;

/// Input tokens every reply reports (cached ones included).
pub const PROMPT_TOKENS: u64 = 12;
/// Output tokens every reply reports.
pub const COMPLETION_TOKENS: u64 = 5;
/// Cached input tokens every reply reports.
pub const CACHED_TOKENS: u64 = 3;
/// Reasoning tokens every OpenAI-compatible reply reports (within the completion tokens;
/// Anthropic replies report none of their own).
pub const REASONING_TOKENS: u64 = 2;

/// What the server answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A plain text answer.
    Text(String),
    /// Tool calls: (name, raw argument text); ids are `call_1`, `call_2`, … in serving order.
    ToolCalls(Vec<(String, String)>),
    /// Text and tool calls together.
    TextAndTools(String, Vec<(String, String)>),
    /// An error status with an optional `Retry-After` (seconds) and this body.
    Status { code: u16, retry_after: Option<u64>, body: String },
    /// Streams `after_chunks` text deltas of `text`, then closes the connection without the
    /// end marker; a non-streaming request gets half its body, then the close.
    CutStream { text: String, after_chunks: usize },
    /// 200 with a body (or stream event) that is not JSON.
    Malformed,
    /// Waits `delay_ms` before the first byte of the answer.
    SlowFirstToken { delay_ms: u64, text: String },
    /// Streams `after_chunks` text deltas of `text`, waits `delay_ms`, then streams the rest
    /// (a non-streaming request waits, then gets the whole answer).
    StallAfter { text: String, after_chunks: usize, delay_ms: u64 },
    /// Reasoning (OpenAI `reasoning_content`, Anthropic thinking with a signature), then text.
    Reasoning { reasoning: String, text: String },
}

/// Replies queued and requests seen, shared with the server thread.
#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    /// Replies for requests whose system prompt contains a marker, served before `replies`.
    routes: Vec<(String, VecDeque<Reply>)>,
    requests: Vec<Value>,
    /// The same requests' bodies as they arrived, byte for byte.
    raw_requests: Vec<Vec<u8>>,
    /// Bodies of embeddings requests (kept apart from the chat requests).
    embedding_requests: Vec<Value>,
    headers: Vec<Vec<(String, String)>>,
    calls_served: u32,
    /// Connections accepted (for diagnosing a client that never sends).
    connections: u32,
    /// Why each finished connection ended.
    dropped: Vec<String>,
    /// The model every reply names, when set; otherwise the one asked for.
    answering_model: Option<String>,
}

/// The running server. Dropping it stops the server and joins its thread.
pub struct ScriptedLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The server thread; stops when dropped.
    _server: BackgroundServer,
}

impl ScriptedLlm {
    /// Starts a server on a free port.
    pub fn start() -> ScriptedLlm {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
        let addr = socket.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let server_state = state.clone();
        let (listening, ready) = std::sync::mpsc::channel();
        let server = BackgroundServer::start("scripted-llm", move || async move {
            // Listening needs the server thread's runtime; `start` returns once it listens.
            let listener = socket.listen(LISTEN_BACKLOG).unwrap();
            let _ = listening.send(());
            serve(listener, server_state).await;
        });
        ready.recv().unwrap();
        ScriptedLlm { addr, state, _server: server }
    }

    /// The API base to configure: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply; replies are served in order, then `(no scripted reply)` text.
    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().replies.push_back(reply);
    }

    /// Queues a reply for the next request whose system prompt contains `marker` (e.g. the
    /// summariser's or Dream's prompt), whatever order it comes in; such requests take their
    /// replies from here while any are left, then from the main queue.
    pub fn route(&self, marker: &str, reply: Reply) {
        let mut state = self.state.lock().unwrap();
        match state.routes.iter_mut().find(|(m, _)| m == marker) {
            Some((_, queue)) => queue.push_back(reply),
            None => state.routes.push((marker.to_owned(), VecDeque::from([reply]))),
        }
    }

    /// Makes every later reply name `model` as the one that answered (as a router or an
    /// alias-resolving provider does), whatever model was asked for.
    pub fn answer_as(&self, model: &str) {
        self.state.lock().unwrap().answering_model = Some(model.to_owned());
    }

    /// The request bodies received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The chat requests' bodies as they arrived, byte for byte, in the order of [`Self::requests`].
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        self.state.lock().unwrap().raw_requests.clone()
    }

    /// The embeddings request bodies received so far, in order.
    pub fn embedding_requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().embedding_requests.clone()
    }

    /// Why each finished connection ended (diagnostics).
    pub fn dropped(&self) -> Vec<String> {
        self.state.lock().unwrap().dropped.clone()
    }

    /// How many connections the server has accepted.
    pub fn connections(&self) -> u32 {
        self.state.lock().unwrap().connections
    }

    /// The request headers received so far (names lowercased), in order.
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.state.lock().unwrap().headers.clone()
    }
}

async fn serve(listener: TcpListener, state: Arc<Mutex<State>>) {
    loop {
        if let Ok((socket, _)) = listener.accept().await {
            state.lock().unwrap().connections += 1;
            // Small writes (headers, SSE chunks) must not wait for delayed ACKs.
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(socket, state.clone()));
        }
    }
}

/// One HTTP request as read off the socket.
struct Request {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Serves requests on one connection until the client closes it or a reply cuts it.
async fn connection(socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut socket = BufReader::new(socket);
    loop {
        let request = match read_request(&mut socket).await {
            Ok(request) => request,
            Err(why) => {
                state.lock().unwrap().dropped.push(why);
                return;
            }
        };
        let keep_open = respond(socket.get_mut(), request, &state).await.unwrap_or(false);
        if !keep_open {
            let _ = socket.get_mut().shutdown().await;
            return;
        }
    }
}

/// Reads one request; `Err` says why the connection ends (a clean close between requests
/// included).
async fn read_request(socket: &mut BufReader<TcpStream>) -> Result<Request, String> {
    let mut line = String::new();
    match socket.read_line(&mut line).await {
        Ok(0) => return Err("closed between requests".into()),
        Ok(_) => {}
        Err(error) => return Err(format!("request line: {error}")),
    }
    let path = line.split_whitespace().nth(1).ok_or_else(|| format!("bad request line {line:?}"))?.to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        match socket.read_line(&mut line).await {
            Ok(0) => return Err("closed in the headers".into()),
            Ok(_) => {}
            Err(error) => return Err(format!("headers: {error}")),
        }
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        headers.push((name.trim().to_lowercase(), value.trim().to_owned()));
    }
    let length =
        headers.iter().find(|(name, _)| name == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    socket.read_exact(&mut body).await.map_err(|e| format!("body of {length} bytes: {e}"))?;
    Ok(Request { path, headers, body })
}

/// Dimensions of the scripted embeddings.
pub const EMBEDDING_DIMENSIONS: usize = 512;

/// Words the scripted embedding ignores.
const EMBEDDING_STOPWORDS: &[&str] = &["the", "and", "was", "did", "when", "what", "where", "who", "for", "with", "at"];

/// The scripted embedding of `text`: each lowercase word of two letters or more but a few
/// function words (and each word's 4-letter prefix, so `planted` and `plants` meet) hashed
/// into one of [`EMBEDDING_DIMENSIONS`] buckets, normalised to length 1. Deterministic across
/// runs and machines; similar only in shared words, not in meaning.
pub fn embed(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0f32; EMBEDDING_DIMENSIONS];
    let mut add = |token: &str, weight: f32| {
        let hash =
            token.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        vector[(hash % EMBEDDING_DIMENSIONS as u64) as usize] += weight;
    };
    let words = text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(str::to_lowercase);
    for word in words.filter(|w| !EMBEDDING_STOPWORDS.contains(&w.as_str())) {
        add(&word, 1.0);
        let prefix: String = word.chars().take(4).collect();
        if prefix.len() < word.len() {
            add(&format!("{prefix}~"), 0.5);
        }
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

/// The system prompt of a request in either wire format ("" when there is none).
pub fn system_prompt(body: &Value) -> String {
    match &body["system"] {
        Value::String(text) => return text.clone(),
        Value::Array(blocks) => return blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => {}
    }
    let first = &body["messages"][0];
    if first["role"] == "system" { first["content"].as_str().unwrap_or_default().to_owned() } else { String::new() }
}

/// The wire format a request was made in.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    OpenAi,
    Anthropic,
}

/// Answers one request; returns whether the connection stays usable.
async fn respond(socket: &mut TcpStream, request: Request, state: &Mutex<State>) -> std::io::Result<bool> {
    if request.path.ends_with("/v1/models") {
        let models = json!({"object": "list", "data": [{"id": "scripted-model", "object": "model"}]});
        write_response(socket, 200, &[], models.to_string().as_bytes()).await?;
        return Ok(true);
    }
    if request.path.ends_with("/embeddings") {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let inputs: Vec<String> = match &body["input"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(items) => items.iter().map(|i| i.as_str().unwrap_or_default().to_owned()).collect(),
            _ => Vec::new(),
        };
        state.lock().unwrap().embedding_requests.push(body.clone());
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embed(text)}))
            .collect();
        let reply = json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}});
        write_response(socket, 200, &[], reply.to_string().as_bytes()).await?;
        return Ok(true);
    }
    let format = if request.path.ends_with("/chat/completions") {
        Format::OpenAi
    } else if request.path.ends_with("/messages") {
        Format::Anthropic
    } else {
        write_response(socket, 404, &[], br#"{"error": {"message": "no such endpoint"}}"#).await?;
        return Ok(true);
    };
    let body: Value = serde_json::from_slice(&request.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
    let stream = body["stream"] == true;
    let asked = body["model"].as_str().unwrap_or("scripted").to_owned();
    let (reply, answer, model) = {
        let mut state = state.lock().unwrap();
        let model = state.answering_model.clone().unwrap_or(asked);
        state.requests.push(body);
        state.raw_requests.push(request.body.clone());
        state.headers.push(request.headers);
        let system = system_prompt(state.requests.last().unwrap_or(&Value::Null));
        let routed = state
            .routes
            .iter_mut()
            .find(|(marker, queue)| !queue.is_empty() && system.contains(marker.as_str()))
            .and_then(|(_, q)| q.pop_front());
        let reply =
            routed.or_else(|| state.replies.pop_front()).unwrap_or_else(|| Reply::Text("(no scripted reply)".into()));
        let answer = Answer::of(&reply, &mut state.calls_served);
        (reply, answer, model)
    };
    match reply {
        Reply::Status { code, retry_after, body } => {
            let headers: Vec<(&str, String)> =
                retry_after.map(|s| ("retry-after", s.to_string())).into_iter().collect();
            write_response(socket, code, &headers, body.as_bytes()).await?;
            Ok(true)
        }
        Reply::Malformed => send_malformed(socket, format, stream).await,
        Reply::CutStream { after_chunks, .. } => send_cut(socket, format, stream, &answer, &model, after_chunks).await,
        Reply::StallAfter { after_chunks, delay_ms, .. } => {
            if !stream {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                return send_whole(socket, format, &answer, &model).await;
            }
            write_stream_head(socket).await?;
            let all = events(format, &answer, &model);
            let (first, rest) = all.split_at(split_after_texts(&all, after_chunks));
            send_events(socket, first, usize::MAX).await?;
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            send_events(socket, rest, usize::MAX).await?;
            finish_stream(socket).await
        }
        Reply::SlowFirstToken { delay_ms, .. } => {
            if stream {
                write_stream_head(socket).await?;
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                send_events(socket, &events(format, &answer, &model), usize::MAX).await?;
                finish_stream(socket).await
            } else {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                send_whole(socket, format, &answer, &model).await
            }
        }
        _ if stream => {
            write_stream_head(socket).await?;
            send_events(socket, &events(format, &answer, &model), usize::MAX).await?;
            finish_stream(socket).await
        }
        _ => send_whole(socket, format, &answer, &model).await,
    }
}

/// The content of a reply, whatever its delivery.
#[derive(Default)]
struct Answer {
    reasoning: String,
    text: String,
    calls: Vec<(String, String, String)>,
}

impl Answer {
    fn of(reply: &Reply, calls_served: &mut u32) -> Answer {
        let mut with_calls = |text: &str, calls: &[(String, String)]| Answer {
            text: text.to_owned(),
            calls: calls
                .iter()
                .map(|(name, args)| {
                    *calls_served += 1;
                    (format!("call_{calls_served}"), name.clone(), args.clone())
                })
                .collect(),
            ..Answer::default()
        };
        match reply {
            Reply::Text(text)
            | Reply::CutStream { text, .. }
            | Reply::SlowFirstToken { text, .. }
            | Reply::StallAfter { text, .. } => with_calls(text, &[]),
            Reply::ToolCalls(calls) => with_calls("", calls),
            Reply::TextAndTools(text, calls) => with_calls(text, calls),
            Reply::Reasoning { reasoning, text } => {
                Answer { reasoning: reasoning.clone(), text: text.clone(), calls: Vec::new() }
            }
            Reply::Status { .. } | Reply::Malformed => Answer::default(),
        }
    }
}

/// Text cut after each space, so a stream has several deltas: `a b` → `a `, `b`.
fn pieces(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// Argument text in three roughly equal parts (on character boundaries).
fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// One SSE event to send, and whether it carries answer text (what `CutStream` counts).
struct Event {
    text: String,
    is_text: bool,
}

fn events(format: Format, answer: &Answer, model: &str) -> Vec<Event> {
    match format {
        Format::OpenAi => openai_events(answer, model),
        Format::Anthropic => anthropic_events(answer, model),
    }
}

fn openai_events(answer: &Answer, model: &str) -> Vec<Event> {
    let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let data = |value: Value, is_text: bool| Event { text: format!("data: {value}\n\n"), is_text };
    let mut out = vec![data(chunk(json!({"role": "assistant", "content": ""}), Value::Null), false)];
    out.extend(
        pieces(&answer.reasoning).into_iter().map(|p| data(chunk(json!({"reasoning_content": p}), Value::Null), false)),
    );
    out.extend(pieces(&answer.text).into_iter().map(|p| data(chunk(json!({"content": p}), Value::Null), true)));
    for (index, (id, name, args)) in answer.calls.iter().enumerate() {
        let start = json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]});
        out.push(data(chunk(start, Value::Null), false));
        for part in thirds(args) {
            out.push(data(
                chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}), Value::Null),
                false,
            ));
        }
    }
    let finish = if answer.calls.is_empty() { "stop" } else { "tool_calls" };
    out.push(data(chunk(json!({}), json!(finish)), false));
    out.push(data(json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": openai_usage()}), false));
    out.push(Event { text: "data: [DONE]\n\n".into(), is_text: false });
    out
}

fn openai_usage() -> Value {
    json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS, "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS, "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS}, "completion_tokens_details": {"reasoning_tokens": REASONING_TOKENS}})
}

fn openai_json(answer: &Answer, model: &str) -> Value {
    let mut message =
        json!({"role": "assistant", "content": if answer.text.is_empty() { Value::Null } else { json!(answer.text) }});
    if !answer.reasoning.is_empty() {
        message["reasoning_content"] = json!(answer.reasoning);
    }
    if !answer.calls.is_empty() {
        message["tool_calls"] = answer
            .calls
            .iter()
            .map(
                |(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}),
            )
            .collect();
    }
    let finish = if answer.calls.is_empty() { "stop" } else { "tool_calls" };
    json!({"id": "chatcmpl-scripted", "object": "chat.completion", "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": openai_usage()})
}

fn anthropic_blocks(answer: &Answer) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !answer.reasoning.is_empty() {
        blocks.push(json!({"type": "thinking", "thinking": answer.reasoning, "signature": "sig-scripted"}));
    }
    if !answer.text.is_empty() {
        blocks.push(json!({"type": "text", "text": answer.text}));
    }
    for (id, name, args) in &answer.calls {
        let input: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    blocks
}

fn anthropic_stop(answer: &Answer) -> &'static str {
    if answer.calls.is_empty() { "end_turn" } else { "tool_use" }
}

fn anthropic_usage() -> Value {
    json!({"input_tokens": PROMPT_TOKENS - CACHED_TOKENS, "cache_creation_input_tokens": 0, "cache_read_input_tokens": CACHED_TOKENS, "output_tokens": COMPLETION_TOKENS})
}

fn anthropic_json(answer: &Answer, model: &str) -> Value {
    json!({"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": anthropic_blocks(answer),
           "stop_reason": anthropic_stop(answer), "stop_sequence": null, "usage": anthropic_usage()})
}

fn anthropic_events(answer: &Answer, model: &str) -> Vec<Event> {
    let event = |value: Value, is_text: bool| Event {
        text: format!("event: {}\ndata: {value}\n\n", value["type"].as_str().unwrap_or_default()),
        is_text,
    };
    let mut usage = anthropic_usage();
    usage["output_tokens"] = json!(1);
    let mut out = vec![event(
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "usage": usage}}),
        false,
    )];
    let mut index = 0;
    let mut block = |out: &mut Vec<Event>, start: Value, deltas: Vec<(Value, bool)>| {
        out.push(event(json!({"type": "content_block_start", "index": index, "content_block": start}), false));
        out.extend(deltas.into_iter().map(|(delta, is_text)| {
            event(json!({"type": "content_block_delta", "index": index, "delta": delta}), is_text)
        }));
        out.push(event(json!({"type": "content_block_stop", "index": index}), false));
        index += 1;
    };
    if !answer.reasoning.is_empty() {
        let mut deltas: Vec<(Value, bool)> = pieces(&answer.reasoning)
            .into_iter()
            .map(|p| (json!({"type": "thinking_delta", "thinking": p}), false))
            .collect();
        deltas.push((json!({"type": "signature_delta", "signature": "sig-scripted"}), false));
        block(&mut out, json!({"type": "thinking", "thinking": "", "signature": ""}), deltas);
    }
    if !answer.text.is_empty() {
        let deltas =
            pieces(&answer.text).into_iter().map(|p| (json!({"type": "text_delta", "text": p}), true)).collect();
        block(&mut out, json!({"type": "text", "text": ""}), deltas);
    }
    for (id, name, args) in &answer.calls {
        let deltas =
            thirds(args).into_iter().map(|p| (json!({"type": "input_json_delta", "partial_json": p}), false)).collect();
        block(&mut out, json!({"type": "tool_use", "id": id, "name": name, "input": {}}), deltas);
    }
    out.push(event(json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop(answer), "stop_sequence": null}, "usage": {"output_tokens": COMPLETION_TOKENS}}), false));
    out.push(event(json!({"type": "message_stop"}), false));
    out
}

async fn send_whole(socket: &mut TcpStream, format: Format, answer: &Answer, model: &str) -> std::io::Result<bool> {
    let body = match format {
        Format::OpenAi => openai_json(answer, model),
        Format::Anthropic => anthropic_json(answer, model),
    };
    write_response(socket, 200, &[], body.to_string().as_bytes()).await?;
    Ok(true)
}

async fn send_malformed(socket: &mut TcpStream, format: Format, stream: bool) -> std::io::Result<bool> {
    if !stream {
        write_response(socket, 200, &[], b"this is not json {").await?;
        return Ok(true);
    }
    write_stream_head(socket).await?;
    let text = match format {
        Format::OpenAi => "data: {this is not json\n\n",
        Format::Anthropic => "event: message_start\ndata: {this is not json\n\n",
    };
    write_chunk(socket, text).await?;
    finish_stream(socket).await
}

/// Sends events until `after_chunks` text deltas went out, or half a whole body, then
/// reports the connection as unusable so it is closed without the end marker.
async fn send_cut(
    socket: &mut TcpStream,
    format: Format,
    stream: bool,
    answer: &Answer,
    model: &str,
    after_chunks: usize,
) -> std::io::Result<bool> {
    if stream {
        write_stream_head(socket).await?;
        send_events(socket, &events(format, answer, model), after_chunks).await?;
    } else {
        let body = match format {
            Format::OpenAi => openai_json(answer, model),
            Format::Anthropic => anthropic_json(answer, model),
        }
        .to_string();
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(&body.as_bytes()[..body.len() / 2]).await?;
        socket.flush().await?;
    }
    Ok(false)
}

/// Sends events in order, stopping as soon as `text_limit` text deltas have gone out.
async fn send_events(socket: &mut TcpStream, events: &[Event], text_limit: usize) -> std::io::Result<()> {
    let mut texts = 0;
    for event in events {
        if texts == text_limit {
            break;
        }
        write_chunk(socket, &event.text).await?;
        texts += usize::from(event.is_text);
    }
    Ok(())
}

/// The index just after the `texts`-th text event (all events when there are fewer).
fn split_after_texts(events: &[Event], texts: usize) -> usize {
    let mut seen = 0;
    for (index, event) in events.iter().enumerate() {
        if seen == texts {
            return index;
        }
        seen += usize::from(event.is_text);
    }
    events.len()
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

async fn write_response(
    socket: &mut TcpStream,
    code: u16,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        reason(code),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    socket.flush().await
}

async fn write_stream_head(socket: &mut TcpStream) -> std::io::Result<()> {
    socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n").await?;
    socket.flush().await
}

async fn write_chunk(socket: &mut TcpStream, data: &str) -> std::io::Result<()> {
    socket.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).await?;
    socket.flush().await
}

async fn finish_stream(socket: &mut TcpStream) -> std::io::Result<bool> {
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    Ok(true)
}
