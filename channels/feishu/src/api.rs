//! Feishu's (and Lark's) open API over HTTPS: the long connection's endpoint, the tenant
//! access token (cached), who the bot is, sending, replying to and updating card messages,
//! reactions, and the files of a user's message. Feishu answers `{"code": 0, …}` on success
//! and another code (often with an HTTP error status) otherwise; a refused token is fetched
//! anew once, and rate limits are waited out a few times.

use std::path::Path;
use std::time::Duration;

use oxibot_plugin::chat::http::{
    Attempt, DEFAULT_RETRY_AFTER, FileError, Refusal, Service, ServiceError, waiting_out_rate_limits,
};
use oxibot_plugin::chat::{SaveError, TokenCache, save_limited};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};

use crate::config::Config;

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one whole request may take (a download excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest file downloaded from a user.
pub const MAX_DOWNLOAD: u64 = 30 * 1024 * 1024;
/// How often the client pings when the endpoint does not say.
const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(120);
/// Codes meaning the access token is missing, invalid or expired: fetch a new one.
const TOKEN_CODES: &[i64] = &[99991661, 99991663, 99991664, 99991665, 99991668];
/// The code of "too many requests".
const RATE_LIMIT_CODE: i64 = 99991400;
/// Codes of the endpoint call that a later attempt may not get (busy, internal error); any
/// other failure code means the app's credentials are refused.
const ENDPOINT_TRANSIENT_CODES: &[i64] = &[1, 1000040343];

/// Why an open API call failed.
pub type ApiError = ServiceError<Feishu>;

/// Feishu's open API, as a service whose refusals carry a numeric code (0 when the answer had
/// none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feishu {}

impl Service for Feishu {
    type Code = i64;

    fn is_token_problem(refusal: &Refusal<i64>) -> bool {
        TOKEN_CODES.contains(&refusal.code) || refusal.status == 401
    }

    /// The endpoint or token call refused the app's credentials (a busy endpoint aside).
    fn is_credentials_problem(refusal: &Refusal<i64>) -> bool {
        matches!(refusal.call, ENDPOINT_CALL | TOKEN_CALL)
            && !ENDPOINT_TRANSIENT_CODES.contains(&refusal.code)
            && refusal.status < 500
    }
}

/// The name of the endpoint call in errors.
const ENDPOINT_CALL: &str = "callback/ws/endpoint";
/// The name of the token call in errors.
const TOKEN_CALL: &str = "auth/v3/tenant_access_token";

/// Where and how to open the long connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The WebSocket URL, ticket and all.
    pub url: String,
    /// The `service_id` of the URL, which pings carry.
    pub service_id: i32,
    /// How often to ping.
    pub ping_interval: Duration,
}

/// Who a new message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receiver {
    /// A chat (`oc_…`), group or one-to-one.
    Chat(String),
    /// A user by open id (`ou_…`): their one-to-one chat with the bot.
    User(String),
}

/// Which kind of resource a file key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// A picture (`image_key`).
    Image,
    /// A file, voice message or video (`file_key`).
    File,
}

/// An open API client for one app; cheap to clone, clones share the token.
#[derive(Debug, Clone)]
pub struct OpenApi {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://open.feishu.cn`.
    base: String,
    /// The app's id.
    app_id: String,
    /// The app's secret.
    app_secret: String,
    /// The tenant access token, while it lasts.
    token: TokenCache,
}

impl OpenApi {
    /// A client for the app in `config`. The rustls crypto provider must be installed first.
    pub fn new(config: &Config) -> Result<OpenApi, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ApiError::setup(&error))?;
        Ok(OpenApi {
            http,
            base: config.api_base.clone(),
            app_id: config.app_id.clone(),
            app_secret: config.app_secret.clone(),
            token: TokenCache::default(),
        })
    }

    /// `POST /callback/ws/endpoint`: a fresh WebSocket URL for the long connection.
    pub async fn endpoint(&self) -> Result<Endpoint, ApiError> {
        let body = json!({"AppID": self.app_id, "AppSecret": self.app_secret});
        let answer = self.request(Method::POST, ENDPOINT_CALL, "/callback/ws/endpoint", Some(&body), None).await?;
        let data = &answer["data"];
        let Some(url) = data["URL"].as_str().filter(|url| !url.is_empty()) else {
            return Err(ApiError::malformed(ENDPOINT_CALL, "no URL"));
        };
        let service_id = Url::parse(url)
            .ok()
            .and_then(|url| url.query_pairs().find(|(key, _)| key == "service_id").and_then(|(_, id)| id.parse().ok()))
            .unwrap_or(0);
        let ping_interval = data["ClientConfig"]["PingInterval"]
            .as_u64()
            .filter(|seconds| *seconds > 0)
            .map_or(DEFAULT_PING_INTERVAL, Duration::from_secs);
        Ok(Endpoint { url: url.to_owned(), service_id, ping_interval })
    }

    /// The tenant access token, fetched with the app's credentials when none is cached.
    pub async fn tenant_token(&self) -> Result<String, ApiError> {
        self.token.get(|| self.fetch_token()).await
    }

    /// `POST /open-apis/auth/v3/tenant_access_token/internal`.
    async fn fetch_token(&self) -> Result<(String, Duration), ApiError> {
        let body = json!({"app_id": self.app_id, "app_secret": self.app_secret});
        let path = "/open-apis/auth/v3/tenant_access_token/internal";
        let answer = self.request(Method::POST, TOKEN_CALL, path, Some(&body), None).await?;
        let Some(token) = answer["tenant_access_token"].as_str().filter(|token| !token.is_empty()) else {
            return Err(ApiError::malformed(TOKEN_CALL, "no tenant_access_token"));
        };
        Ok((token.to_owned(), Duration::from_secs(answer["expire"].as_u64().unwrap_or(7200))))
    }

    /// `GET /open-apis/bot/v3/info`: the bot's open id, to spot mentions of it.
    pub async fn bot_open_id(&self) -> Result<String, ApiError> {
        const CALL: &str = "bot/v3/info";
        let answer = self.with_token(Method::GET, CALL, "/open-apis/bot/v3/info", None).await?;
        let bot = if answer["bot"].is_object() { &answer["bot"] } else { &answer["data"]["bot"] };
        match bot["open_id"].as_str().filter(|id| !id.is_empty()) {
            Some(open_id) => Ok(open_id.to_owned()),
            None => Err(ApiError::malformed(CALL, "no bot.open_id")),
        }
    }

    /// Sends `card` as a new message; returns its message id.
    pub async fn send_card(&self, receiver: &Receiver, card: &Value) -> Result<String, ApiError> {
        const CALL: &str = "im/v1/messages";
        let (id_type, id) = match receiver {
            Receiver::Chat(chat) => ("chat_id", chat),
            Receiver::User(user) => ("open_id", user),
        };
        let body = json!({"receive_id": id, "msg_type": "interactive", "content": card.to_string()});
        let path = format!("/open-apis/im/v1/messages?receive_id_type={id_type}");
        let answer = self.with_token(Method::POST, CALL, &path, Some(&body)).await?;
        message_id(CALL, &answer)
    }

    /// Sends `card` as a reply to message `to` (in its thread when `in_thread`); returns the
    /// new message's id.
    pub async fn reply_card(&self, to: &str, card: &Value, in_thread: bool) -> Result<String, ApiError> {
        const CALL: &str = "im/v1/messages/reply";
        let body = json!({"msg_type": "interactive", "content": card.to_string(), "reply_in_thread": in_thread});
        let path = format!("/open-apis/im/v1/messages/{}/reply", segment(to));
        let answer = self.with_token(Method::POST, CALL, &path, Some(&body)).await?;
        message_id(CALL, &answer)
    }

    /// Replaces the card of message `message_id` with `card`.
    pub async fn update_card(&self, message_id: &str, card: &Value) -> Result<(), ApiError> {
        const CALL: &str = "im/v1/messages/patch";
        let body = json!({"content": card.to_string()});
        let path = format!("/open-apis/im/v1/messages/{}", segment(message_id));
        self.with_token(Method::PATCH, CALL, &path, Some(&body)).await.map(drop)
    }

    /// Adds the reaction `emoji_type` (e.g. `THUMBSUP`) to message `message_id`.
    pub async fn add_reaction(&self, message_id: &str, emoji_type: &str) -> Result<(), ApiError> {
        const CALL: &str = "im/v1/messages/reactions";
        let body = json!({"reaction_type": {"emoji_type": emoji_type}});
        let path = format!("/open-apis/im/v1/messages/{}/reactions", segment(message_id));
        self.with_token(Method::POST, CALL, &path, Some(&body)).await.map(drop)
    }

    /// Saves resource `key` of message `message_id` at `dest`, at most [`MAX_DOWNLOAD`] bytes
    /// (removed again when the download fails halfway).
    pub async fn download(&self, message_id: &str, key: &str, kind: ResourceKind, dest: &Path) -> Result<(), ApiError> {
        const CALL: &str = "im/v1/messages/resources";
        let network = |error: reqwest::Error| ApiError::network(CALL, &error);
        let kind = match kind {
            ResourceKind::Image => "image",
            ResourceKind::File => "file",
        };
        let url = format!(
            "{}/open-apis/im/v1/messages/{}/resources/{}?type={kind}",
            self.base,
            segment(message_id),
            segment(key)
        );
        let token = self.tenant_token().await?;
        let response = self
            .http
            .get(url)
            .timeout(DOWNLOAD_TIMEOUT)
            .header(AUTHORIZATION, bearer(&token)?)
            .send()
            .await
            .map_err(network)?;
        let status = response.status();
        if !status.is_success() {
            let answer: Value = response.json().await.unwrap_or(Value::Null);
            return Err(api_error(CALL, status, &answer));
        }
        let declared = response.content_length();
        match save_limited(response.bytes_stream(), dest, MAX_DOWNLOAD, declared).await {
            Ok(_) => Ok(()),
            Err(error @ SaveError::TooLarge { .. }) => Err(ApiError::malformed(CALL, error.to_string())),
            Err(SaveError::Source(error)) => Err(network(error)),
            Err(SaveError::File(error)) => {
                Err(ApiError::File(FileError { path: dest.display().to_string(), reason: error.to_string() }))
            }
        }
    }

    /// A call with the tenant token; a refused token is replaced and the call made again once.
    async fn with_token(
        &self,
        method: Method,
        call: &'static str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let make_call = |token: String| {
            let method = method.clone();
            async move { self.request(method, call, path, body, Some(&token)).await }
        };
        self.token.renewing(|| self.fetch_token(), ApiError::is_token_problem, make_call).await
    }

    /// A call, waiting out rate limits a few times.
    async fn request(
        &self,
        method: Method,
        call: &'static str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let attempt = || self.attempt(method.clone(), call, path, body, token);
        waiting_out_rate_limits(call, attempt).await
    }

    /// One request.
    async fn attempt(
        &self,
        method: Method,
        call: &'static str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Result<Attempt<Value>, ApiError> {
        let network = |error: reqwest::Error| ApiError::network(call, &error);
        let mut request = self.http.request(method, format!("{}{path}", self.base)).timeout(REQUEST_TIMEOUT);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(token) = token {
            request = request.header(AUTHORIZATION, bearer(token)?);
        } else {
            request = request.header("locale", "zh");
        }
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let wait = retry_after(response.headers());
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let code = answer["code"].as_i64();
        if status == StatusCode::TOO_MANY_REQUESTS || code == Some(RATE_LIMIT_CODE) {
            return Ok(Attempt::Wait(wait.unwrap_or(DEFAULT_RETRY_AFTER)));
        }
        if !status.is_success() || code != Some(0) {
            return Err(api_error(call, status, &answer));
        }
        Ok(Attempt::Answer(answer))
    }
}

/// The error an unsuccessful answer stands for.
fn api_error(call: &'static str, status: StatusCode, answer: &Value) -> ApiError {
    let msg = answer["msg"].as_str().unwrap_or(if answer.is_null() { "the answer is not json" } else { "" });
    ApiError::refused(call, status.as_u16(), answer["code"].as_i64().unwrap_or(0), msg)
}

/// `data.message_id` of an answer.
fn message_id(call: &'static str, answer: &Value) -> Result<String, ApiError> {
    match answer["data"]["message_id"].as_str().filter(|id| !id.is_empty()) {
        Some(id) => Ok(id.to_owned()),
        None => Err(ApiError::malformed(call, "no data.message_id")),
    }
}

/// The `Authorization` header for `token`, kept out of logs.
fn bearer(token: &str) -> Result<HeaderValue, ApiError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ApiError::refused(TOKEN_CALL, 0, 99991663, "the token cannot be a header"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A message id or file key as one URL path segment (they are plain ids; anything else is
/// percent-encoded).
fn segment(id: &str) -> String {
    id.bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(byte).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// How long Feishu asks to wait: `Retry-After`, else its `x-ogw-ratelimit-reset`, in seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = headers.get(RETRY_AFTER).or_else(|| headers.get("x-ogw-ratelimit-reset"))?;
    let seconds: u64 = header.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(call: &'static str, status: u16, code: i64) -> ApiError {
        ApiError::refused(call, status, code, "")
    }

    #[test]
    fn refused_credentials_are_told_apart_from_a_busy_endpoint() {
        assert!(api(ENDPOINT_CALL, 200, 1000040344).is_credentials_problem());
        assert!(api(TOKEN_CALL, 400, 10014).is_credentials_problem());
        assert!(!api(ENDPOINT_CALL, 200, 1).is_credentials_problem());
        assert!(!api(ENDPOINT_CALL, 502, 0).is_credentials_problem());
        assert!(!api("im/v1/messages", 400, 230001).is_credentials_problem());
    }

    #[test]
    fn a_refused_token_is_recognised_by_its_code_or_status() {
        assert!(api("im/v1/messages", 400, 99991663).is_token_problem());
        assert!(api("im/v1/messages", 401, 0).is_token_problem());
        assert!(!api("im/v1/messages", 400, 230001).is_token_problem());
    }

    #[test]
    fn ids_become_safe_path_segments() {
        assert_eq!(segment("om_dc13264520392913993dd051dba21dcf"), "om_dc13264520392913993dd051dba21dcf");
        assert_eq!(segment("a/b?c"), "a%2Fb%3Fc");
    }

    #[test]
    fn the_wait_comes_from_retry_after_or_feishus_reset_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("x-ogw-ratelimit-reset", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(5)));
    }
}
