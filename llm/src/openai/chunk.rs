//! The typed shape of one streamed Chat Completions chunk, read straight from the event's
//! text: strings without escapes are borrowed from it, fields a reply does not need are
//! skipped unread, and nothing becomes a `serde_json::Value` except the rare usage and error
//! objects.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;

/// One `data:` chunk of a streamed reply. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk<'a> {
    /// The choices; only the first is read.
    #[serde(default, borrow)]
    pub(crate) choices: Option<Vec<Choice<'a>>>,
    /// The model that answers, as the server names it.
    #[serde(default, borrow)]
    pub(crate) model: Option<Cow<'a, str>>,
    /// Token counts, normally in a last chunk of their own.
    #[serde(default)]
    pub(crate) usage: Option<Value>,
    /// An error the server reports inside the stream.
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

/// One choice of a chunk.
#[derive(Debug, Deserialize)]
pub(crate) struct Choice<'a> {
    /// Why the model stopped, on the choice's last chunk.
    #[serde(default, borrow)]
    pub(crate) finish_reason: Option<Cow<'a, str>>,
    /// What this chunk adds.
    #[serde(default, borrow)]
    pub(crate) delta: Option<Delta<'a>>,
}

/// What one chunk adds to the reply.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta<'a> {
    /// Answer text.
    #[serde(default, borrow)]
    pub(crate) content: Option<Text<'a>>,
    /// Reasoning, as DeepSeek and vLLM name it.
    #[serde(default, borrow)]
    pub(crate) reasoning_content: Option<Text<'a>>,
    /// Reasoning, as OpenRouter and Ollama name it (read when `reasoning_content` is absent).
    #[serde(default, borrow)]
    pub(crate) reasoning: Option<Text<'a>>,
    /// Pieces of tool calls.
    #[serde(default, borrow)]
    pub(crate) tool_calls: Option<Vec<ToolCallPiece<'a>>>,
}

/// A piece of one tool call: the first brings its id and name, later ones argument text.
#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallPiece<'a> {
    /// Which call the piece belongs to (its position in the chunk when absent).
    #[serde(default)]
    pub(crate) index: Option<u64>,
    /// The call's id.
    #[serde(default, borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    /// The function's name and argument text.
    #[serde(default, borrow)]
    pub(crate) function: Option<FunctionPiece<'a>>,
}

/// The function part of a tool-call piece.
#[derive(Debug, Deserialize)]
pub(crate) struct FunctionPiece<'a> {
    /// The function's name.
    #[serde(default, borrow)]
    pub(crate) name: Option<Cow<'a, str>>,
    /// More argument text.
    #[serde(default, borrow)]
    pub(crate) arguments: Option<Cow<'a, str>>,
}

/// Text content as servers send it: a string, or a list of parts whose `text` fields are
/// joined; any other JSON value is read as no text (as the untyped reader did).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

/// One part of list content; parts without text (images, …) add nothing.
#[derive(Debug, Deserialize)]
struct Part<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text<'a>, D::Error> {
        deserializer.deserialize_any(TextVisitor(std::marker::PhantomData))
    }
}

/// Reads [`Text`] from whatever JSON value comes.
struct TextVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("text or a list of text parts")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Owned(text)))
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut parts: S) -> Result<Text<'a>, S::Error> {
        let mut joined = String::new();
        while let Some(part) = parts.next_element::<Part<'de>>()? {
            joined.push_str(part.text.as_deref().unwrap_or_default());
        }
        Ok(Text(Cow::Owned(joined)))
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Text<'a>, M::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text::default())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Text<'a>, E> {
        Ok(Text::default())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Text<'a>, E> {
        Ok(Text::default())
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Text<'a>, E> {
        Ok(Text::default())
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Text<'a>, E> {
        Ok(Text::default())
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Text<'a>, E> {
        Ok(Text::default())
    }
}

impl Text<'_> {
    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}
