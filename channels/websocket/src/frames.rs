//! The JSON text frames of the WebSocket protocol: what clients send and what the server
//! answers.
//!
//! | direction | frame |
//! |---|---|
//! | client → | `{"type":"message","text":"…","id":"optional client id"}` |
//! | client → | `{"type":"ping"}` (for clients that cannot send WebSocket pings) |
//! | ← server | `{"type":"ready","chat_id":"…"}` once, right after the upgrade |
//! | ← server | `{"type":"accepted","id":"…"}` once the kernel persisted a message |
//! | ← server | `{"type":"delta","text":"…","stream_id":N}` a piece of a reply being written |
//! | ← server | `{"type":"tool_hint","text":"…","stream_id":N}` a tool the reply being written calls |
//! | ← server | `{"type":"message","text":"…","stream_id":N}` a whole reply (`stream_id` only when streamed) |
//! | ← server | `{"type":"approval","code":"…","tool":"…","shown":"…","text":"…"}` a tool call waiting for the person's yes (answer with a `message` `/approve CODE` or `/deny CODE`) |
//! | ← server | `{"type":"error","error":"…"}` a refused frame, a failed submit, or no authorisation |
//! | ← server | `{"type":"pong"}` |

use serde::{Deserialize, Serialize};

/// Longest client message id kept (longer ids are refused).
const MAX_CLIENT_ID_LEN: usize = 128;

/// A frame a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientFrame {
    /// A user's message, with the client's own id for it when it gave one.
    Message {
        /// The text of the message.
        text: String,
        /// The client's id for the message, echoed in `accepted`.
        id: Option<String>,
    },
    /// An application-level ping.
    Ping,
}

/// Why a client's frame was refused; the text goes back in an `error` frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON, or not the shape of a known frame.
    #[error("invalid frame: {0}")]
    Invalid(String),
    /// A `message` frame whose text is empty.
    #[error("invalid frame: the message text is empty")]
    EmptyText,
    /// A client id that is empty, too long or holds control characters.
    #[error("invalid frame: the id must be 1 to {MAX_CLIENT_ID_LEN} printable characters")]
    BadId,
    /// A binary frame: the protocol is JSON text.
    #[error("binary frames are not understood: send JSON text frames")]
    Binary,
}

/// The wire shape of a client frame, before checks.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawFrame {
    Message {
        text: String,
        #[serde(default)]
        id: Option<RawId>,
    },
    Ping,
}

/// A client id as JSON allows it: clients written in JavaScript often use numbers.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawId {
    Text(String),
    Number(u64),
}

/// Parses one text frame from a client.
pub fn parse_client_frame(text: &str) -> Result<ClientFrame, FrameError> {
    let raw: RawFrame = serde_json::from_str(text).map_err(|e| FrameError::Invalid(e.to_string()))?;
    match raw {
        RawFrame::Ping => Ok(ClientFrame::Ping),
        RawFrame::Message { text, id } => {
            if text.trim().is_empty() {
                return Err(FrameError::EmptyText);
            }
            let id = id.map(checked_id).transpose()?;
            Ok(ClientFrame::Message { text, id })
        }
    }
}

/// A client id as text, refused when it could not serve as part of an inbound id.
fn checked_id(raw: RawId) -> Result<String, FrameError> {
    let id = match raw {
        RawId::Text(text) => text,
        RawId::Number(number) => number.to_string(),
    };
    let printable = !id.is_empty() && id.len() <= MAX_CLIENT_ID_LEN && !id.chars().any(char::is_control);
    printable.then_some(id).ok_or(FrameError::BadId)
}

/// A frame the server sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame<'a> {
    /// The connection is set up; replies for `chat_id` will arrive on it.
    Ready {
        /// The chat this connection belongs to.
        chat_id: &'a str,
    },
    /// The kernel persisted the message with this id.
    Accepted {
        /// The client's id for the message, or the one the channel gave it.
        id: &'a str,
    },
    /// A piece of a reply being written.
    Delta {
        /// Text to append.
        text: &'a str,
        /// Shared by every piece of one reply and by its final `message`.
        stream_id: u64,
    },
    /// A tool the reply being written calls (`read_file {"path": "notes.md"}`).
    ToolHint {
        /// The hint.
        text: &'a str,
        /// The stream of the reply that calls the tool.
        #[serde(skip_serializing_if = "Option::is_none")]
        stream_id: Option<u64>,
    },
    /// A whole reply.
    Message {
        /// The reply's text (Markdown).
        text: &'a str,
        /// The stream the reply was written in, when it was streamed.
        #[serde(skip_serializing_if = "Option::is_none")]
        stream_id: Option<u64>,
    },
    /// A tool call waits for the person's approval; answer with a `message` whose text is
    /// `/approve CODE`, `/approve CODE always` or `/deny CODE`.
    Approval {
        /// The code the answer names.
        code: &'a str,
        /// The tool.
        tool: &'a str,
        /// The call as it will run.
        shown: &'a str,
        /// The request in words (what a client without a dialog shows).
        text: &'a str,
    },
    /// Something went wrong.
    Error {
        /// What, in words for the user.
        error: &'a str,
    },
    /// The answer to a `ping` frame.
    Pong,
}

impl ServerFrame<'_> {
    /// The frame as JSON text.
    pub fn to_json(&self) -> String {
        // Serialising these plain shapes cannot fail; an empty object would be harmless anyway.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_message_frame_gives_its_text_and_optional_id() {
        assert_eq!(
            parse_client_frame(r#"{"type":"message","text":"hi"}"#),
            Ok(ClientFrame::Message { text: "hi".into(), id: None })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"message","text":"hi","id":"m-1"}"#),
            Ok(ClientFrame::Message { text: "hi".into(), id: Some("m-1".into()) })
        );
    }

    #[test]
    fn a_numeric_client_id_is_taken_as_text() {
        assert_eq!(
            parse_client_frame(r#"{"type":"message","text":"hi","id":42}"#),
            Ok(ClientFrame::Message { text: "hi".into(), id: Some("42".into()) })
        );
    }

    #[test]
    fn unknown_fields_are_ignored_and_ping_is_understood() {
        assert_eq!(
            parse_client_frame(r#"{"type":"message","text":"hi","extra":true}"#).unwrap(),
            ClientFrame::Message { text: "hi".into(), id: None }
        );
        assert_eq!(parse_client_frame(r#"{"type":"ping"}"#), Ok(ClientFrame::Ping));
    }

    #[test]
    fn frames_that_are_not_json_or_of_an_unknown_type_or_without_text_are_refused() {
        for bad in
            ["hello", "{}", r#"{"type":"shout","text":"x"}"#, r#"{"type":"message"}"#, r#"{"type":"message","text":5}"#]
        {
            let error = parse_client_frame(bad).unwrap_err();
            assert!(matches!(error, FrameError::Invalid(_)), "{bad}: {error:?}");
        }
    }

    #[test]
    fn an_empty_text_or_an_unusable_id_is_refused() {
        assert_eq!(parse_client_frame(r#"{"type":"message","text":"  "}"#), Err(FrameError::EmptyText));
        assert_eq!(parse_client_frame(r#"{"type":"message","text":"x","id":""}"#), Err(FrameError::BadId));
        assert_eq!(parse_client_frame(r#"{"type":"message","text":"x","id":"a\nb"}"#), Err(FrameError::BadId));
        let long = format!(r#"{{"type":"message","text":"x","id":"{}"}}"#, "a".repeat(129));
        assert_eq!(parse_client_frame(&long), Err(FrameError::BadId));
    }

    #[test]
    fn server_frames_serialise_with_a_type_tag() {
        assert_eq!(ServerFrame::Ready { chat_id: "c1" }.to_json(), r#"{"type":"ready","chat_id":"c1"}"#);
        assert_eq!(ServerFrame::Accepted { id: "m-1" }.to_json(), r#"{"type":"accepted","id":"m-1"}"#);
        assert_eq!(
            ServerFrame::Delta { text: "He", stream_id: 3 }.to_json(),
            r#"{"type":"delta","text":"He","stream_id":3}"#
        );
        assert_eq!(
            ServerFrame::Message { text: "Hello", stream_id: Some(3) }.to_json(),
            r#"{"type":"message","text":"Hello","stream_id":3}"#
        );
        assert_eq!(
            ServerFrame::Message { text: "Hello", stream_id: None }.to_json(),
            r#"{"type":"message","text":"Hello"}"#
        );
        assert_eq!(ServerFrame::Error { error: "no" }.to_json(), r#"{"type":"error","error":"no"}"#);
        assert_eq!(
            ServerFrame::ToolHint { text: "list_dir", stream_id: Some(3) }.to_json(),
            r#"{"type":"tool_hint","text":"list_dir","stream_id":3}"#
        );
        assert_eq!(ServerFrame::Pong.to_json(), r#"{"type":"pong"}"#);
    }
}
