//! One reply on its way to a chat: what to send, where, and which session records it when it
//! is delivered late.

use serde_json::Value;

use crate::session::SessionKey;

/// What to send where.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The channel plugin.
    pub channel: String,
    /// The chat.
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// Local paths of attachments.
    pub media: Vec<String>,
    /// The stream the reply ends, for channels that stream.
    pub stream_id: Option<u64>,
    /// The channel's details.
    pub metadata: Value,
    /// The session to record the text in when it is delivered only after a failed attempt.
    pub record_late_in: Option<SessionKey>,
}

impl Reply {
    /// A reply of `content` to `chat_id` of `channel`.
    pub fn new(channel: &str, chat_id: &str, content: String, stream_id: Option<u64>, metadata: Value) -> Reply {
        Reply {
            channel: channel.to_owned(),
            chat_id: chat_id.to_owned(),
            content,
            media: Vec::new(),
            stream_id,
            metadata,
            record_late_in: None,
        }
    }
}
