//! `SessionKey`: the name of a conversation, `channel:chat_id`, parsed and built in one place.

use std::fmt;

/// The key of a session: the channel it belongs to and the chat within that channel, written
/// `channel:chat_id` (`telegram:123`, `cli:direct`). The chat id may itself contain `:`; the
/// channel never does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// `channel:chat_id` as written.
    text: String,
    /// Where the channel ends in `text` (`text.len()` for a key without `:`).
    split: usize,
}

impl SessionKey {
    /// The key of chat `chat_id` on `channel`.
    pub fn new(channel: &str, chat_id: &str) -> SessionKey {
        SessionKey { text: format!("{channel}:{chat_id}"), split: channel.len() }
    }

    /// A key as written in a session file or on the command line. A key without `:` (older
    /// nanobot files, hand-picked CLI names) is its own channel and its own chat.
    pub fn from_text(text: &str) -> SessionKey {
        let split = text.find(':').unwrap_or(text.len());
        SessionKey { text: text.to_owned(), split }
    }

    /// A key that names a channel and a chat, or `None` when `text` has no `:`.
    pub fn parse(text: &str) -> Option<SessionKey> {
        text.contains(':').then(|| SessionKey::from_text(text))
    }

    /// The channel: `telegram` in `telegram:123`.
    pub fn channel(&self) -> &str {
        &self.text[..self.split]
    }

    /// The chat within the channel: `123` in `telegram:123` (the whole key when it has no `:`).
    pub fn chat_id(&self) -> &str {
        match self.text.get(self.split + 1..) {
            Some(chat) if self.split < self.text.len() => chat,
            _ => &self.text,
        }
    }

    /// `channel:chat_id`.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<&str> for SessionKey {
    fn from(text: &str) -> SessionKey {
        SessionKey::from_text(text)
    }
}

impl From<&String> for SessionKey {
    fn from(text: &String) -> SessionKey {
        SessionKey::from_text(text)
    }
}

impl From<&SessionKey> for SessionKey {
    fn from(key: &SessionKey) -> SessionKey {
        key.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_splits_at_its_first_colon() {
        let key = SessionKey::from_text("matrix:!room:example.org");
        assert_eq!(key.channel(), "matrix");
        assert_eq!(key.chat_id(), "!room:example.org");
        assert_eq!(key.as_str(), "matrix:!room:example.org");
    }

    #[test]
    fn a_key_without_colon_is_its_own_channel_and_chat() {
        let key = SessionKey::from_text("notes");
        assert_eq!((key.channel(), key.chat_id()), ("notes", "notes"));
        assert_eq!(SessionKey::parse("notes"), None);
    }

    #[test]
    fn a_built_key_reads_back_the_same() {
        let key = SessionKey::new("telegram", "42");
        assert_eq!(key, SessionKey::from_text("telegram:42"));
        assert_eq!(key.to_string(), "telegram:42");
        assert_eq!(SessionKey::parse("telegram:42"), Some(key));
    }

    #[test]
    fn an_empty_chat_id_stays_empty() {
        let key = SessionKey::from_text("cli:");
        assert_eq!((key.channel(), key.chat_id()), ("cli", ""));
    }
}
