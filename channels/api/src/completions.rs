//! `POST /v1/chat/completions`: submit the request's last user message to the session, wait
//! for the reply, and answer with a completion or a stream of chunks.

use hyper::body::Incoming;
use hyper::{Request, Response};
use oxibot_plugin::serving::fresh_id;

use crate::app::App;
use crate::body::ReplyBody;
use crate::exchange::{self, read_request};
use crate::openai::{self, CompletionId, SSE_DONE, unix_now};
use crate::request::ChatRequest;
use crate::responses::{ApiFailure, guarded_json_response};
use crate::stream::{self, EventFormat};
use crate::usage::TokenUsage;

/// Answers one chat-completion request.
pub async fn chat_completions(app: &App, request: Request<Incoming>) -> Result<Response<ReplyBody>, ApiFailure> {
    let body = read_request(app, request).await?;
    let chat = ChatRequest::parse(&body.bytes, body.session_header.as_deref())?;
    let mut exchange = exchange::start(app, &chat.session_id, &chat.text, chat.stream).await?;
    let completion = CompletionId { id: fresh_id("chatcmpl"), created: unix_now(), model: app.config.model.clone() };
    if chat.stream {
        return stream::respond(ChunkEvents { completion, include_usage: chat.include_usage }, exchange).await;
    }
    let reply = exchange.final_reply().await?;
    Ok(guarded_json_response(&completion.completion(&reply.content, &reply.usage), reply.guard))
}

/// A streamed completion as `chat.completion.chunk` events: the role, the text, a stop
/// chunk, the usage when the client asked for it, and `[DONE]`.
pub struct ChunkEvents {
    /// The completion the chunks belong to.
    pub completion: CompletionId,
    /// Whether to send the usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
}

impl EventFormat for ChunkEvents {
    fn opening(&mut self) -> Vec<String> {
        vec![openai::sse_event(&self.completion.role_chunk().to_string())]
    }

    fn delta(&mut self, text: &str) -> String {
        openai::sse_event(&self.completion.content_chunk(text).to_string())
    }

    fn closing(&mut self, _text: &str, usage: &TokenUsage) -> Vec<String> {
        let mut events = vec![openai::sse_event(&self.completion.stop_chunk().to_string())];
        if self.include_usage {
            events.push(openai::sse_event(&self.completion.usage_chunk(usage).to_string()));
        }
        events.push(SSE_DONE.to_owned());
        events
    }

    fn failure(&mut self, failure: &ApiFailure) -> String {
        openai::sse_event(&failure.body().to_string())
    }

    fn label(&self) -> &str {
        &self.completion.id
    }
}
