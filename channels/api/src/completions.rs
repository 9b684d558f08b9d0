//! `POST /v1/chat/completions`: submit the request's last user message to the session, wait
//! for the reply, and answer with a completion or a stream of chunks.

use oxibot_plugin::serving::fresh_id;
use std::future::poll_fn;
use std::pin::Pin;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::app::App;
use crate::body::ReplyBody;
use crate::openai::{CompletionId, unix_now};
use crate::request::ChatRequest;
use crate::responses::{ApiFailure, guarded_json_response};
use crate::stream;
use crate::waiters::Reply;

/// Largest request body read (messages with inline images can be large).
const MAX_BODY_BYTES: usize = 8 << 20;
/// The `sender_id` of every inbound message: the API key, not the client, is the identity.
const SENDER_ID: &str = "api";

/// Answers one chat-completion request.
pub async fn chat_completions(app: &App, request: Request<Incoming>) -> Result<Response<ReplyBody>, ApiFailure> {
    let session_header = request.headers().get("x-session-id").and_then(|value| value.to_str().ok()).map(str::to_owned);
    // A client that stalls mid-body holds a connection and a task: it gets a deadline.
    let body = tokio::time::timeout(app.config.body_timeout(), read_body(request.into_body()))
        .await
        .map_err(|_| ApiFailure::BodyTimeout(app.config.body_timeout().as_secs()))??;
    let chat = ChatRequest::parse(&body, session_header.as_deref())?;
    let deadline = Instant::now() + app.config.timeout();
    let request_id = fresh_id("api");
    // Registered before submitting, so a reply cannot arrive before anyone waits for it.
    let (ticket, replies) = app.waiters.register(&chat.session_id, &request_id);
    submit(app, &chat, &request_id, deadline).await?;
    let completion = CompletionId { id: fresh_id("chatcmpl"), created: unix_now(), model: app.config.model.clone() };
    if chat.stream {
        stream::respond(completion, ticket, replies, deadline, app.config.timeout_secs).await
    } else {
        whole_reply(completion, replies, deadline, app.config.timeout_secs).await
    }
}

/// Hands the message to the kernel and waits until it is persisted.
async fn submit(app: &App, chat: &ChatRequest, request_id: &str, deadline: Instant) -> Result<(), ApiFailure> {
    let mut inbound = app.channel.inbound(request_id, SENDER_ID, chat.session_id.as_str(), chat.text.as_str());
    // Every request that reaches here passed the key check, or came to a loopback-only server.
    inbound.metadata =
        json!({"is_group": false, "request_id": request_id, "stream": chat.stream, "authenticated": true});
    match timeout_at(deadline, app.channel.submit(inbound)).await {
        Ok(submitted) => Ok(submitted?),
        Err(_) => Err(ApiFailure::Timeout(app.config.timeout_secs)),
    }
}

/// Waits for the final reply and answers with a whole completion; deltas are skipped.
async fn whole_reply(
    completion: CompletionId,
    mut replies: mpsc::UnboundedReceiver<Reply>,
    deadline: Instant,
    timeout_secs: u64,
) -> Result<Response<ReplyBody>, ApiFailure> {
    loop {
        match timeout_at(deadline, replies.recv()).await {
            Ok(Some(Reply::Delta(_))) => {}
            Ok(Some(Reply::Final(reply))) => {
                return Ok(guarded_json_response(&completion.completion(&reply.content), reply.guard));
            }
            Ok(None) => return Err(ApiFailure::ShuttingDown),
            Err(_) => return Err(ApiFailure::Timeout(timeout_secs)),
        }
    }
}

/// The whole request body, refused past [`MAX_BODY_BYTES`].
async fn read_body(mut body: Incoming) -> Result<Vec<u8>, ApiFailure> {
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(ApiFailure::TooLarge(MAX_BODY_BYTES));
    }
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| ApiFailure::Unreadable(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_BODY_BYTES {
                return Err(ApiFailure::TooLarge(MAX_BODY_BYTES));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}
