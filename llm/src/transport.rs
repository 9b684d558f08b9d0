//! The HTTP side shared by both wire formats: one reqwest client per provider, POSTing JSON,
//! turning error statuses into `ProviderError`s and reading bodies under an idle timeout.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::error::{ProviderError, shorten};
use super::retry::parse_retry_after;
use super::sse::{SseDecoder, SseError, SseEventRef};

/// How long to wait for a TCP (and TLS) connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may stay silent (before its headers, or between two chunks).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Makes rustls use the `ring` crypto provider. reqwest panics when it builds a client and
/// no provider is installed, so every client constructor here calls this first; calling it
/// again (or after someone else installed one) does nothing.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error only means a provider is already installed, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP client bound to one provider's name, headers and timeouts.
#[derive(Clone)]
pub(crate) struct Transport {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// Headers sent with every request (auth and the config's extra headers).
    headers: HeaderMap,
    /// Registry name, for error messages.
    pub(crate) provider: String,
    /// Where the key comes from, for 401/403 messages.
    key_hint: String,
    /// Silence longer than this is a timeout.
    pub(crate) idle: Duration,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers hold the API key, so they are never printed.
        f.debug_struct("Transport").field("provider", &self.provider).field("idle", &self.idle).finish_non_exhaustive()
    }
}

impl Transport {
    /// A client for `provider` at `api_base` sending `headers` (name, value) with every
    /// request. A provider at a plain `http://` base (a local model server) never does TLS,
    /// so the system's root certificates are not loaded for it: reading them is most of a
    /// one-shot run's system calls, and a machine without any could not reach a local model.
    pub(crate) fn new(
        provider: &str,
        api_base: &str,
        key_hint: &str,
        headers: &[(String, String)],
    ) -> Result<Transport, ProviderError> {
        install_crypto_provider();
        let builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
        let builder = if is_plain_http(api_base) { builder.tls_certs_only([]) } else { builder };
        let http = builder
            .build()
            .map_err(|e| ProviderError::Network(format!("cannot set up the http client: {}", error_chain(&e))))?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let bad = |what: &str| {
                ProviderError::NotConfigured(format!("header `{name}` for provider {provider} has an invalid {what}"))
            };
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| bad("value"))?;
            value.set_sensitive(header == reqwest::header::AUTHORIZATION || name.eq_ignore_ascii_case("x-api-key"));
            map.insert(header, value);
        }
        Ok(Transport {
            http,
            headers: map,
            provider: provider.to_owned(),
            key_hint: key_hint.to_owned(),
            idle: IDLE_TIMEOUT,
        })
    }

    /// POSTs `body` as JSON to `url`; a non-2xx status becomes the matching error.
    pub(crate) async fn post(&self, url: &str, body: &Value) -> Result<reqwest::Response, ProviderError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ProviderError::Malformed(format!("cannot encode the request: {e}")))?;
        self.post_bytes(url, bytes).await
    }

    /// POSTs `body`, JSON already encoded, to `url`; a non-2xx status becomes the matching
    /// error.
    pub(crate) async fn post_bytes(&self, url: &str, body: Vec<u8>) -> Result<reqwest::Response, ProviderError> {
        let json = HeaderValue::from_static("application/json");
        let request = self.http.post(url).headers(self.headers.clone()).header(CONTENT_TYPE, json).body(body);
        let response = tokio::time::timeout(self.idle, request.send())
            .await
            .map_err(|_| ProviderError::Timeout)?
            .map_err(|e| from_reqwest(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let text = match self.read_body(response).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        Err(ProviderError::from_status(status.as_u16(), &text, retry_after, &self.provider, &self.key_hint))
    }

    /// The next body chunk, `None` at the end; silence beyond the idle timeout is an error.
    pub(crate) async fn next_chunk(&self, response: &mut reqwest::Response) -> Result<Option<Bytes>, ProviderError> {
        match tokio::time::timeout(self.idle, response.chunk()).await {
            Err(_) => Err(ProviderError::Timeout),
            Ok(Err(e)) => Err(from_reqwest(&e)),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    /// The whole body.
    pub(crate) async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The whole body parsed as JSON.
    pub(crate) async fn read_json(&self, response: reqwest::Response) -> Result<Value, ProviderError> {
        let body = self.read_body(response).await?;
        parse_json(&body, "response body")
    }

    /// Feeds the body to `on_event` one SSE event at a time until it returns `true` (the
    /// format's end marker) or the body ends; returns whether the end marker was seen. Each
    /// event is borrowed from the decoder, and each body chunk read where it arrived.
    pub(crate) async fn read_sse(
        &self,
        mut response: reqwest::Response,
        mut on_event: impl FnMut(SseEventRef<'_>) -> Result<bool, ProviderError>,
    ) -> Result<bool, ProviderError> {
        let mut decoder = SseDecoder::new();
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            if decoder.feed_with(&chunk, &mut on_event)? {
                return Ok(true);
            }
        }
        decoder.finish_with(on_event)
    }
}

impl From<SseError> for ProviderError {
    fn from(error: SseError) -> ProviderError {
        ProviderError::Malformed(error.to_string())
    }
}

/// Whether `url` is plain HTTP (no TLS).
fn is_plain_http(url: &str) -> bool {
    url.trim_start().get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
}

/// Whether a response is an event stream (some servers answer `stream: true` with plain JSON).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Parses JSON, or says what `what` held instead.
pub(crate) fn parse_json(bytes: &[u8], what: &str) -> Result<Value, ProviderError> {
    parse_typed(bytes, what)
}

/// Parses JSON into the typed (and possibly borrowing) `T`, or says what `what` held
/// instead: unlike [`parse_json`] no tree is built, and fields `T` does not name are skipped.
pub(crate) fn parse_typed<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, ProviderError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let text = String::from_utf8_lossy(bytes);
        ProviderError::Malformed(format!("{what} is not valid json ({e}): {:?}", shorten(text.trim(), 120)))
    })
}

/// `Retry-After` (seconds or a date) or `retry-after-ms`.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<u64>().ok()) {
        return Some(Duration::from_millis(ms));
    }
    header("retry-after").and_then(parse_retry_after)
}

/// Sorts a reqwest failure: timeouts, connection failures, and bodies cut short.
fn from_reqwest(error: &reqwest::Error) -> ProviderError {
    let text = error_chain(error);
    if error.is_timeout() {
        ProviderError::Timeout
    } else if error.is_body() || error.is_decode() {
        ProviderError::StreamCut(text)
    } else {
        ProviderError::Network(text)
    }
}

/// An error and its causes, joined with `: ` (reqwest's own message omits the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}
