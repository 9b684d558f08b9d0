//! The Mattermost REST API v4 over HTTPS: who the bot is, posts (created and patched),
//! reactions and channels, with the bot token as a bearer; error answers turned into errors
//! and rate limits waited out as the server asks.

use std::time::Duration;

use oxibot_plugin::chat::http::{
    Attempt, DEFAULT_RETRY_AFTER, Refusal, Service, ServiceError, TransportError, waiting_out_rate_limits,
};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one whole request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request failed.
pub type RestError = ServiceError<Mattermost>;

/// Mattermost's REST API, as a service whose refusals carry an error id such as
/// `api.context.session_expired.app_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mattermost {}

impl Service for Mattermost {
    type Code = String;

    fn is_token_problem(refusal: &Refusal<String>) -> bool {
        refusal.status == 401
    }
}

/// Who the token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotUser {
    /// The user id (26 characters).
    pub id: String,
    /// The username, as mentions write it (`@username`).
    pub username: String,
}

/// A client of one server, for one token; cheap to clone.
#[derive(Debug, Clone)]
pub struct RestApi {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://chat.example.com`, without a trailing slash.
    server_url: String,
    /// `Bearer <token>`, marked sensitive.
    authorization: HeaderValue,
}

impl RestApi {
    /// A client of `server_url` with `token`. The rustls crypto provider must be installed
    /// first.
    pub fn new(server_url: &str, token: &str) -> Result<RestApi, RestError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| RestError::setup(&error))?;
        let mut authorization = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            RestError::Transport(TransportError::Setup("the token holds characters a header cannot".into()))
        })?;
        authorization.set_sensitive(true);
        Ok(RestApi { http, server_url: server_url.trim_end_matches('/').to_owned(), authorization })
    }

    /// `GET /users/me`.
    pub async fn me(&self) -> Result<BotUser, RestError> {
        let answer = self.request("users/me", Method::GET, "/users/me", None).await?;
        let text = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
        let user = BotUser { id: text("id"), username: text("username") };
        if user.id.is_empty() || user.username.is_empty() {
            return Err(RestError::malformed("users/me", "no id or username"));
        }
        Ok(user)
    }

    /// `POST /posts`: a new post in `channel` (in the thread of `root`); returns its id.
    pub async fn create_post(&self, channel: &str, root: Option<&str>, message: &str) -> Result<String, RestError> {
        let mut body = json!({"channel_id": channel, "message": message});
        if let Some(root) = root {
            body["root_id"] = json!(root);
        }
        let answer = self.request("create post", Method::POST, "/posts", Some(&body)).await?;
        match answer["id"].as_str() {
            Some(id) if !id.is_empty() => Ok(id.to_owned()),
            _ => Err(RestError::malformed("create post", "no post id")),
        }
    }

    /// `PUT /posts/{id}/patch`: replaces the text of post `id`.
    pub async fn patch_post(&self, id: &str, message: &str) -> Result<(), RestError> {
        let path = format!("/posts/{id}/patch");
        self.request("patch post", Method::PUT, &path, Some(&json!({"message": message}))).await.map(drop)
    }

    /// `POST /reactions`: the bot reacts to `post` with `emoji`.
    pub async fn add_reaction(&self, bot: &str, post: &str, emoji: &str) -> Result<(), RestError> {
        let body = json!({"user_id": bot, "post_id": post, "emoji_name": emoji});
        self.request("add reaction", Method::POST, "/reactions", Some(&body)).await.map(drop)
    }

    /// `GET /channels/{id}`: the team the channel belongs to (empty for direct messages).
    pub async fn channel_team(&self, channel: &str) -> Result<String, RestError> {
        let answer = self.request("get channel", Method::GET, &format!("/channels/{channel}"), None).await?;
        Ok(answer["team_id"].as_str().unwrap_or_default().to_owned())
    }

    /// One request, waiting out rate limits a few times.
    async fn request(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, RestError> {
        let attempt = || self.attempt(what, method.clone(), path, body);
        waiting_out_rate_limits(what, attempt).await
    }

    async fn attempt(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Attempt<Value>, RestError> {
        let network = |error: reqwest::Error| RestError::network(what, &error);
        let url = format!("{}/api/v4{path}", self.server_url);
        let mut request = self.http.request(method, url).header(AUTHORIZATION, self.authorization.clone());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let text = response.text().await.map_err(network)?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Ok(Attempt::Wait(retry_after.unwrap_or(DEFAULT_RETRY_AFTER)));
        }
        if !status.is_success() {
            let field = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
            return Err(RestError::refused(what, status.as_u16(), field("id"), field("message")));
        }
        if answer.is_null() {
            return Err(RestError::malformed(what, "not json"));
        }
        Ok(Attempt::Answer(answer))
    }
}

/// The wait a rate-limited answer asks for: `Retry-After`, else `X-Ratelimit-Reset`, in
/// seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
    seconds(RETRY_AFTER.as_str()).or_else(|| seconds("x-ratelimit-reset")).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_wait_is_read_from_either_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("x-ratelimit-reset", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(5)));
    }

    #[test]
    fn only_a_401_is_a_token_problem() {
        let status = |status: u16| RestError::refused("x", status, String::new(), "");
        assert!(status(401).is_token_problem());
        assert!(!status(403).is_token_problem());
        assert!(!status(500).is_token_problem());
    }
}
