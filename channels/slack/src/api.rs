//! The Slack Web API over HTTPS: one JSON POST per method with a bearer token, `{"ok":false}`
//! answers turned into errors, and rate limits waited out as Slack asks.

use std::time::Duration;

use oxibot_plugin::chat::http::{Attempt, DEFAULT_RETRY_AFTER, RateLimited, TransportError, waiting_out_rate_limits};
use oxibot_plugin::util::error_chain;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde_json::{Value, json};

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one whole request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Slack's `error` codes that mean the token is wrong: trying again cannot help.
const TOKEN_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "missing_scope",
    "no_permission",
];

/// Why a Web API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebError {
    /// No answer, or no HTTP client.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// Slack asked to slow down for longer than this channel waits, or too often.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// An HTTP status other than 2xx and 429.
    #[error("{method}: http status {status}")]
    Status {
        /// The Web API method called.
        method: String,
        /// The status code.
        status: u16,
    },
    /// `{"ok": false, "error": …}`.
    #[error("{method}: slack answered {error}")]
    Api {
        /// The Web API method called.
        method: String,
        /// Slack's error code, e.g. `channel_not_found`.
        error: String,
    },
    /// The answer was not the JSON Slack sends.
    #[error("{method}: unexpected answer: {reason}")]
    Malformed {
        /// The Web API method called.
        method: String,
        /// What was wrong with it.
        reason: String,
    },
}

impl WebError {
    /// Whether the failure comes from a bad or under-privileged token, which no retry fixes.
    pub fn is_token_problem(&self) -> bool {
        matches!(self, WebError::Api { error, .. } if TOKEN_ERRORS.contains(&error.as_str()))
    }
}

/// What `auth.test` says about the bot token's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's user id (`U…`): mentions look like `<@U…>`.
    pub user_id: String,
    /// The bot's display name, for logs.
    pub user: String,
    /// The bot id (`B…`) its own messages carry, when Slack gave one.
    pub bot_id: Option<String>,
    /// The workspace's name, for logs.
    pub team: String,
}

/// A Web API client for one API base.
#[derive(Debug, Clone)]
pub struct WebApi {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://slack.com/api`, without a trailing slash.
    base: String,
}

impl WebApi {
    /// A client for the API at `base`. The rustls crypto provider must be installed first.
    pub fn new(base: &str) -> Result<WebApi, WebError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| WebError::Transport(TransportError::Setup(error_chain(&error))))?;
        Ok(WebApi { http, base: base.trim_end_matches('/').to_owned() })
    }

    /// `auth.test`: who the bot token belongs to.
    pub async fn auth_test(&self, bot_token: &str) -> Result<BotIdentity, WebError> {
        let answer = self.call("auth.test", bot_token, &json!({})).await?;
        let text = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
        let user_id = text("user_id");
        if user_id.is_empty() {
            return Err(WebError::Malformed { method: "auth.test".into(), reason: "no user_id".into() });
        }
        let bot_id = answer["bot_id"].as_str().filter(|id| !id.is_empty()).map(str::to_owned);
        Ok(BotIdentity { user_id, user: text("user"), bot_id, team: text("team") })
    }

    /// `apps.connections.open`: a fresh Socket Mode WebSocket URL.
    pub async fn open_connection(&self, app_token: &str) -> Result<String, WebError> {
        let answer = self.call("apps.connections.open", app_token, &json!({})).await?;
        match answer["url"].as_str() {
            Some(url) if !url.is_empty() => Ok(url.to_owned()),
            _ => Err(WebError::Malformed { method: "apps.connections.open".into(), reason: "no url".into() }),
        }
    }

    /// Calls `method` with a JSON `body`, waiting out rate limits a few times; returns the
    /// answer of a call Slack says was `ok`.
    pub async fn call(&self, method: &str, token: &str, body: &Value) -> Result<Value, WebError> {
        let attempt = || self.attempt(method, token, body);
        waiting_out_rate_limits(method, attempt).await
    }

    /// One POST of `method`.
    async fn attempt(&self, method: &str, token: &str, body: &Value) -> Result<Attempt<Value>, WebError> {
        let network = |error: reqwest::Error| {
            WebError::Transport(TransportError::Network { call: method.to_owned(), reason: error_chain(&error) })
        };
        let mut authorization = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| WebError::Api { method: method.to_owned(), error: "invalid_auth".into() })?;
        authorization.set_sensitive(true);
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .header(AUTHORIZATION, authorization)
            .json(body)
            .send()
            .await
            .map_err(network)?;
        let status = response.status();
        let retry_after = retry_after(response.headers().get(RETRY_AFTER));
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Ok(Attempt::Wait(retry_after.unwrap_or(DEFAULT_RETRY_AFTER)));
        }
        if !status.is_success() {
            return Err(WebError::Status { method: method.to_owned(), status: status.as_u16() });
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|error| WebError::Malformed { method: method.to_owned(), reason: error_chain(&error) })?;
        match outcome(&answer) {
            Ok(()) => Ok(Attempt::Answer(answer)),
            Err(error) if error == "ratelimited" => Ok(Attempt::Wait(retry_after.unwrap_or(DEFAULT_RETRY_AFTER))),
            Err(error) => Err(WebError::Api { method: method.to_owned(), error }),
        }
    }
}

/// `Ok` for `{"ok": true}`, else Slack's error code.
fn outcome(answer: &Value) -> Result<(), String> {
    if answer["ok"] == true {
        return Ok(());
    }
    Err(answer["error"].as_str().unwrap_or("unknown_error").to_owned())
}

/// The seconds of a `Retry-After` header.
fn retry_after(header: Option<&HeaderValue>) -> Option<Duration> {
    let seconds: u64 = header?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_ok_true_counts_as_success() {
        assert_eq!(outcome(&json!({"ok": true})), Ok(()));
        assert_eq!(outcome(&json!({"ok": false, "error": "channel_not_found"})), Err("channel_not_found".into()));
        assert_eq!(outcome(&json!({"something": 1})), Err("unknown_error".into()));
    }

    #[test]
    fn a_retry_after_header_is_read_as_whole_seconds() {
        assert_eq!(retry_after(Some(&HeaderValue::from_static("3"))), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some(&HeaderValue::from_static("soon"))), None);
        assert_eq!(retry_after(None), None);
    }

    #[test]
    fn token_errors_are_told_apart_from_others() {
        let api = |error: &str| WebError::Api { method: "auth.test".into(), error: error.into() };
        assert!(api("invalid_auth").is_token_problem());
        assert!(!api("channel_not_found").is_token_problem());
        assert!(!WebError::Status { method: "auth.test".into(), status: 500 }.is_token_problem());
    }
}
