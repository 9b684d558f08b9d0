//! Reading a message event (`C2C_MESSAGE_CREATE`, `GROUP_AT_MESSAGE_CREATE`) into what the
//! kernel gets: who wrote, in which chat, the text, and the attachments to fetch.

use oxibot_plugin::{info, warn};
use serde_json::{Value, json};

/// The event of a message in a one-to-one chat with the bot.
pub const C2C_MESSAGE: &str = "C2C_MESSAGE_CREATE";
/// The event of a group message that mentions the bot (the only group messages a bot gets).
pub const GROUP_AT_MESSAGE: &str = "GROUP_AT_MESSAGE_CREATE";

/// A file attached to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Where QQ's CDN serves it.
    pub url: String,
    /// Its name, as the sender's client gave it.
    pub filename: String,
    /// Whether it is a picture.
    pub is_image: bool,
}

impl Attachment {
    /// What stands for it in the text.
    pub fn placeholder(&self) -> String {
        let kind = if self.is_image { "image" } else { "file" };
        if self.filename.is_empty() { format!("[{kind}]") } else { format!("[{kind}: {}]", self.filename) }
    }
}

/// A user's message, ready for the kernel once its attachments are fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// QQ's message id: the same when an event is sent again, and the `msg_id` of replies.
    pub id: String,
    /// The sender's openid (`user_openid`, or `member_openid` in a group).
    pub sender_id: String,
    /// The sender's openid in a one-to-one chat, the group's openid in a group.
    pub chat_id: String,
    /// Whether it came from a group.
    pub is_group: bool,
    /// The text.
    pub content: String,
    /// Files to fetch.
    pub attachments: Vec<Attachment>,
    /// `is_group`, `message_id`, `chat_type`.
    pub metadata: Value,
}

/// Reads message event `event` with data `data`; `None` when it is not a message the kernel
/// can use (the reason is logged).
pub fn read(event: &str, data: &Value) -> Option<UserMessage> {
    let is_group = event == GROUP_AT_MESSAGE;
    let text = |value: &Value| value.as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    let author = &data["author"];
    let (sender, chat) = if is_group {
        (text(&author["member_openid"]).or_else(|| text(&author["id"])), text(&data["group_openid"]))
    } else {
        let user = text(&author["user_openid"]).or_else(|| text(&author["id"]));
        (user.clone(), user)
    };
    let (Some(id), Some(sender_id), Some(chat_id)) = (text(&data["id"]), sender, chat) else {
        warn!("a {event} without a message id, sender or chat is ignored");
        return None;
    };
    let attachments: Vec<Attachment> =
        data["attachments"].as_array().into_iter().flatten().filter_map(attachment).collect();
    let content = data["content"].as_str().unwrap_or_default().trim().to_owned();
    if content.is_empty() && attachments.is_empty() {
        info!("message {id} has neither text nor attachments; ignored");
        return None;
    }
    let metadata = json!({"is_group": is_group, "message_id": id, "chat_type": if is_group { "group" } else { "c2c" }});
    Some(UserMessage { id, sender_id, chat_id, is_group, content, attachments, metadata })
}

/// One entry of `attachments`; a protocol-relative URL (`//…`) gets `https:`.
fn attachment(entry: &Value) -> Option<Attachment> {
    let url = entry["url"].as_str().filter(|url| !url.is_empty())?;
    let url = if url.starts_with("//") { format!("https:{url}") } else { url.to_owned() };
    let filename = entry["filename"].as_str().unwrap_or_default().to_owned();
    let is_image = entry["content_type"].as_str().is_some_and(|kind| kind.starts_with("image/"));
    Some(Attachment { url, filename, is_image })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_c2c_message_is_the_senders_chat() {
        let data = json!({"id": "m1", "content": " hi ", "author": {"id": "U1", "user_openid": "U1"}});
        let message = read(C2C_MESSAGE, &data).unwrap();
        assert_eq!(
            (message.sender_id.as_str(), message.chat_id.as_str(), message.content.as_str()),
            ("U1", "U1", "hi")
        );
        assert_eq!(message.metadata, json!({"is_group": false, "message_id": "m1", "chat_type": "c2c"}));
    }

    #[test]
    fn a_group_message_is_the_groups_chat_from_its_member() {
        let data = json!({"id": "m2", "content": " what now", "group_openid": "G1", "author": {"member_openid": "M1"}});
        let message = read(GROUP_AT_MESSAGE, &data).unwrap();
        assert_eq!((message.sender_id.as_str(), message.chat_id.as_str(), message.is_group), ("M1", "G1", true));
        assert_eq!(message.content, "what now");
    }

    #[test]
    fn attachments_are_read_and_an_empty_message_is_ignored() {
        let data = json!({"id": "m3", "content": "", "author": {"user_openid": "U1"},
                          "attachments": [{"url": "//cdn.example/a.jpg", "filename": "a.jpg", "content_type": "image/jpeg"}]});
        let message = read(C2C_MESSAGE, &data).unwrap();
        assert_eq!(message.attachments[0].url, "https://cdn.example/a.jpg");
        assert_eq!(message.attachments[0].placeholder(), "[image: a.jpg]");
        assert!(read(C2C_MESSAGE, &json!({"id": "m4", "content": " ", "author": {"user_openid": "U1"}})).is_none());
        assert!(
            read(GROUP_AT_MESSAGE, &json!({"id": "m5", "content": "x", "author": {"member_openid": "M"}})).is_none()
        );
    }
}
