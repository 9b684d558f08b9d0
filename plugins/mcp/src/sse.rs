//! The legacy HTTP+SSE MCP transport (protocol version 2024-11-05), which rmcp no longer
//! ships a client for: a `GET` to the server's URL opens an event stream whose first
//! `endpoint` event names where to `POST` JSON-RPC messages; the server answers on the stream,
//! one `message` event per JSON-RPC message.
//!
//! [`SseTransport`] implements rmcp's [`Transport`] for the client role, so the bridge serves
//! it like any other transport. The stream ending ends the transport (the bridge then exits
//! and is restarted); it is not resumed.

use std::time::Duration;

use oxibot_plugin::warn;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Client, Url};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};

use crate::event_stream::{Event, EventParser, EventTooLarge};

/// How long the server may take to answer the `GET`, and then to name its endpoint.
pub const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// Messages read off the stream and not yet taken by the client.
const INCOMING_CAPACITY: usize = 64;

/// What can go wrong on the SSE transport.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The URL is not a URL.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A request could not be sent or its answer not read.
    #[error("request to {url} failed: {source}")]
    Request {
        /// Where it went.
        url: String,
        /// The HTTP client's error.
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// Where the request went.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The `GET` was not answered with an event stream.
    #[error("{url} did not answer with an event stream (Content-Type `{content_type}`); is it an SSE endpoint?")]
    NotEventStream {
        /// The URL.
        url: String,
        /// The type it answered with.
        content_type: String,
    },
    /// The stream ended, or the wait ran out, before the `endpoint` event.
    #[error("{url} named no endpoint to post messages to within {} s", ENDPOINT_TIMEOUT.as_secs())]
    NoEndpoint {
        /// The stream's URL.
        url: String,
    },
    /// The `endpoint` event named a URL on another origin, where the configured headers must
    /// not go.
    #[error("the endpoint `{endpoint}` is not on the origin of {url}; refused")]
    ForeignEndpoint {
        /// What the server named.
        endpoint: String,
        /// The stream's URL.
        url: String,
    },
    /// An event was too large.
    #[error(transparent)]
    TooLarge(#[from] EventTooLarge),
    /// A message could not be encoded.
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A connected legacy SSE transport: the stream is read by a task that forwards each message;
/// sending posts to the endpoint.
pub struct SseTransport {
    /// The HTTP client, shared by the stream and the posts.
    client: Client,
    /// Where messages are posted, as the server named it.
    endpoint: Url,
    /// The configured headers, sent with every request.
    headers: HeaderMap,
    /// Messages read off the stream; closed when the stream ends.
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    /// The task reading the stream; aborted when the transport closes or drops.
    reader: tokio::task::JoinHandle<()>,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server to name its endpoint.
    pub async fn connect(client: Client, url: &str, headers: HeaderMap) -> Result<SseTransport, SseError> {
        let url = Url::parse(url).map_err(|e| SseError::InvalidUrl { url: url.to_owned(), reason: e.to_string() })?;
        let request = client.get(url.clone()).headers(headers.clone()).header(ACCEPT, "text/event-stream");
        let no_endpoint = || SseError::NoEndpoint { url: url.to_string() };
        let response = tokio::time::timeout(ENDPOINT_TIMEOUT, request.send())
            .await
            .map_err(|_| no_endpoint())?
            .map_err(|source| SseError::Request { url: url.to_string(), source })?;
        if !response.status().is_success() {
            return Err(SseError::Status { url: url.to_string(), status: response.status() });
        }
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !content_type.trim_start().starts_with("text/event-stream") {
            return Err(SseError::NotEventStream { url: url.to_string(), content_type: content_type.to_owned() });
        }
        let (named, endpoint) = oneshot::channel();
        let (forward, incoming) = mpsc::channel(INCOMING_CAPACITY);
        let reader = tokio::spawn(read_stream(response, url.clone(), named, forward));
        let endpoint = match tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint).await {
            Ok(Ok(endpoint)) => endpoint,
            Ok(Err(_)) | Err(_) => {
                reader.abort();
                return Err(no_endpoint());
            }
        };
        match endpoint {
            Ok(endpoint) => Ok(SseTransport { client, endpoint, headers, incoming, reader }),
            Err(error) => {
                reader.abort();
                Err(error)
            }
        }
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let endpoint = self.endpoint.clone();
        let request = self
            .client
            .post(endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        async move {
            let response = request
                .body(body?)
                .send()
                .await
                .map_err(|source| SseError::Request { url: endpoint.to_string(), source })?;
            if !response.status().is_success() {
                return Err(SseError::Status { url: endpoint.to_string(), status: response.status() });
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

/// Reads the stream until it ends: hands the first `endpoint` (resolved against `url`, same
/// origin only) to `named`, and each `message` that is a JSON-RPC message to `forward`.
async fn read_stream(
    mut response: reqwest::Response,
    url: Url,
    named: oneshot::Sender<Result<Url, SseError>>,
    forward: mpsc::Sender<ServerJsonRpcMessage>,
) {
    let mut named = Some(named);
    let mut parser = EventParser::default();
    let mut events = Vec::new();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return,
            Err(error) => return warn!("oxibot-tool-mcp: the event stream from {url} failed: {error}"),
        };
        if let Err(error) = parser.feed(&chunk, &mut events) {
            return warn!("oxibot-tool-mcp: {error}; closing the stream from {url}");
        }
        for Event { name, data } in events.drain(..) {
            match name.as_str() {
                "endpoint" => {
                    if let Some(named) = named.take() {
                        let _ = named.send(endpoint(&url, data.trim()));
                    }
                }
                "message" => match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                    Ok(message) => {
                        if forward.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => warn!("oxibot-tool-mcp: skipping a message that is not JSON-RPC ({error})"),
                },
                _ => {}
            }
        }
    }
}

/// The endpoint the server named, resolved against the stream's URL; refused on another
/// origin.
fn endpoint(url: &Url, named: &str) -> Result<Url, SseError> {
    let endpoint =
        url.join(named).map_err(|e| SseError::InvalidUrl { url: named.to_owned(), reason: e.to_string() })?;
    if endpoint.origin() != url.origin() {
        return Err(SseError::ForeignEndpoint { endpoint: endpoint.to_string(), url: url.to_string() });
    }
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_endpoint_resolves_against_the_stream_url() {
        let url = Url::parse("http://127.0.0.1:8000/sse").unwrap();
        let resolved = endpoint(&url, "/messages/?session_id=ab12").unwrap();
        assert_eq!(resolved.as_str(), "http://127.0.0.1:8000/messages/?session_id=ab12");
        let nested = Url::parse("http://h/mcp/sse").unwrap();
        assert_eq!(endpoint(&nested, "messages?s=1").unwrap().as_str(), "http://h/mcp/messages?s=1");
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        let url = Url::parse("https://mcp.example/sse").unwrap();
        for foreign in ["https://evil.example/messages", "http://mcp.example/messages", "https://mcp.example:444/m"] {
            let error = endpoint(&url, foreign).unwrap_err();
            assert!(matches!(error, SseError::ForeignEndpoint { .. }), "{foreign}: {error}");
        }
    }
}
