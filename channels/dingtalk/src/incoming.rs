//! What a robot message callback says, as a message for the kernel: who sent it, the chat it
//! belongs to (`group:<conversation>` for groups, per member with `groupUserIsolation`, as
//! nanobot names them), its text, and the files to fetch.

use oxibot_plugin::chat;
use serde_json::{Value, json};

use crate::config::Config;

/// `conversationType` of a group chat (`"1"` is one-to-one).
const GROUP: &str = "2";
/// The prefix of a group chat's id, as nanobot writes it.
pub const GROUP_PREFIX: &str = "group:";

/// A user's message as the kernel gets it, files still to fetch.
///
/// - `id`: DingTalk's `msgId`: the same for every redelivery of the message.
/// - `sender_id`: The sender's staff (user) id, else their DingTalk id.
/// - `chat_id`: The sender's id for one-to-one chats; `group:<conversationId>` for groups, or
///   `group:<conversationId>:<sender>` with `groupUserIsolation`.
/// - `content`: The text (or speech recognised in a voice message).
/// - `metadata`: `is_group`, `username`, `sender_name`, `conversation_id`, `conversation_type`,
///   `msg_id`, and `conversation_title` for groups.
pub type UserMessage = chat::UserMessage<Attachment>;

/// A file a message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// What it is.
    pub kind: AttachmentKind,
    /// Exchanged for a download URL with `messageFiles/download`.
    pub download_code: String,
    /// The name the sender gave it, for files.
    pub file_name: Option<String>,
}

/// The kinds of files users send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentKind {
    /// A picture (`picture`, or one inside `richText`).
    Image,
    /// A file (`file`).
    File,
    /// A video (`video`).
    Video,
}

impl AttachmentKind {
    /// How the text refers to it when the message has no words.
    pub fn placeholder(self) -> &'static str {
        match self {
            AttachmentKind::Image => "[Image]",
            AttachmentKind::File => "[File]",
            AttachmentKind::Video => "[Video]",
        }
    }

    /// The extension of a saved file whose name does not tell.
    pub fn default_extension(self) -> &'static str {
        match self {
            AttachmentKind::Image => "jpg",
            AttachmentKind::File => "bin",
            AttachmentKind::Video => "mp4",
        }
    }
}

/// What to do with one callback.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Hand it to the kernel.
    Submit(UserMessage),
    /// A one-to-one message while private chats are disabled: tell this user so, once.
    RefusePrivate {
        /// The message's id, so a redelivery gets no second notice.
        id: String,
        /// Who to tell.
        user: String,
    },
    /// Leave it out, for this reason (for logs and tests).
    Ignore(&'static str),
}

/// Decides about the `data` of a robot message callback.
pub fn judge(data: &Value, config: &Config) -> Verdict {
    let text = |key: &str| data[key].as_str().map(str::trim).filter(|value| !value.is_empty());
    let Some(id) = text("msgId") else { return Verdict::Ignore("no msgId") };
    let Some(sender) = text("senderStaffId").or_else(|| text("senderId")) else {
        return Verdict::Ignore("no sender");
    };
    let conversation = text("conversationId");
    let is_group = text("conversationType") == Some(GROUP) && conversation.is_some();
    if !is_group && config.disable_private_chat {
        return Verdict::RefusePrivate { id: id.to_owned(), user: sender.to_owned() };
    }
    let (content, attachments) = contents(data);
    if content.is_empty() && attachments.is_empty() {
        return Verdict::Ignore("no text and no files");
    }
    let chat_id = match conversation.filter(|_| is_group) {
        Some(conversation) if config.group_user_isolation => format!("{GROUP_PREFIX}{conversation}:{sender}"),
        Some(conversation) => format!("{GROUP_PREFIX}{conversation}"),
        None => sender.to_owned(),
    };
    let nick = text("senderNick").unwrap_or_default();
    let mut metadata = json!({
        "is_group": is_group,
        "username": nick,
        "sender_name": nick,
        "conversation_id": conversation.unwrap_or_default(),
        "conversation_type": text("conversationType").unwrap_or_default(),
        "msg_id": id,
    });
    if let Some(title) = text("conversationTitle").filter(|_| is_group) {
        metadata["conversation_title"] = json!(title);
    }
    Verdict::Submit(UserMessage {
        id: id.to_owned(),
        sender_id: sender.to_owned(),
        chat_id,
        content,
        attachments,
        metadata,
    })
}

/// The words and files of a message, by its `msgtype`.
fn contents(data: &Value) -> (String, Vec<Attachment>) {
    let content = &data["content"];
    let code = |value: &Value| value["downloadCode"].as_str().filter(|code| !code.is_empty()).map(str::to_owned);
    let attachment = |kind, value: &Value| {
        code(value).map(|download_code| Attachment {
            kind,
            download_code,
            file_name: value["fileName"].as_str().filter(|name| !name.is_empty()).map(str::to_owned),
        })
    };
    match data["msgtype"].as_str().unwrap_or_default() {
        "text" => (trimmed(&data["text"]["content"]), Vec::new()),
        "audio" => (trimmed(&content["recognition"]), Vec::new()),
        "picture" => (String::new(), attachment(AttachmentKind::Image, content).into_iter().collect()),
        "file" => (String::new(), attachment(AttachmentKind::File, content).into_iter().collect()),
        "video" => (String::new(), attachment(AttachmentKind::Video, content).into_iter().collect()),
        "richText" => rich_text(content["richText"].as_array().map(Vec::as_slice).unwrap_or_default(), attachment),
        _ => (trimmed(&data["text"]["content"]), Vec::new()),
    }
}

/// A `richText` message: its pieces of text (styled as Markdown) joined, its pictures kept.
fn rich_text(
    items: &[Value],
    attachment: impl Fn(AttachmentKind, &Value) -> Option<Attachment>,
) -> (String, Vec<Attachment>) {
    let mut words = Vec::new();
    let mut attachments = Vec::new();
    for item in items {
        let text = item["text"].as_str().map(str::trim).unwrap_or_default();
        if !text.is_empty() {
            words.push(match item["type"].as_str().unwrap_or_default() {
                "bold" => format!("**{text}**"),
                "italic" => format!("*{text}*"),
                "inlineCode" => format!("`{text}`"),
                "pre" => format!("```\n{text}\n```"),
                _ => text.to_owned(),
            });
        }
        let kind = if item["type"] == "picture" { AttachmentKind::Image } else { AttachmentKind::File };
        attachments.extend(attachment(kind, item));
    }
    (words.join(" "), attachments)
}

fn trimmed(value: &Value) -> String {
    value.as_str().map(str::trim).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: Value) -> Config {
        let mut section = json!({"clientId": "ding1", "clientSecret": "s"});
        if let (Some(section), Some(extra)) = (section.as_object_mut(), extra.as_object()) {
            section.extend(extra.clone());
        }
        Config::from_value(&section).unwrap()
    }

    fn one_to_one(text: &str) -> Value {
        json!({"msgId": "msg1", "msgtype": "text", "text": {"content": text}, "conversationType": "1",
               "conversationId": "cidP2P", "senderStaffId": "staff7", "senderId": "$:LWCP_v1:$x", "senderNick": "Ada"})
    }

    fn group(text: &str) -> Value {
        json!({"msgId": "msg2", "msgtype": "text", "text": {"content": text}, "conversationType": "2", "conversationId": "cidG1",
               "conversationTitle": "Team", "senderStaffId": "staff7", "senderNick": "Ada", "isInAtList": true})
    }

    fn submitted(verdict: Verdict) -> UserMessage {
        match verdict {
            Verdict::Submit(message) => message,
            other => panic!("not submitted: {other:?}"),
        }
    }

    #[test]
    fn a_one_to_one_message_is_the_senders_chat() {
        let message = submitted(judge(&one_to_one("  hello  "), &config(json!({}))));
        assert_eq!(
            (message.id.as_str(), message.sender_id.as_str(), message.chat_id.as_str()),
            ("msg1", "staff7", "staff7")
        );
        assert_eq!(message.content, "hello");
        assert_eq!(message.metadata["is_group"], false);
        assert_eq!(message.metadata["username"], "Ada");
    }

    #[test]
    fn a_group_message_is_the_groups_chat_or_the_members_with_isolation() {
        let message = submitted(judge(&group("hi all"), &config(json!({}))));
        assert_eq!(message.chat_id, "group:cidG1");
        assert_eq!(message.metadata["is_group"], true);
        assert_eq!(message.metadata["conversation_title"], "Team");
        let isolated = submitted(judge(&group("hi all"), &config(json!({"groupUserIsolation": true}))));
        assert_eq!(isolated.chat_id, "group:cidG1:staff7");
    }

    #[test]
    fn without_a_staff_id_the_dingtalk_id_names_the_sender() {
        let mut data = one_to_one("x");
        data.as_object_mut().unwrap().remove("senderStaffId");
        assert_eq!(submitted(judge(&data, &config(json!({})))).sender_id, "$:LWCP_v1:$x");
    }

    #[test]
    fn a_private_message_is_refused_when_private_chats_are_disabled_but_groups_are_not() {
        let refused = judge(&one_to_one("x"), &config(json!({"disablePrivateChat": true})));
        assert_eq!(refused, Verdict::RefusePrivate { id: "msg1".into(), user: "staff7".into() });
        assert!(matches!(judge(&group("x"), &config(json!({"disablePrivateChat": true}))), Verdict::Submit(_)));
    }

    #[test]
    fn voice_pictures_files_and_rich_text_become_words_and_attachments() {
        let config = config(json!({}));
        let mut voice = one_to_one("");
        voice["msgtype"] = json!("audio");
        voice["content"] = json!({"recognition": "turn on the lights", "downloadCode": "dc-a"});
        assert_eq!(submitted(judge(&voice, &config)).content, "turn on the lights");

        let mut picture = one_to_one("");
        picture["msgtype"] = json!("picture");
        picture["content"] = json!({"downloadCode": "dc-p"});
        let message = submitted(judge(&picture, &config));
        assert_eq!(message.content, "");
        assert_eq!(
            message.attachments,
            [Attachment { kind: AttachmentKind::Image, download_code: "dc-p".into(), file_name: None }]
        );

        let mut file = one_to_one("");
        file["msgtype"] = json!("file");
        file["content"] = json!({"downloadCode": "dc-f", "fileName": "report.pdf"});
        assert_eq!(submitted(judge(&file, &config)).attachments[0].file_name.as_deref(), Some("report.pdf"));

        let mut rich = one_to_one("");
        rich["msgtype"] = json!("richText");
        rich["content"] = json!({"richText": [{"text": "look"}, {"text": "here", "type": "bold"}, {"type": "picture", "downloadCode": "dc-r"}]});
        let message = submitted(judge(&rich, &config));
        assert_eq!(message.content, "look **here**");
        assert_eq!(message.attachments[0].kind, AttachmentKind::Image);
    }

    #[test]
    fn messages_without_words_files_id_or_sender_are_ignored() {
        let config = config(json!({}));
        assert_eq!(judge(&one_to_one("   "), &config), Verdict::Ignore("no text and no files"));
        let mut no_id = one_to_one("x");
        no_id.as_object_mut().unwrap().remove("msgId");
        assert_eq!(judge(&no_id, &config), Verdict::Ignore("no msgId"));
        assert_eq!(
            judge(&json!({"msgId": "m", "msgtype": "text", "text": {"content": "x"}}), &config),
            Verdict::Ignore("no sender")
        );
    }
}
