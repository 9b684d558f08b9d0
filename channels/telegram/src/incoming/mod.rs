//! A Telegram message → a [`Draft`] of what the kernel gets: who wrote, in which chat, the text
//! (with the bot's mention stripped), the attachments to fetch, and the metadata a reply needs.
//! Group messages not addressed to the bot stop here (unless the group policy is open).

use serde_json::{Map, Value, json};

use crate::config::GroupPolicy;
use crate::target::ReplyTarget;
use crate::types::Message;

/// The bot itself, from `getMe`.
#[derive(Debug, Clone)]
pub struct Bot {
    /// Its user id (replies to its messages address it).
    pub id: i64,
    /// Its username without `@` (mentions address it).
    pub username: String,
}

/// What kind of file a user sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentKind {
    /// A photo (the largest size is fetched).
    Image,
    /// A voice note.
    Voice,
    /// A music file.
    Audio,
    /// Any other document.
    File,
}

impl AttachmentKind {
    /// The text standing for it when the message has no text: `[image]`, `[voice]`, ….
    pub fn placeholder(self) -> &'static str {
        match self {
            AttachmentKind::Image => "[image]",
            AttachmentKind::Voice => "[voice]",
            AttachmentKind::Audio => "[audio]",
            AttachmentKind::File => "[file]",
        }
    }

    /// The file extension to use when Telegram's path has none.
    pub fn default_extension(self) -> &'static str {
        match self {
            AttachmentKind::Image => "jpg",
            AttachmentKind::Voice => "ogg",
            AttachmentKind::Audio => "mp3",
            AttachmentKind::File => "bin",
        }
    }
}

/// A file to fetch with `getFile`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// What it is.
    pub kind: AttachmentKind,
    /// The id for `getFile`.
    pub file_id: String,
    /// A stable id, used as the local file name.
    pub unique_id: Option<String>,
    /// The sender's name for it, if any.
    pub file_name: Option<String>,
}

/// A message bound for the kernel, before its attachments are fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// The sender's user id.
    pub sender_id: String,
    /// The chat id.
    pub chat_id: String,
    /// The text or caption, without the bot's mention; may be empty.
    pub text: String,
    /// Files to fetch.
    pub attachments: Vec<Attachment>,
    /// `message_id`, `is_group`, `chat_type`, `user_id`, `first_name`, `username`,
    /// `message_thread_id`.
    pub metadata: Value,
    /// Where the reply goes.
    pub target: ReplyTarget,
}

/// Why a message is not submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// It has no sender (a channel post).
    NoSender,
    /// A group message that neither mentions the bot nor replies to it.
    NotAddressed,
    /// Nothing the assistant can read (a sticker, a location, …).
    Unreadable,
}

/// Reads a message; `Err` says why it is skipped.
pub fn read(message: &Message, bot: &Bot, policy: GroupPolicy) -> Result<Draft, Skip> {
    let from = message.from.as_ref().ok_or(Skip::NoSender)?;
    let raw_text = message.text.as_deref().or(message.caption.as_deref()).unwrap_or_default();
    let is_group = message.chat.is_group();
    if is_group && policy == GroupPolicy::Mention && !addressed_to(message, raw_text, bot) {
        return Err(Skip::NotAddressed);
    }
    let text = if is_group { strip_mentions(raw_text, &bot.username) } else { raw_text.trim().to_owned() };
    let attachments = attachments(message);
    if text.is_empty() && attachments.is_empty() {
        return Err(Skip::Unreadable);
    }
    let mut metadata = Map::new();
    metadata.insert("message_id".into(), json!(message.message_id));
    metadata.insert("is_group".into(), json!(is_group));
    metadata.insert("chat_type".into(), json!(message.chat.kind));
    metadata.insert("user_id".into(), json!(from.id));
    metadata.insert("first_name".into(), json!(from.first_name));
    if let Some(username) = &from.username {
        metadata.insert("username".into(), json!(username));
    }
    if let Some(thread) = message.message_thread_id {
        metadata.insert("message_thread_id".into(), json!(thread));
    }
    Ok(Draft {
        sender_id: from.id.to_string(),
        chat_id: message.chat.id.to_string(),
        text,
        attachments,
        metadata: Value::Object(metadata),
        target: ReplyTarget { message_id: Some(message.message_id), thread: message.message_thread_id },
    })
}

/// Whether a group message mentions the bot or replies to one of its messages.
fn addressed_to(message: &Message, text: &str, bot: &Bot) -> bool {
    let replies_to_bot =
        message.reply_to_message.as_ref().and_then(|m| m.from.as_ref()).is_some_and(|user| user.id == bot.id);
    replies_to_bot || !mention_spans(text, &bot.username).is_empty()
}

/// The byte ranges of `@username` in `text` (any case, not followed by more name characters).
fn mention_spans(text: &str, username: &str) -> Vec<(usize, usize)> {
    if username.is_empty() {
        return Vec::new();
    }
    let lower = text.to_ascii_lowercase();
    let needle = format!("@{}", username.to_ascii_lowercase());
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find(&needle) {
        let start = from + found;
        let end = start + needle.len();
        let continues = lower[end..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !continues {
            spans.push((start, end));
        }
        from = end;
    }
    spans
}

/// `text` without the bot's mentions: `@bot what's up` → `what's up`, `/help@bot` → `/help`.
pub fn strip_mentions(text: &str, username: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in mention_spans(text, username) {
        out.push_str(&text[last..start]);
        let at_word_start = out.is_empty() || out.ends_with(char::is_whitespace);
        let mut resume = end;
        if at_word_start {
            // Take the separator after the mention with it: `@bot, hi` → `hi`.
            let rest = &text[end..];
            let skipped = rest.len() - rest.trim_start_matches([',', ':']).trim_start_matches([' ', '\t']).len();
            resume += skipped;
        }
        last = resume;
    }
    out.push_str(&text[last..]);
    out.trim().to_owned()
}

/// The files of a message: the largest photo size, a document, a voice note, an audio file.
fn attachments(message: &Message) -> Vec<Attachment> {
    let mut found = Vec::new();
    let largest = message.photo.iter().max_by_key(|p| u64::from(p.width) * u64::from(p.height));
    if let Some(photo) = largest {
        found.push(Attachment {
            kind: AttachmentKind::Image,
            file_id: photo.file_id.clone(),
            unique_id: photo.file_unique_id.clone(),
            file_name: None,
        });
    }
    let files = [
        (AttachmentKind::File, &message.document),
        (AttachmentKind::Voice, &message.voice),
        (AttachmentKind::Audio, &message.audio),
    ];
    for (kind, file) in files {
        if let Some(file) = file {
            let kind =
                if kind == AttachmentKind::File && file.mime_type.as_deref().is_some_and(|m| m.starts_with("image/")) {
                    AttachmentKind::Image
                } else {
                    kind
                };
            found.push(Attachment {
                kind,
                file_id: file.file_id.clone(),
                unique_id: file.file_unique_id.clone(),
                file_name: file.file_name.clone(),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests;
