//! `GET /ws`: the page's chat socket, passed through to the `websocket` channel plugin. The
//! gateway opens the upgrade to the channel itself, adding the channel's token, so the page
//! never sees it; after the channel's `101` the bytes flow both ways untouched, so the page
//! speaks the channel's own protocol (`channels/websocket/src/frames.rs`).

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::http::{Request, Response};

/// The channel's default port and path (see `channels/websocket`).
const DEFAULT_PORT: u64 = 18792;
const DEFAULT_PATH: &str = "/ws";
/// Longest chat id the page may ask for.
const MAX_CHAT_ID: usize = 64;

/// Where the `websocket` channel listens, and its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTarget {
    /// `host:port` to connect to.
    address: String,
    /// The upgrade path.
    path: String,
    /// `channels.websocket.token`, added to the upgrade.
    token: Option<String>,
}

impl ChatTarget {
    /// The target described by the `channels.websocket` section.
    pub fn from_section(raw: &Value) -> ChatTarget {
        let host = raw.get("host").and_then(Value::as_str).unwrap_or("127.0.0.1");
        // A server on every address is reached on this machine's own.
        let host = match host {
            "0.0.0.0" | "" => "127.0.0.1",
            "::" | "[::]" => "[::1]",
            other => other,
        };
        let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() };
        let port = raw.get("port").and_then(Value::as_u64).unwrap_or(DEFAULT_PORT);
        let path = raw.get("path").and_then(Value::as_str).unwrap_or(DEFAULT_PATH).to_owned();
        let token = raw.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_owned);
        ChatTarget { address: format!("{host}:{port}"), path, token }
    }

    /// The upgrade request sent to the channel for the page's `request`.
    fn upgrade_for(&self, request: &Request, chat_id: &str) -> Option<String> {
        let key = request.header("sec-websocket-key").filter(|k| is_header_safe(k))?;
        let mut head = format!(
            "GET {}?chat_id={chat_id}&client_id=web HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
            self.path, self.address
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        Some(head)
    }
}

/// Connects the page's socket to the channel; answers with an error when it cannot.
pub async fn forward(mut page: TcpStream, request: &Request, target: Option<&ChatTarget>) -> std::io::Result<()> {
    let Some(target) = target else {
        let refusal = "the chat needs the websocket channel: set channels.websocket.enabled to true";
        return Response::error(503, refusal).write_to(&mut page).await;
    };
    let chat_id = request.query_param("chat_id").unwrap_or_default();
    if !is_chat_id(&chat_id) {
        let refusal = format!("chat_id must be 1 to {MAX_CHAT_ID} letters, digits, '-' or '_'");
        return Response::error(400, refusal).write_to(&mut page).await;
    }
    let Some(upgrade) = target.upgrade_for(request, &chat_id) else {
        return Response::error(400, "not a WebSocket upgrade").write_to(&mut page).await;
    };
    let mut channel = match TcpStream::connect(&target.address).await {
        Ok(channel) => channel,
        Err(error) => {
            let refusal = format!("the websocket channel does not answer ({error}); see the Health view");
            return Response::error(502, refusal).write_to(&mut page).await;
        }
    };
    channel.write_all(upgrade.as_bytes()).await?;
    tokio::io::copy_bidirectional(&mut page, &mut channel).await.map(|_| ())
}

/// Whether the page's chat id can be passed on as it is.
fn is_chat_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_CHAT_ID && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Whether a header value can be copied into another request.
fn is_header_safe(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn the_target_reaches_a_server_on_every_address_through_loopback() {
        let target = ChatTarget::from_section(&json!({"enabled": true, "host": "0.0.0.0", "port": 9000, "token": "t"}));
        assert_eq!(target.address, "127.0.0.1:9000");
        assert_eq!(target.token.as_deref(), Some("t"));
        assert_eq!(ChatTarget::from_section(&json!({})).address, "127.0.0.1:18792");
        assert_eq!(ChatTarget::from_section(&json!({"host": "::"})).address, "[::1]:18792");
    }

    #[test]
    fn the_upgrade_names_the_chat_and_carries_the_channel_token_not_the_pages_headers() {
        let target = ChatTarget::from_section(&json!({"port": 9000, "token": "s3cret", "path": "/chat"}));
        let request = Request {
            method: "GET".into(),
            path: "/ws".into(),
            query: "chat_id=web-1".into(),
            headers: vec![("sec-websocket-key".into(), "abc==".into()), ("cookie".into(), "oxibot_ui=aa".into())],
            body: Vec::new(),
        };
        let upgrade = target.upgrade_for(&request, "web-1").unwrap();
        assert!(upgrade.starts_with("GET /chat?chat_id=web-1&client_id=web HTTP/1.1\r\n"), "{upgrade}");
        assert!(upgrade.contains("Authorization: Bearer s3cret\r\n"));
        assert!(upgrade.contains("Sec-WebSocket-Key: abc==\r\n"));
        assert!(!upgrade.contains("oxibot_ui"));
    }

    #[test]
    fn only_plain_chat_ids_pass() {
        assert!(is_chat_id("web-abc_1"));
        assert!(!is_chat_id(""));
        assert!(!is_chat_id("a b"));
        assert!(!is_chat_id("a\r\nHost: x"));
        assert!(!is_chat_id(&"a".repeat(65)));
    }
}
