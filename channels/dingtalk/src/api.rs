//! DingTalk's open API over HTTPS: registering a Stream connection, the app's access token
//! (cached), the robot's two send calls, and the download of a file a user sent. DingTalk
//! answers errors with an HTTP status and `{"code": …, "message": …}`; a refused token is
//! fetched anew once, and rate limits are waited out a few times.

use std::path::Path;
use std::time::Duration;

use oxibot_plugin::chat::http::{
    Attempt, DEFAULT_RETRY_AFTER, FileError, Refusal, Service, ServiceError, waiting_out_rate_limits,
};
use oxibot_plugin::chat::{SaveError, TokenCache, save_limited};
use reqwest::header::RETRY_AFTER;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

use crate::config::Config;
use crate::frames::BOT_MESSAGE_TOPIC;

/// How long to wait for a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one whole request may take (a download excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest file downloaded from a user.
pub const MAX_DOWNLOAD: u64 = 20 * 1024 * 1024;
/// The header carrying the access token.
const TOKEN_HEADER: &str = "x-acs-dingtalk-access-token";
/// How this client introduces itself when registering a connection.
const USER_AGENT: &str = concat!("oxibot-channel-dingtalk/", env!("CARGO_PKG_VERSION"));

/// Why an open API call failed.
pub type ApiError = ServiceError<DingTalk>;

/// DingTalk's open API, as a service whose refusals carry a code such as
/// `InvalidAuthentication`; a 2xx answer listing users a message did not reach is a refusal
/// too, with the list's name as its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DingTalk {}

impl Service for DingTalk {
    type Code = String;

    fn is_token_problem(refusal: &Refusal<String>) -> bool {
        refusal.status == 401 || refusal.code == "InvalidAuthentication"
    }

    fn is_credentials_problem(refusal: &Refusal<String>) -> bool {
        matches!(refusal.status, 400 | 401 | 403)
    }
}

/// Where a Stream connection is opened: the WebSocket endpoint and its single-use ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTicket {
    /// E.g. `wss://wss-open-connection.dingtalk.com:443/connect`.
    pub endpoint: String,
    /// Goes into the URL's `ticket` parameter.
    pub ticket: String,
}

impl StreamTicket {
    /// The URL to open the WebSocket at.
    pub fn url(&self) -> Result<String, ApiError> {
        let mut url = Url::parse(&self.endpoint).map_err(|error| {
            ApiError::malformed(
                "gateway/connections/open",
                format!("the endpoint {:?} is not a url: {error}", self.endpoint),
            )
        })?;
        url.query_pairs_mut().append_pair("ticket", &self.ticket);
        Ok(url.into())
    }
}

/// Who a message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    /// One user in a one-to-one chat with the robot, by user (staff) id.
    User(String),
    /// A group chat, by its open conversation id.
    Group(String),
}

/// An open API client for one app; cheap to clone, clones share the token.
#[derive(Debug, Clone)]
pub struct OpenApi {
    /// The pooled HTTP client.
    http: reqwest::Client,
    /// E.g. `https://api.dingtalk.com`.
    api_base: String,
    /// Where connections are registered.
    gateway_base: String,
    /// The app's client id.
    client_id: String,
    /// The app's client secret.
    client_secret: String,
    /// The robot sending replies.
    robot_code: String,
    /// The access token, while it lasts.
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
            api_base: config.api_base.clone(),
            gateway_base: config.gateway_base.clone(),
            client_id: config.client_id.clone(),
            client_secret: config.client_secret.clone(),
            robot_code: config.robot_code.clone(),
            token: TokenCache::default(),
        })
    }

    /// `POST /v1.0/gateway/connections/open`: a fresh endpoint and ticket for a Stream
    /// connection subscribed to robot messages.
    pub async fn open_connection(&self) -> Result<StreamTicket, ApiError> {
        const CALL: &str = "gateway/connections/open";
        let body = json!({
            "clientId": self.client_id,
            "clientSecret": self.client_secret,
            "subscriptions": [{"type": "CALLBACK", "topic": BOT_MESSAGE_TOPIC}],
            "ua": USER_AGENT,
        });
        let url = format!("{}/v1.0/gateway/connections/open", self.gateway_base);
        let answer = self.post(CALL, &url, None, &body).await?;
        let text = |key: &str| answer[key].as_str().filter(|value| !value.is_empty()).map(str::to_owned);
        match (text("endpoint"), text("ticket")) {
            (Some(endpoint), Some(ticket)) => Ok(StreamTicket { endpoint, ticket }),
            _ => Err(ApiError::malformed(CALL, "no endpoint or ticket in the answer")),
        }
    }

    /// `POST /v1.0/oauth2/accessToken`: a new token and how long it lasts.
    async fn fetch_token(&self) -> Result<(String, Duration), ApiError> {
        const CALL: &str = "oauth2/accessToken";
        let body = json!({"appKey": self.client_id, "appSecret": self.client_secret});
        let url = format!("{}/v1.0/oauth2/accessToken", self.api_base);
        let answer = self.post(CALL, &url, None, &body).await?;
        let Some(token) = answer["accessToken"].as_str().filter(|token| !token.is_empty()) else {
            return Err(ApiError::malformed(CALL, "no accessToken in the answer"));
        };
        let lifetime = answer["expireIn"].as_u64().unwrap_or(7200);
        Ok((token.to_owned(), Duration::from_secs(lifetime)))
    }

    /// Sends one robot message (`msgKey` and its parameters) to `recipient`.
    pub async fn send(&self, recipient: &Recipient, msg_key: &str, param: &Value) -> Result<(), ApiError> {
        let (call, path, mut body) = match recipient {
            Recipient::User(user) => {
                ("oToMessages/batchSend", "/v1.0/robot/oToMessages/batchSend", json!({"userIds": [user]}))
            }
            Recipient::Group(conversation) => {
                ("groupMessages/send", "/v1.0/robot/groupMessages/send", json!({"openConversationId": conversation}))
            }
        };
        body["robotCode"] = json!(self.robot_code);
        body["msgKey"] = json!(msg_key);
        body["msgParam"] = json!(param.to_string());
        let answer = self.with_token(call, &format!("{}{path}", self.api_base), &body).await?;
        for (list, what) in
            [("invalidStaffIdList", "not a user the robot can reach"), ("flowControlledStaffIdList", "flow controlled")]
        {
            if let Some(users) = answer[list].as_array().filter(|users| !users.is_empty()) {
                let message = format!("{what}: {}", Value::from(users.clone()));
                return Err(ApiError::refused(call, 200, list.to_owned(), message));
            }
        }
        Ok(())
    }

    /// Saves the file behind a message's `downloadCode` at `dest`, at most [`MAX_DOWNLOAD`]
    /// bytes: `messageFiles/download` gives a short-lived URL, which is then fetched.
    pub async fn download(&self, download_code: &str, dest: &Path) -> Result<(), ApiError> {
        const CALL: &str = "messageFiles/download";
        let url = format!("{}/v1.0/robot/messageFiles/download", self.api_base);
        let body = json!({"downloadCode": download_code, "robotCode": self.robot_code});
        let answer = self.with_token(CALL, &url, &body).await?;
        let Some(file_url) = answer["downloadUrl"].as_str().filter(|url| !url.is_empty()) else {
            return Err(ApiError::malformed(CALL, "no downloadUrl in the answer"));
        };
        self.fetch_file(file_url, dest).await
    }

    /// GETs `url` into `dest` (removed again when the download fails halfway).
    async fn fetch_file(&self, url: &str, dest: &Path) -> Result<(), ApiError> {
        const CALL: &str = "file download";
        let network = |error: reqwest::Error| ApiError::network(CALL, &error);
        let response = self.http.get(url).timeout(DOWNLOAD_TIMEOUT).send().await.map_err(network)?;
        let status = response.status();
        if !status.is_success() {
            return Err(ApiError::refused(CALL, status.as_u16(), String::new(), ""));
        }
        let declared = response.content_length();
        match save_limited(response.bytes_stream(), dest, MAX_DOWNLOAD, declared).await {
            Ok(_) => Ok(()),
            Err(error @ SaveError::TooLarge { .. }) => {
                Err(ApiError::File(FileError { path: dest.display().to_string(), reason: error.to_string() }))
            }
            Err(SaveError::Source(error)) => Err(network(error)),
            Err(SaveError::File(error)) => {
                Err(ApiError::File(FileError { path: dest.display().to_string(), reason: error.to_string() }))
            }
        }
    }

    /// POSTs `body` with the access token; a refused token is replaced and the call made again
    /// once, a rate limit waited out a few times.
    async fn with_token(&self, call: &'static str, url: &str, body: &Value) -> Result<Value, ApiError> {
        let make_call = |token: String| async move { self.post(call, url, Some(&token), body).await };
        self.token.renewing(|| self.fetch_token(), ApiError::is_token_problem, make_call).await
    }

    /// POSTs `body` to `url`, waiting out rate limits a few times.
    async fn post(&self, call: &'static str, url: &str, token: Option<&str>, body: &Value) -> Result<Value, ApiError> {
        let attempt = || self.attempt(call, url, token, body);
        waiting_out_rate_limits(call, attempt).await
    }

    /// One POST.
    async fn attempt(
        &self,
        call: &'static str,
        url: &str,
        token: Option<&str>,
        body: &Value,
    ) -> Result<Attempt<Value>, ApiError> {
        let network = |error: reqwest::Error| ApiError::network(call, &error);
        let mut request = self.http.post(url).timeout(REQUEST_TIMEOUT).json(body);
        if let Some(token) = token {
            request = request.header(TOKEN_HEADER, token);
        }
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            let retry_after = retry_after(response.headers().get(RETRY_AFTER));
            return Ok(Attempt::Wait(retry_after.unwrap_or(DEFAULT_RETRY_AFTER)));
        }
        let text = response.text().await.map_err(network)?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let field = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
            return Err(ApiError::refused(call, status.as_u16(), field("code"), field("message")));
        }
        if answer.is_null() && !text.trim().is_empty() {
            return Err(ApiError::malformed(call, "the answer is not json"));
        }
        Ok(Attempt::Answer(answer))
    }
}

/// The seconds of a `Retry-After` header.
fn retry_after(header: Option<&reqwest::header::HeaderValue>) -> Option<Duration> {
    let seconds: u64 = header?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn the_ticket_goes_into_the_endpoints_query_encoded() {
        let ticket = StreamTicket {
            endpoint: "wss://wss-open-connection.dingtalk.com:443/connect".into(),
            ticket: "a+b/c=".into(),
        };
        assert_eq!(ticket.url().unwrap(), "wss://wss-open-connection.dingtalk.com/connect?ticket=a%2Bb%2Fc%3D");
        let broken = StreamTicket { endpoint: "not a url".into(), ticket: "t".into() };
        assert!(broken.url().is_err());
    }

    #[test]
    fn refused_credentials_and_tokens_are_told_apart_from_other_failures() {
        let status = |status: u16, code: &str| ApiError::refused("x", status, code.into(), "");
        assert!(status(400, "invalidClientSecret").is_credentials_problem());
        assert!(status(401, "").is_token_problem());
        assert!(status(403, "InvalidAuthentication").is_token_problem());
        assert!(!status(500, "").is_credentials_problem());
        assert!(!status(500, "").is_token_problem());
        assert!(
            !ApiError::Transport(oxibot_plugin::chat::http::TransportError::Network {
                call: "x".to_owned(),
                reason: "refused".into()
            })
            .is_credentials_problem()
        );
    }

    #[test]
    fn a_retry_after_header_is_read_as_whole_seconds() {
        assert_eq!(retry_after(Some(&HeaderValue::from_static("3"))), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some(&HeaderValue::from_static("soon"))), None);
        assert_eq!(retry_after(None), None);
    }
}
