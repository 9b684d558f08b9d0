//! The typed shape of one streamed Anthropic event, read straight from the event's text:
//! strings without escapes are borrowed from it, and only the rare parts (a block's start,
//! usage, an error) are kept as `serde_json::Value`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

/// One event of a streamed message. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct Event<'a> {
    /// `message_start`, `content_block_delta`, … (unknown types carry nothing needed).
    #[serde(rename = "type", default, borrow)]
    pub(crate) kind: Option<Cow<'a, str>>,
    /// The content block an event is about.
    #[serde(default)]
    pub(crate) index: Option<u64>,
    /// `message_start`: the message's head, with the input token counts.
    #[serde(default)]
    pub(crate) message: Option<MessageHead>,
    /// `content_block_start`: the block as it opens.
    #[serde(default)]
    pub(crate) content_block: Option<Value>,
    /// `content_block_delta` and `message_delta`: what the event adds.
    #[serde(default, borrow)]
    pub(crate) delta: Option<Delta<'a>>,
    /// `message_delta`: the token counts so far.
    #[serde(default)]
    pub(crate) usage: Option<Value>,
    /// `error`: what went wrong.
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

/// The part of `message_start`'s message a reply needs.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageHead {
    /// The input token counts.
    #[serde(default)]
    pub(crate) usage: Option<Value>,
    /// The model that answers.
    #[serde(default)]
    pub(crate) model: Option<String>,
}

/// What a delta event adds: one of the text fields, chosen by `type`, or the stop reason.
#[derive(Debug, Deserialize)]
pub(crate) struct Delta<'a> {
    /// `text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`.
    #[serde(rename = "type", default, borrow)]
    pub(crate) kind: Option<Cow<'a, str>>,
    /// Answer text.
    #[serde(default, borrow)]
    pub(crate) text: Option<Cow<'a, str>>,
    /// Reasoning text.
    #[serde(default, borrow)]
    pub(crate) thinking: Option<Cow<'a, str>>,
    /// More of a thinking block's signature.
    #[serde(default, borrow)]
    pub(crate) signature: Option<Cow<'a, str>>,
    /// More of a tool call's input JSON.
    #[serde(default, borrow)]
    pub(crate) partial_json: Option<Cow<'a, str>>,
    /// `message_delta`: why the model stopped.
    #[serde(default, borrow)]
    pub(crate) stop_reason: Option<Cow<'a, str>>,
}
