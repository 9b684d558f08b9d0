//! What every endpoint that talks to the agent does: read the request body (within a time
//! limit, up to a size), submit the one message to the session, and wait for the reply.

use std::future::poll_fn;
use std::pin::Pin;

use hyper::Request;
use hyper::body::{Body, Incoming};
use oxibot_plugin::serving::fresh_id;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::app::App;
use crate::responses::ApiFailure;
use crate::waiters::{FinalReply, Reply, Ticket};

/// Largest request body read (messages with inline images can be large).
const MAX_BODY_BYTES: usize = 8 << 20;
/// The `sender_id` of every inbound message: the API key, not the client, is the identity.
const SENDER_ID: &str = "api";

/// A request's body and its `X-Session-Id` header.
pub struct RequestBody {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The `X-Session-Id` header, if any.
    pub session_header: Option<String>,
}

/// A message the kernel has accepted, and the replies on their way to it.
pub struct Exchange {
    /// The request's place in its session's queue (it leaves when dropped).
    pub _place_in_queue: Ticket,
    /// The reply's deltas, then the whole reply.
    pub replies: mpsc::UnboundedReceiver<Reply>,
    /// When the request gives up waiting.
    pub deadline: Instant,
    /// The configured wait, for the timeout's message.
    pub timeout_secs: u64,
}

/// Reads the whole body (408 past the body timeout, 413 past [`MAX_BODY_BYTES`]).
pub async fn read_request(app: &App, request: Request<Incoming>) -> Result<RequestBody, ApiFailure> {
    let session_header = request.headers().get("x-session-id").and_then(|value| value.to_str().ok()).map(str::to_owned);
    // A client that stalls mid-body holds a connection and a task: it gets a deadline.
    let bytes = tokio::time::timeout(app.config.body_timeout(), read_body(request.into_body()))
        .await
        .map_err(|_| ApiFailure::BodyTimeout(app.config.body_timeout().as_secs()))??;
    Ok(RequestBody { bytes, session_header })
}

/// Submits `text` to session `session_id` and waits until the kernel has persisted it.
pub async fn start(app: &App, session_id: &str, text: &str, stream: bool) -> Result<Exchange, ApiFailure> {
    let deadline = Instant::now() + app.config.timeout();
    let request_id = fresh_id("api");
    // Registered before submitting, so a reply cannot arrive before anyone waits for it.
    let (ticket, replies) = app.waiters.register(session_id, &request_id);
    let mut inbound = app.channel.inbound(&request_id, SENDER_ID, session_id, text);
    // Every request that reaches here passed the key check.
    inbound.metadata = json!({"is_group": false, "request_id": request_id, "stream": stream, "authenticated": true});
    match timeout_at(deadline, app.channel.submit(inbound)).await {
        Ok(submitted) => submitted?,
        Err(_) => return Err(ApiFailure::Timeout(app.config.timeout_secs)),
    }
    Ok(Exchange { _place_in_queue: ticket, replies, deadline, timeout_secs: app.config.timeout_secs })
}

impl Exchange {
    /// The next reply, or the failure that ends the wait.
    pub async fn next(&mut self) -> Result<Reply, ApiFailure> {
        match timeout_at(self.deadline, self.replies.recv()).await {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => Err(ApiFailure::ShuttingDown),
            Err(_) => Err(ApiFailure::Timeout(self.timeout_secs)),
        }
    }

    /// Waits for the whole reply; deltas are skipped.
    pub async fn final_reply(&mut self) -> Result<FinalReply, ApiFailure> {
        loop {
            if let Reply::Final(reply) = self.next().await? {
                return Ok(reply);
            }
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
