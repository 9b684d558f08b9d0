//! Discord's REST API, as far as the channel needs it: posting messages (with files), the
//! typing indicator and downloading attachments. Rate limits (429) are waited out as Discord
//! asks; server errors are retried a few times.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxibot_plugin::warn;
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde_json::Value;

use crate::config::Config;
use crate::error::{DiscordError, RestError};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many 429s in a row one request sits out before giving up.
const RATE_LIMIT_RETRIES: u32 = 5;
/// The longest rate-limit wait sat out; a longer one fails the request (the kernel retries).
const LONGEST_WAIT: Duration = Duration::from_secs(30);
/// How many times a server error (5xx) or a lost connection is retried.
const SERVER_RETRIES: u32 = 2;
/// The wait before the first retry after a server error; doubles each time.
const SERVER_BACKOFF: Duration = Duration::from_millis(500);
/// How much of an error body goes into the error message.
const ERROR_BODY_CHARS: usize = 300;

/// A client of Discord's REST API with the bot's token.
#[derive(Clone)]
pub struct Rest {
    client: Client,
    api_base: String,
    authorization: String,
}

impl Rest {
    /// A client for `config.api_base`.
    pub fn new(config: &Config) -> Result<Rest, DiscordError> {
        let user_agent = format!("DiscordBot (https://github.com/oxibot/oxibot, {})", env!("CARGO_PKG_VERSION"));
        let client = Client::builder().timeout(REQUEST_TIMEOUT).user_agent(user_agent).build()?;
        Ok(Rest { client, api_base: config.api_base.clone(), authorization: format!("Bot {}", config.token) })
    }

    /// Posts a message (`body` is Discord's message JSON) in a channel.
    pub async fn create_message(&self, channel_id: &str, body: &Value) -> Result<(), RestError> {
        let url = format!("{}/channels/{channel_id}/messages", self.api_base);
        self.send(|| self.client.post(&url).header("Authorization", &self.authorization).json(body)).await.map(drop)
    }

    /// Posts a message with files, as `multipart/form-data` with a `payload_json` part.
    pub async fn create_message_with_files(
        &self,
        channel_id: &str,
        body: &Value,
        files: &[PathBuf],
    ) -> Result<(), RestError> {
        let form = multipart_form(body, files).await?;
        let url = format!("{}/channels/{channel_id}/messages", self.api_base);
        let content_type = format!("multipart/form-data; boundary={}", form.boundary);
        let request = || {
            self.client
                .post(&url)
                .header("Authorization", &self.authorization)
                .header("Content-Type", &content_type)
                .body(form.bytes.clone())
        };
        self.send(request).await.map(drop)
    }

    /// Answers a button press with "deferred update" (type 6): Discord stops waiting, and the
    /// message stays as it is. Not retried (the interaction's token is good for 3 seconds).
    pub async fn acknowledge_interaction(&self, id: &str, token: &str) -> Result<(), RestError> {
        let url = format!("{}/interactions/{id}/{token}/callback", self.api_base);
        let body = serde_json::json!({"type": 6});
        let response = self.client.post(&url).json(&body).send().await?;
        ok_or_status(response).await.map(drop)
    }

    /// Shows "… is typing" in a channel for about ten seconds. Not retried.
    pub async fn trigger_typing(&self, channel_id: &str) -> Result<(), RestError> {
        let url = format!("{}/channels/{channel_id}/typing", self.api_base);
        let response = self.client.post(&url).header("Authorization", &self.authorization).send().await?;
        ok_or_status(response).await.map(drop)
    }

    /// Downloads a file (attachment URLs are signed; no token is sent) into `path`.
    pub async fn download(&self, url: &str, path: &Path) -> Result<(), RestError> {
        let response = self.send(|| self.client.get(url)).await?;
        let bytes = response.bytes().await?;
        tokio::fs::write(path, &bytes)
            .await
            .map_err(|source| RestError::File { path: path.display().to_string(), source })
    }

    /// Sends a request, waiting out rate limits and retrying server errors.
    async fn send(&self, request: impl Fn() -> RequestBuilder) -> Result<Response, RestError> {
        let (mut rate_limits, mut server_errors) = (0, 0);
        loop {
            let error = match request().send().await {
                Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS => {
                    let wait = retry_after(response).await;
                    rate_limits += 1;
                    if rate_limits > RATE_LIMIT_RETRIES || wait > LONGEST_WAIT {
                        return Err(RestError::RateLimited { retry_after: wait.as_secs_f64() });
                    }
                    warn!("discord: rate limited; retrying in {:.2}s", wait.as_secs_f64());
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Ok(response) if response.status().is_server_error() => status_error(response).await,
                Ok(response) => return ok_or_status(response).await,
                Err(error) => RestError::Transport(error),
            };
            server_errors += 1;
            if server_errors > SERVER_RETRIES {
                return Err(error);
            }
            warn!("discord: {error}; retrying");
            tokio::time::sleep(SERVER_BACKOFF * (1 << (server_errors - 1))).await;
        }
    }
}

/// The response when its status is a success, else the error it reports.
async fn ok_or_status(response: Response) -> Result<Response, RestError> {
    if response.status().is_success() { Ok(response) } else { Err(status_error(response).await) }
}

/// An error with the response's status and the start of its body (Discord's JSON error).
async fn status_error(response: Response) -> RestError {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    RestError::Status { status, body: body.chars().take(ERROR_BODY_CHARS).collect() }
}

/// How long a 429 asks to wait: the body's `retry_after` (seconds, fractional), else the
/// `Retry-After` header, else one second.
async fn retry_after(response: Response) -> Duration {
    let header =
        response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
    let body: Option<Value> = response.json().await.ok();
    let seconds = body.as_ref().and_then(|b| b["retry_after"].as_f64()).or(header).unwrap_or(1.0);
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(LONGEST_WAIT + Duration::from_secs(1))
}

/// A boundary line unlikely to occur in any file: time, process and a counter.
fn boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or_default();
    format!("oxibot-{nanos:016x}-{:08x}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A `multipart/form-data` body and its boundary.
struct Form {
    boundary: String,
    bytes: Vec<u8>,
}

/// The message JSON as `payload_json` and each file as `files[n]`.
async fn multipart_form(body: &Value, files: &[PathBuf]) -> Result<Form, RestError> {
    let boundary = boundary();
    let mut bytes = Vec::new();
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{body}\r\n"
    );
    bytes.extend_from_slice(head.as_bytes());
    for (index, path) in files.iter().enumerate() {
        let content = tokio::fs::read(path)
            .await
            .map_err(|source| RestError::File { path: path.display().to_string(), source })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().replace(['"', '\r', '\n'], "_"))
            .unwrap_or_else(|| "file".to_owned());
        let part = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"files[{index}]\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        );
        bytes.extend_from_slice(part.as_bytes());
        bytes.extend_from_slice(&content);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok(Form { boundary, bytes })
}
