//! A small Bot API client: each method is one JSON POST to `<base>/bot<token>/<method>` whose
//! `{"ok": …, "result": …}` answer becomes a typed result or an [`ApiError`]; plus file
//! downloads and multipart uploads. Errors never carry the URL, which holds the token.

use std::path::Path;
use std::time::Duration;

use oxibot_plugin::util::error_chain;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::config::Config;
use crate::error::{ApiError, TelegramError};
use crate::multipart::Form;
use crate::types::{File, SentMessage, Update, User};

/// How long to wait for a connection to Telegram.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an ordinary request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a download or an upload may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(180);
/// Extra time a long poll gets beyond the wait it asked Telegram for.
const POLL_GRACE: Duration = Duration::from_secs(10);

/// The Bot API of one bot.
#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    /// `https://api.telegram.org` or the configured base, without a trailing slash.
    base: String,
    token: String,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a password; it is never printed.
        f.debug_struct("BotApi").field("base", &self.base).finish_non_exhaustive()
    }
}

/// Telegram's answer to every method.
#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    parameters: Option<ResponseParameters>,
}

/// Hints that come with some errors.
#[derive(Deserialize)]
struct ResponseParameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// Makes rustls use the `ring` crypto provider; reqwest panics when it builds a client and no
/// provider is installed. Calling it again does nothing.
pub fn install_crypto_provider() {
    // An error only means a provider is already installed, which is all we need.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A chat id as Telegram wants it: a number when it is one, else a string (`@channel`).
pub fn chat_id_value(chat_id: &str) -> Value {
    chat_id.parse::<i64>().map_or_else(|_| json!(chat_id), |id| json!(id))
}

impl BotApi {
    /// A client for the bot and API base of `config`.
    pub fn new(config: &Config) -> Result<BotApi, TelegramError> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
        if let Some(proxy) = &config.proxy {
            let proxy = reqwest::Proxy::all(proxy.as_str())
                .map_err(|e| TelegramError::Config(format!("invalid proxy: {}", e.without_url())))?;
            builder = builder.proxy(proxy);
        }
        let http = builder.build().map_err(|e| TelegramError::HttpClient(e.without_url().to_string()))?;
        Ok(BotApi { http, base: config.api_base.clone(), token: config.token.clone() })
    }

    /// Calls `method` with JSON `params` and decodes its `result`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let request = self.http.post(url).json(params).timeout(timeout);
        let response = request.send().await.map_err(|e| network(method, e))?;
        decode(method, response).await
    }

    /// The bot itself (its id and username).
    pub async fn get_me(&self) -> Result<User, ApiError> {
        self.call("getMe", &json!({}), REQUEST_TIMEOUT).await
    }

    /// New messages from `offset` on, waiting up to `wait` for the first one.
    pub async fn get_updates(&self, offset: Option<i64>, wait: Duration) -> Result<Vec<Update>, ApiError> {
        let mut params = json!({"timeout": wait.as_secs(), "allowed_updates": ["message", "callback_query"]});
        if let Some(offset) = offset {
            params["offset"] = json!(offset);
        }
        self.call("getUpdates", &params, wait + POLL_GRACE).await
    }

    /// Sends a text message built by the caller (`chat_id`, `text`, …).
    pub async fn send_message(&self, params: &Value) -> Result<SentMessage, ApiError> {
        self.call("sendMessage", params, REQUEST_TIMEOUT).await
    }

    /// Tells Telegram a button press was taken (the person's client stops its spinner).
    pub async fn answer_callback_query(&self, id: &str, text: &str) -> Result<(), ApiError> {
        let params = json!({"callback_query_id": id, "text": text});
        self.call::<Value>("answerCallbackQuery", &params, REQUEST_TIMEOUT).await.map(drop)
    }

    /// Replaces the text of a message the bot sent; an unchanged text counts as success.
    pub async fn edit_message_text(&self, params: &Value) -> Result<(), ApiError> {
        match self.call::<Value>("editMessageText", params, REQUEST_TIMEOUT).await {
            Err(error) if !error.is_not_modified() => Err(error),
            _ => Ok(()),
        }
    }

    /// Deletes a message the bot sent.
    pub async fn delete_message(&self, chat_id: &str, message_id: i64) -> Result<(), ApiError> {
        let params = json!({"chat_id": chat_id_value(chat_id), "message_id": message_id});
        self.call::<Value>("deleteMessage", &params, REQUEST_TIMEOUT).await.map(drop)
    }

    /// Shows "typing…" in a chat (for about five seconds).
    pub async fn send_typing(&self, chat_id: &str, thread: Option<i64>) -> Result<(), ApiError> {
        let mut params = json!({"chat_id": chat_id_value(chat_id), "action": "typing"});
        if let Some(thread) = thread {
            params["message_thread_id"] = json!(thread);
        }
        self.call::<Value>("sendChatAction", &params, REQUEST_TIMEOUT).await.map(drop)
    }

    /// Where a file can be downloaded from.
    pub async fn get_file(&self, file_id: &str) -> Result<File, ApiError> {
        self.call("getFile", &json!({"file_id": file_id}), REQUEST_TIMEOUT).await
    }

    /// Downloads `file_path` (from [`BotApi::get_file`]) to `dest`, through a `.part` file so
    /// `dest` never holds half a file.
    pub async fn download(&self, file_path: &str, dest: &Path) -> Result<(), ApiError> {
        let partial = dest.with_extension("part");
        let outcome = tokio::time::timeout(TRANSFER_TIMEOUT, self.fetch_to(file_path, &partial)).await;
        let result = match outcome {
            Ok(result) => result,
            Err(_) => Err(ApiError::Network {
                method: "download".into(),
                reason: format!("took longer than {TRANSFER_TIMEOUT:?}"),
            }),
        };
        let result = match result {
            Ok(()) => tokio::fs::rename(&partial, dest).await.map_err(|e| file_error("download", dest, &e)),
            Err(error) => Err(error),
        };
        if result.is_err() {
            let _ = tokio::fs::remove_file(&partial).await;
        }
        result
    }

    async fn fetch_to(&self, file_path: &str, dest: &Path) -> Result<(), ApiError> {
        let url = format!("{}/file/bot{}/{}", self.base, self.token, file_path.trim_start_matches('/'));
        let mut response = self.http.get(url).send().await.map_err(|e| network("download", e))?;
        let status = response.status();
        if !status.is_success() {
            let description = status.canonical_reason().unwrap_or("failed").to_owned();
            return Err(ApiError::Rejected {
                method: "download".into(),
                code: status.as_u16(),
                description,
                retry_after: None,
            });
        }
        let mut file = tokio::fs::File::create(dest).await.map_err(|e| file_error("download", dest, &e))?;
        while let Some(chunk) = response.chunk().await.map_err(|e| network("download", e))? {
            file.write_all(&chunk).await.map_err(|e| file_error("download", dest, &e))?;
        }
        file.flush().await.map_err(|e| file_error("download", dest, &e))
    }

    /// Uploads `path` with `method` (`sendPhoto`, `sendDocument`) under the field `field`,
    /// next to the text `fields`.
    pub async fn upload(
        &self,
        method: &str,
        field: &str,
        fields: &[(&str, String)],
        path: &Path,
    ) -> Result<SentMessage, ApiError> {
        let bytes = tokio::fs::read(path).await.map_err(|e| file_error(method, path, &e))?;
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".to_owned());
        let form = fields.iter().fold(Form::new(), |form, (name, value)| form.text(name, value.clone()));
        let (content_type, body) = form.file(field, &file_name, bytes).encode();
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .timeout(TRANSFER_TIMEOUT);
        let response = request.send().await.map_err(|e| network(method, e))?;
        decode(method, response).await
    }
}

/// Unwraps Telegram's envelope into the `result` or the error it describes.
async fn decode<T: DeserializeOwned>(method: &str, response: reqwest::Response) -> Result<T, ApiError> {
    let status = response.status();
    let body = response.bytes().await.map_err(|e| network(method, e))?;
    let envelope: Envelope = match serde_json::from_slice(&body) {
        Ok(envelope) => envelope,
        Err(_) if !status.is_success() => {
            let description = String::from_utf8_lossy(&body).chars().take(200).collect::<String>();
            return Err(ApiError::Rejected {
                method: method.into(),
                code: status.as_u16(),
                description,
                retry_after: None,
            });
        }
        Err(error) => return Err(ApiError::Malformed { method: method.into(), reason: error.to_string() }),
    };
    if !envelope.ok {
        return Err(ApiError::Rejected {
            method: method.into(),
            code: envelope.error_code.unwrap_or(status.as_u16()),
            description: envelope.description.unwrap_or_default(),
            retry_after: envelope.parameters.and_then(|p| p.retry_after).map(Duration::from_secs),
        });
    }
    serde_json::from_value(envelope.result)
        .map_err(|e| ApiError::Malformed { method: method.into(), reason: e.to_string() })
}

fn network(method: &str, error: reqwest::Error) -> ApiError {
    let reason = if error.is_timeout() { "timed out".to_owned() } else { error_chain(&error.without_url()) };
    ApiError::Network { method: method.into(), reason }
}

fn file_error(method: &str, path: &Path, error: &std::io::Error) -> ApiError {
    ApiError::File { method: method.into(), reason: format!("{}: {error}", path.display()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_chat_ids_go_out_as_numbers_and_channel_names_as_strings() {
        assert_eq!(chat_id_value("-1001234"), json!(-1001234));
        assert_eq!(chat_id_value("@news"), json!("@news"));
    }

    #[test]
    fn the_debug_form_of_the_client_hides_the_token() {
        let config = Config::from_value(&json!({"token": "123:secret"})).unwrap();
        let api = BotApi::new(&config).unwrap();
        assert!(!format!("{api:?}").contains("secret"));
    }
}
