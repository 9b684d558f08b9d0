//! The Matrix client-server API over HTTPS: `whoami`, the `/sync` long poll, joining rooms,
//! counting members and sending room messages, with a bearer token; error answers
//! (`{"errcode": …}`) turned into errors, and rate limits waited out as the server asks.

use std::time::Duration;

use oxibot_plugin::chat::http::{
    Attempt, DEFAULT_RETRY_AFTER, Refusal, Service, ServiceError, TransportError, waiting_out_rate_limits,
};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request other than the long poll may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer than its own timeout a `/sync` may take before it counts as lost.
const SYNC_GRACE: Duration = Duration::from_secs(15);
/// How long a "typing…" notice lasts unless renewed.
pub const TYPING_TIMEOUT: Duration = Duration::from_secs(30);
/// The path every endpoint lives under.
const CLIENT_V3: &str = "/_matrix/client/v3";

/// Why a request failed.
pub type ApiError = ServiceError<Matrix>;

/// The Matrix client-server API, as a service whose refusals carry an `errcode` such as
/// `M_UNKNOWN_TOKEN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matrix {}

impl Service for Matrix {
    type Code = String;

    fn is_token_problem(refusal: &Refusal<String>) -> bool {
        refusal.status == 401 || refusal.code == "M_UNKNOWN_TOKEN" || refusal.code == "M_MISSING_TOKEN"
    }
}

/// A client of one homeserver, for one access token; cheap to clone.
#[derive(Debug, Clone)]
pub struct ClientApi {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://matrix.example.org`, without a trailing slash.
    homeserver: String,
    /// `Bearer <access token>`, marked sensitive; `None` before logging in.
    authorization: Option<HeaderValue>,
}

/// What a password login gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The new access token.
    pub access_token: String,
    /// The device it belongs to.
    pub device_id: String,
}

impl ClientApi {
    /// A client of `homeserver` without an access token, for logging in. The rustls crypto
    /// provider must be installed first.
    pub fn anonymous(homeserver: &str) -> Result<ClientApi, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ApiError::setup(&error))?;
        Ok(ClientApi { http, homeserver: homeserver.trim_end_matches('/').to_owned(), authorization: None })
    }

    /// The same client, calling with `access_token`.
    pub fn with_token(&self, access_token: &str) -> Result<ClientApi, ApiError> {
        let mut authorization = HeaderValue::from_str(&format!("Bearer {access_token}")).map_err(|_| {
            ApiError::Transport(TransportError::Setup("the access token holds characters a header cannot".into()))
        })?;
        authorization.set_sensitive(true);
        Ok(ClientApi { authorization: Some(authorization), ..self.clone() })
    }

    /// `POST /login` with a password; `device_id` keeps the device of an earlier login.
    pub async fn login(&self, user_id: &str, password: &str, device_id: Option<&str>) -> Result<Login, ApiError> {
        let mut body = json!({"type": "m.login.password", "identifier": {"type": "m.id.user", "user": user_id},
                              "password": password, "initial_device_display_name": "oxibot"});
        if let Some(device_id) = device_id.filter(|id| !id.is_empty()) {
            body["device_id"] = json!(device_id);
        }
        let answer = self.request("login", Method::POST, "/login", Some(&body), REQUEST_TIMEOUT).await?;
        let field = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
        let login = Login { access_token: field("access_token"), device_id: field("device_id") };
        if login.access_token.is_empty() {
            return Err(ApiError::malformed("login", "no access_token"));
        }
        Ok(login)
    }

    /// `GET /account/whoami`: the user id the token belongs to.
    pub async fn whoami(&self) -> Result<String, ApiError> {
        let answer = self.request("whoami", Method::GET, "/account/whoami", None, REQUEST_TIMEOUT).await?;
        match answer["user_id"].as_str() {
            Some(user) if !user.is_empty() => Ok(user.to_owned()),
            _ => Err(ApiError::malformed("whoami", "no user_id")),
        }
    }

    /// `GET /sync`: what happened since `since` (everything, without it), held up to
    /// `timeout` while nothing does.
    pub async fn sync(&self, since: Option<&str>, timeout: Duration, filter: &str) -> Result<Value, ApiError> {
        let mut path = format!("/sync?timeout={}&filter={}", timeout.as_millis(), encode(filter));
        if let Some(since) = since {
            path.push_str(&format!("&since={}", encode(since)));
        }
        let answer = self.request("sync", Method::GET, &path, None, timeout + SYNC_GRACE).await?;
        if answer["next_batch"].as_str().is_none_or(str::is_empty) {
            return Err(ApiError::malformed("sync", "no next_batch"));
        }
        Ok(answer)
    }

    /// `POST /rooms/{room}/join`.
    pub async fn join(&self, room: &str) -> Result<(), ApiError> {
        let path = format!("/rooms/{}/join", encode(room));
        self.request("join", Method::POST, &path, Some(&json!({})), REQUEST_TIMEOUT).await.map(drop)
    }

    /// `GET /rooms/{room}/joined_members`: how many members the room has.
    pub async fn joined_member_count(&self, room: &str) -> Result<usize, ApiError> {
        let path = format!("/rooms/{}/joined_members", encode(room));
        let answer = self.request("joined_members", Method::GET, &path, None, REQUEST_TIMEOUT).await?;
        match answer["joined"].as_object() {
            Some(joined) => Ok(joined.len()),
            None => Err(ApiError::malformed("joined_members", "no joined map")),
        }
    }

    /// `PUT /rooms/{room}/typing/{user}`: shows (for `TYPING_TIMEOUT`) or hides "typing…".
    pub async fn set_typing(&self, room: &str, user: &str, typing: bool) -> Result<(), ApiError> {
        let path = format!("/rooms/{}/typing/{}", encode(room), encode(user));
        let mut body = json!({"typing": typing});
        if typing {
            body["timeout"] = json!(TYPING_TIMEOUT.as_millis());
        }
        self.request("typing", Method::PUT, &path, Some(&body), REQUEST_TIMEOUT).await.map(drop)
    }

    /// `PUT /rooms/{room}/send/m.room.message/{txn}`: posts `content`; returns the event id.
    /// The same `txn` sent again is the same message to the server, so a retry never doubles.
    pub async fn send_message(&self, room: &str, txn: &str, content: &Value) -> Result<String, ApiError> {
        let path = format!("/rooms/{}/send/m.room.message/{}", encode(room), encode(txn));
        let answer = self.request("send", Method::PUT, &path, Some(content), REQUEST_TIMEOUT).await?;
        Ok(answer["event_id"].as_str().unwrap_or_default().to_owned())
    }

    /// One request, waiting out rate limits a few times.
    async fn request(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let attempt = || self.attempt(what, method.clone(), path, body, timeout);
        waiting_out_rate_limits(what, attempt).await
    }

    async fn attempt(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Attempt<Value>, ApiError> {
        let network = |error: reqwest::Error| ApiError::network(what, &error);
        let url = format!("{}{CLIENT_V3}{path}", self.homeserver);
        let mut request = self.http.request(method, url).timeout(timeout);
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let text = response.text().await.map_err(network)?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == StatusCode::TOO_MANY_REQUESTS {
            let wait = answer["retry_after_ms"].as_u64().map_or(DEFAULT_RETRY_AFTER, Duration::from_millis);
            return Ok(Attempt::Wait(wait));
        }
        if !status.is_success() {
            let field = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
            return Err(ApiError::refused(what, status.as_u16(), field("errcode"), field("error")));
        }
        if !answer.is_object() {
            return Err(ApiError::malformed(what, "not a json object"));
        }
        Ok(Attempt::Answer(answer))
    }
}

/// Percent-encodes everything but unreserved characters, for a path segment or a query value
/// (room ids hold `!` and `:`, sync tokens and filters anything).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_ids_and_filters_are_percent_encoded() {
        assert_eq!(encode("!abc:example.org"), "%21abc%3Aexample.org");
        assert_eq!(encode(r#"{"a":1}"#), "%7B%22a%22%3A1%7D");
        assert_eq!(encode("s72_4-x.y~z"), "s72_4-x.y~z");
    }

    #[test]
    fn a_refused_token_is_told_apart_from_other_failures() {
        let status = |status: u16, errcode: &str| ApiError::refused("sync", status, errcode.into(), "");
        assert!(status(401, "M_UNKNOWN_TOKEN").is_token_problem());
        assert!(status(403, "M_MISSING_TOKEN").is_token_problem());
        assert!(!status(403, "M_FORBIDDEN").is_token_problem());
        assert!(!status(502, "").is_token_problem());
    }
}
