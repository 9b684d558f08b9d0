//! QQ's bot API over HTTPS: the app's access token (from `getAppAccessToken`, cached), the
//! gateway's URL (`GET /gateway`), sending a message to a user or a group, and fetching an
//! attachment. Every call carries `Authorization: QQBot <token>`; a refused token is fetched
//! anew once.

use std::path::Path;
use std::time::Duration;

use oxibot_plugin::chat::http::{FileError, Refusal, Service, ServiceError};
use oxibot_plugin::chat::{SaveError, TokenCache, save_limited};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::config::Config;

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one whole request may take (a download excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// A token's lifetime when QQ does not say.
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(7200);

/// Why an API call failed.
pub type ApiError = ServiceError<Qq>;

/// QQ's bot API, as a service whose refusals carry a numeric code (0 when it gave none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qq {}

impl Service for Qq {
    type Code = i64;

    /// A token expired early or revoked: fetch a new one.
    fn is_token_problem(refusal: &Refusal<i64>) -> bool {
        refusal.status == 401
    }

    /// The token endpoint refused the app's id and secret.
    fn is_credentials_problem(refusal: &Refusal<i64>) -> bool {
        refusal.call == TOKEN_CALL && refusal.status < 500
    }
}

/// The name of the token call, which credential errors are recognised by.
const TOKEN_CALL: &str = "getAppAccessToken";

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A user in a one-to-one (C2C) chat, by their openid.
    User(String),
    /// A group, by its openid.
    Group(String),
}

/// A bot API client; cheap to clone, clones share the token.
#[derive(Debug, Clone)]
pub struct Api {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://api.sgroup.qq.com`.
    api_base: String,
    /// The token endpoint.
    token_url: String,
    /// The app id.
    app_id: String,
    /// The app secret.
    secret: String,
    /// The access token, while it lasts.
    token: TokenCache,
}

impl Api {
    /// A client for the bot in `config`. The rustls crypto provider must be installed first.
    pub fn new(config: &Config) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ApiError::setup(&error))?;
        Ok(Api {
            http,
            api_base: config.api_base.clone(),
            token_url: config.token_url.clone(),
            app_id: config.app_id.clone(),
            secret: config.secret.clone(),
            token: TokenCache::default(),
        })
    }

    /// The access token, fetched with the app's credentials when none is cached.
    pub async fn access_token(&self) -> Result<String, ApiError> {
        self.token.get(|| self.fetch_token()).await
    }

    /// Drops `token` (the gateway refused it), so the next call fetches a new one.
    pub async fn forget_token(&self, token: &str) {
        self.token.forget(token).await;
    }

    /// `POST getAppAccessToken`: a new token and how long it lasts (QQ writes the seconds as a
    /// string).
    async fn fetch_token(&self) -> Result<(String, Duration), ApiError> {
        let body = json!({"appId": self.app_id, "clientSecret": self.secret});
        let request = self.http.post(&self.token_url).timeout(REQUEST_TIMEOUT).json(&body);
        let answer = self.answer(TOKEN_CALL, request).await?;
        let Some(token) = answer["access_token"].as_str().filter(|token| !token.is_empty()) else {
            return Err(refusal(TOKEN_CALL, 200, &answer));
        };
        let seconds = match &answer["expires_in"] {
            Value::String(text) => text.trim().parse().ok(),
            other => other.as_u64(),
        };
        Ok((token.to_owned(), seconds.map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs)))
    }

    /// `GET /gateway`: the WebSocket URL to connect to.
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        const CALL: &str = "GET /gateway";
        let answer = self
            .with_token(CALL, |token| {
                self.http.get(format!("{}/gateway", self.api_base)).header("Authorization", token)
            })
            .await?;
        match answer["url"].as_str().filter(|url| !url.is_empty()) {
            Some(url) => Ok(url.to_owned()),
            None => Err(ApiError::malformed(CALL, "no url in the answer")),
        }
    }

    /// Sends one message (`body`: `content` or `markdown`, `msg_type`, `msg_id`, `msg_seq`) to
    /// `target`.
    pub async fn send(&self, target: &Target, body: &Value) -> Result<(), ApiError> {
        let (call, url) = match target {
            Target::User(openid) => {
                ("POST /v2/users/{openid}/messages", format!("{}/v2/users/{openid}/messages", self.api_base))
            }
            Target::Group(openid) => {
                ("POST /v2/groups/{group_openid}/messages", format!("{}/v2/groups/{openid}/messages", self.api_base))
            }
        };
        self.with_token(call, |token| self.http.post(&url).header("Authorization", token).json(body)).await.map(drop)
    }

    /// Saves the attachment at `url` (QQ's CDN) at `dest`, at most `limit` bytes.
    pub async fn download(&self, url: &str, dest: &Path, limit: u64) -> Result<(), ApiError> {
        const CALL: &str = "attachment download";
        let file_error = |reason: String| ApiError::File(FileError { path: dest.display().to_string(), reason });
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|error| file_error(error.to_string()))?;
        }
        let network = |error: reqwest::Error| ApiError::network(CALL, &error);
        let response = self.http.get(url).timeout(DOWNLOAD_TIMEOUT).send().await.map_err(network)?;
        let status = response.status();
        if !status.is_success() {
            return Err(ApiError::refused(CALL, status.as_u16(), 0, ""));
        }
        let declared = response.content_length();
        match save_limited(response.bytes_stream(), dest, limit, declared).await {
            Ok(_) => Ok(()),
            Err(error @ SaveError::TooLarge { .. }) => Err(file_error(error.to_string())),
            Err(SaveError::Source(error)) => Err(network(error)),
            Err(SaveError::File(error)) => Err(file_error(error.to_string())),
        }
    }

    /// Makes the request `build` gives for `Authorization: QQBot <token>`; a refused token is
    /// replaced and the call made again once.
    async fn with_token(
        &self,
        call: &'static str,
        build: impl Fn(String) -> reqwest::RequestBuilder,
    ) -> Result<Value, ApiError> {
        let make_call = |token: String| {
            let request =
                build(format!("QQBot {token}")).header("X-Union-Appid", &self.app_id).timeout(REQUEST_TIMEOUT);
            self.answer(call, request)
        };
        self.token.renewing(|| self.fetch_token(), ApiError::is_token_problem, make_call).await
    }

    /// Sends `request` and reads QQ's JSON answer; a status other than 2xx, or an answer with
    /// a non-zero `code`, is a refusal.
    async fn answer(&self, call: &'static str, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let network = |error: reqwest::Error| ApiError::network(call, &error);
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let text = response.text().await.map_err(network)?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let coded_error = answer["code"].as_i64().is_some_and(|code| code != 0);
        if !status.is_success() || coded_error {
            return Err(refusal(call, status.as_u16(), &answer));
        }
        if answer.is_null() && !text.trim().is_empty() && status != StatusCode::NO_CONTENT {
            return Err(ApiError::malformed(call, "the answer is not json"));
        }
        Ok(answer)
    }
}

/// The refusal QQ's answer `answer` (with HTTP `status`) describes.
fn refusal(call: &'static str, status: u16, answer: &Value) -> ApiError {
    let code = answer["code"].as_i64().unwrap_or_default();
    ApiError::refused(call, status, code, answer["message"].as_str().unwrap_or("no access_token in the answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_credentials_and_tokens_are_told_apart_from_other_failures() {
        let refused = |call, status| ApiError::refused(call, status, 0, "");
        assert!(refused(TOKEN_CALL, 200).is_credentials_problem());
        assert!(!refused(TOKEN_CALL, 502).is_credentials_problem());
        assert!(!refused("GET /gateway", 401).is_credentials_problem());
        assert!(refused("GET /gateway", 401).is_token_problem());
        assert!(!refused("GET /gateway", 500).is_token_problem());
        assert!(
            !ApiError::Transport(oxibot_plugin::chat::http::TransportError::Network {
                call: TOKEN_CALL.to_owned(),
                reason: "refused".into()
            })
            .is_credentials_problem()
        );
    }
}
