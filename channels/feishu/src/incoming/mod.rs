//! Which events become messages for the kernel, and what those messages say: only
//! `im.message.receive_v1` from users, and presses of an approval card's buttons
//! (`card.action.trigger`) as the presser's answer; in groups, only messages mentioning the bot unless the
//! policy is open; the bot's mention stripped and other mentions named; rich text flattened to
//! Markdown; pictures, files, voice and videos listed for download; the chat (per topic with
//! `topicIsolation`) and the message's ids in the metadata.

use oxibot_plugin::chat;
use serde_json::{Value, json};

use crate::api::ResourceKind;
use crate::cards::{ANSWER_CHAT_KEY, ANSWER_KEY};
use crate::config::{Config, GroupPolicy};

/// The event type of a message sent to the bot.
pub const MESSAGE_RECEIVED: &str = "im.message.receive_v1";
/// The event type of a press of a card's button.
pub const CARD_ACTION: &str = "card.action.trigger";
/// The `msg_type` in the metadata of a button press.
pub const CARD_PRESS: &str = "card_action";

/// A user's message as the kernel gets it, files still to fetch.
///
/// - `id`: Feishu's `message_id` (`om_…`): the same for every redelivery.
/// - `sender_id`: The sender's open id (`ou_…`).
/// - `chat_id`: The sender's open id for one-to-one chats; the group's chat id (`oc_…`) for groups,
///   or `<chat id>:<root message id>` with `topicIsolation`.
/// - `content`: The text.
/// - `metadata`: `is_group`, `message_id`, `chat_id`, `chat_type`, `msg_type`, `parent_id`,
///   `root_id`, `thread_id`.
pub type UserMessage = chat::UserMessage<Attachment>;

/// A file a message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// How to ask for it.
    pub kind: ResourceKind,
    /// `image_key` or `file_key`.
    pub key: String,
    /// What the text calls it: `[image]`, `[file: report.pdf]`, `[audio]`, `[video]`.
    pub label: String,
    /// The extension to save it with.
    pub extension: String,
}

/// What to do with one event.
pub type Verdict = chat::Verdict<UserMessage>;

/// Decides about one event (`schema` 2.0: `header` and `event`).
pub fn judge(payload: &Value, bot_open_id: &str, config: &Config) -> Verdict {
    if payload["header"]["event_type"] == CARD_ACTION {
        return card_press(payload);
    }
    if payload["header"]["event_type"] != MESSAGE_RECEIVED {
        return Verdict::Ignore("not a message");
    }
    let (sender, message) = (&payload["event"]["sender"], &payload["event"]["message"]);
    if matches!(sender["sender_type"].as_str(), Some("app" | "bot")) {
        return Verdict::Ignore("sent by a bot");
    }
    let text = |value: &Value, key: &str| value[key].as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    let (Some(id), Some(sender_id), Some(chat), Some(chat_type), Some(msg_type)) = (
        text(message, "message_id"),
        text(&sender["sender_id"], "open_id"),
        text(message, "chat_id"),
        text(message, "chat_type"),
        text(message, "message_type"),
    ) else {
        return Verdict::Ignore("no message id, sender, chat, chat type or message type");
    };
    let raw = message["content"].as_str().unwrap_or_default();
    let mentions = message["mentions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let is_group = chat_type == "group";
    if is_group && config.group_policy == GroupPolicy::Mention && !mentions_bot(raw, mentions, bot_open_id) {
        return Verdict::Ignore("a group message that does not mention the bot");
    }
    let content: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let (words, attachments) = contents(&msg_type, &content, mentions, bot_open_id);
    if words.is_empty() && attachments.is_empty() {
        return Verdict::Ignore("no text and no files");
    }
    let root = text(message, "root_id");
    let chat_id = match (is_group, config.topic_isolation) {
        (true, true) => format!("{chat}:{}", root.as_deref().unwrap_or(&id)),
        (true, false) => chat.clone(),
        (false, _) => sender_id.clone(),
    };
    let metadata = json!({
        "is_group": is_group,
        "message_id": id,
        "chat_id": chat,
        "chat_type": chat_type,
        "msg_type": msg_type,
        "parent_id": text(message, "parent_id"),
        "root_id": root,
        "thread_id": text(message, "thread_id"),
    });
    Verdict::Submit(UserMessage { id, sender_id, chat_id, content: words, attachments, metadata })
}

/// A press of an approval card's button as the presser's message: the answer the button
/// carries, from the operator's open id, in the chat the request was asked in; its id is the
/// callback's event id (one per press). Any other button is ignored.
fn card_press(payload: &Value) -> Verdict {
    let (event, value) = (&payload["event"], &payload["event"]["action"]["value"]);
    let text = |value: &Value| value.as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    let answer = text(&value[ANSWER_KEY]).filter(|answer| chat::is_approval_answer(answer));
    let (Some(content), Some(chat_id), Some(sender_id), Some(id)) = (
        answer,
        text(&value[ANSWER_CHAT_KEY]),
        text(&event["operator"]["open_id"]),
        text(&payload["header"]["event_id"]),
    ) else {
        return Verdict::Ignore("a card action that is no approval answer");
    };
    let metadata = json!({
        "is_group": chat_id.starts_with("oc_"),
        "message_id": text(&event["context"]["open_message_id"]),
        "chat_id": text(&event["context"]["open_chat_id"]),
        "msg_type": CARD_PRESS,
    });
    Verdict::Submit(UserMessage { id, sender_id, chat_id, content, attachments: Vec::new(), metadata })
}

/// Whether the bot (or everyone) is mentioned.
fn mentions_bot(raw_content: &str, mentions: &[Value], bot_open_id: &str) -> bool {
    raw_content.contains("@_all") || mentions.iter().any(|mention| is_bot(mention, bot_open_id))
}

fn is_bot(mention: &Value, bot_open_id: &str) -> bool {
    !bot_open_id.is_empty() && mention["id"]["open_id"] == bot_open_id
}

/// The words and files of a message, by its type.
fn contents(msg_type: &str, content: &Value, mentions: &[Value], bot_open_id: &str) -> (String, Vec<Attachment>) {
    let key = |name: &str| content[name].as_str().filter(|key| !key.is_empty()).map(str::to_owned);
    let attachment = |kind, key: Option<String>, label: String, extension: &str| {
        key.map(|key| Attachment { kind, key, label, extension: extension.to_owned() })
    };
    let files = match msg_type {
        "text" => {
            return (with_mentions(content["text"].as_str().unwrap_or_default(), mentions, bot_open_id), Vec::new());
        }
        "post" => return post(content, mentions, bot_open_id),
        "image" => attachment(ResourceKind::Image, key("image_key"), "[image]".into(), "jpg"),
        "file" => {
            let name = content["file_name"].as_str().unwrap_or("file");
            attachment(
                ResourceKind::File,
                key("file_key"),
                format!("[file: {name}]"),
                &extension_of(name).unwrap_or_else(|| "bin".into()),
            )
        }
        "audio" => attachment(ResourceKind::File, key("file_key"), "[audio]".into(), "opus"),
        "media" => attachment(ResourceKind::File, key("file_key"), "[video]".into(), "mp4"),
        other => return (format!("[{other}]"), Vec::new()),
    };
    (String::new(), files.into_iter().collect())
}

/// Text with the bot's leading mention removed and the others as `@Name (open id)`.
fn with_mentions(text: &str, mentions: &[Value], bot_open_id: &str) -> String {
    let mut text = text.trim().to_owned();
    for mention in mentions {
        let Some(key) = mention["key"].as_str().filter(|key| !key.is_empty()) else { continue };
        if is_bot(mention, bot_open_id) && text.starts_with(key) && !continues_key(&text[key.len()..]) {
            text = text[key.len()..].trim_start().to_owned();
        }
    }
    for mention in mentions {
        let Some(key) = mention["key"].as_str().filter(|key| !key.is_empty()) else { continue };
        let name = mention["name"].as_str().unwrap_or(key);
        let named = match mention["id"]["open_id"].as_str().filter(|id| !id.is_empty()) {
            Some(open_id) => format!("@{name} ({open_id})"),
            None => format!("@{name}"),
        };
        text = replace_key(&text, key, &named);
    }
    text.trim().to_owned()
}

/// Whether `rest` (what follows a `@_user_1`) would make it a longer key (`@_user_10`).
fn continues_key(rest: &str) -> bool {
    rest.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `text` with each whole occurrence of `key` replaced.
fn replace_key(text: &str, key: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let after = &rest[at + key.len()..];
        out.push_str(&rest[..at]);
        out.push_str(if continues_key(after) { key } else { with });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A rich text (`post`) message as Markdown, its pictures as attachments. The content is the
/// post itself or, from some clients, wrapped in a language (`zh_cn`, `en_us`, …).
fn post(content: &Value, mentions: &[Value], bot_open_id: &str) -> (String, Vec<Attachment>) {
    let post = if content["content"].is_array() {
        content
    } else {
        content
            .as_object()
            .and_then(|languages| languages.values().find(|post| post["content"].is_array()))
            .unwrap_or(content)
    };
    let mut lines = Vec::new();
    if let Some(title) = post["title"].as_str().filter(|title| !title.trim().is_empty()) {
        lines.push(title.trim().to_owned());
    }
    let mut attachments = Vec::new();
    for paragraph in post["content"].as_array().into_iter().flatten() {
        let mut line = String::new();
        for element in paragraph.as_array().into_iter().flatten() {
            let text = element["text"].as_str().unwrap_or_default();
            match element["tag"].as_str().unwrap_or_default() {
                "text" | "md" => line.push_str(text),
                "a" => line.push_str(&format!("[{text}]({})", element["href"].as_str().unwrap_or_default())),
                "at" if element["user_id"] == bot_open_id => {}
                "at" => line.push_str(&format!("@{}", element["user_name"].as_str().unwrap_or("someone"))),
                "code_block" => {
                    let language = element["language"].as_str().unwrap_or_default().to_lowercase();
                    line.push_str(&format!("\n```{language}\n{}\n```\n", text.trim_end()));
                }
                "img" => {
                    if let Some(key) = element["image_key"].as_str().filter(|key| !key.is_empty()) {
                        attachments.push(Attachment {
                            kind: ResourceKind::Image,
                            key: key.to_owned(),
                            label: "[image]".into(),
                            extension: "jpg".into(),
                        });
                    }
                }
                "emotion" => line.push_str(&format!(":{}:", element["emoji_type"].as_str().unwrap_or_default())),
                "hr" => line.push_str("---"),
                _ => {}
            }
        }
        let line = line.trim();
        if !line.is_empty() {
            lines.push(line.to_owned());
        }
    }
    (with_mentions(&lines.join("\n"), mentions, bot_open_id), attachments)
}

fn extension_of(name: &str) -> Option<String> {
    let (_, extension) = name.rsplit_once('.')?;
    let plain = !extension.is_empty() && extension.len() <= 8 && extension.chars().all(|c| c.is_ascii_alphanumeric());
    plain.then(|| extension.to_ascii_lowercase())
}

#[cfg(test)]
mod tests;
