//! Reading a message callback's body into what the kernel gets: who wrote, in which chat, and
//! the text (pictures and files as placeholders: their URLs need the callback's AES key, and
//! this channel downloads nothing).

use oxibot_plugin::chat;
use serde_json::{Value, json};

/// A user's message, ready for the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    /// WeCom's `msgid`: the same when a message arrives twice.
    pub id: String,
    /// The sender's user id.
    pub sender_id: String,
    /// The sender's id in a one-to-one chat, the group's `chatid` in a group.
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// The callback's request id, on which the reply goes.
    pub req_id: String,
    /// `is_group`, `message_id`, `msg_type`, `chat_type`, `req_id`.
    pub metadata: Value,
}

/// What to do with a message callback.
pub type Verdict = chat::Verdict<UserMessage, String>;

/// Judges the body of the message callback `req_id`.
pub fn judge(req_id: &str, body: &Value) -> Verdict {
    let Some(sender_id) = body["from"]["userid"].as_str().filter(|id| !id.is_empty()) else {
        return Verdict::Ignore("no sender".to_owned());
    };
    let is_group = body["chattype"].as_str() == Some("group");
    let chat_id = match body["chatid"].as_str().filter(|id| !id.is_empty()) {
        Some(chat) => chat.to_owned(),
        None if is_group => return Verdict::Ignore("a group message without a chatid".to_owned()),
        None => sender_id.to_owned(),
    };
    let msg_type = body["msgtype"].as_str().unwrap_or_default();
    let content = text_of(msg_type, body, is_group);
    if content.trim().is_empty() {
        return Verdict::Ignore(format!("no text in a {msg_type:?} message"));
    }
    let id = match body["msgid"].as_str().filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => format!("{chat_id}_{}", body["sendertime"].as_i64().unwrap_or_default()),
    };
    let metadata = json!({
        "is_group": is_group, "message_id": id, "msg_type": msg_type,
        "chat_type": if is_group { "group" } else { "single" }, "req_id": req_id,
    });
    Verdict::Submit(UserMessage {
        id,
        sender_id: sender_id.to_owned(),
        chat_id,
        content,
        req_id: req_id.to_owned(),
        metadata,
    })
}

/// The text of a message of type `msg_type`.
fn text_of(msg_type: &str, body: &Value, is_group: bool) -> String {
    match msg_type {
        "text" => {
            let text = body["text"]["content"].as_str().unwrap_or_default();
            if is_group { without_mention(text) } else { text.trim().to_owned() }
        }
        "mixed" => {
            let items = body["mixed"]["msg_item"].as_array().map(Vec::as_slice).unwrap_or_default();
            let parts: Vec<String> = items
                .iter()
                .map(|item| text_of(item["msgtype"].as_str().unwrap_or_default(), item, is_group))
                .collect();
            parts.into_iter().filter(|part| !part.is_empty()).collect::<Vec<_>>().join("\n")
        }
        other => placeholder(other, body),
    }
}

/// What stands for a message that is not text.
fn placeholder(msg_type: &str, body: &Value) -> String {
    match msg_type {
        "image" => "[image]".to_owned(),
        "voice" => match body["voice"]["content"].as_str().map(str::trim).filter(|text| !text.is_empty()) {
            // WeCom hands over its transcription of the voice message.
            Some(transcript) => format!("[voice] {transcript}"),
            None => "[voice]".to_owned(),
        },
        "file" => match body["file"]["name"].as_str().filter(|name| !name.is_empty()) {
            Some(name) => format!("[file: {name}]"),
            None => "[file]".to_owned(),
        },
        "" => String::new(),
        other => format!("[{other}]"),
    }
}

/// A group message's text without the leading `@bot` WeCom keeps in it (the bot only gets
/// group messages that mention it).
fn without_mention(text: &str) -> String {
    let text = text.trim_start();
    let Some(rest) = text.strip_prefix('@') else { return text.trim_end().to_owned() };
    match rest.split_once(char::is_whitespace) {
        Some((_, after)) => after.trim().to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(extra: Value) -> Value {
        let mut body = json!({"msgid": "m1", "aibotid": "bot1", "chattype": "single", "from": {"userid": "ada"}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    }

    #[test]
    fn a_one_to_one_text_is_the_senders_chat() {
        let Verdict::Submit(message) = judge("r1", &body(json!({"msgtype": "text", "text": {"content": " hi "}})))
        else {
            panic!("ignored")
        };
        assert_eq!((message.id.as_str(), message.sender_id.as_str(), message.chat_id.as_str()), ("m1", "ada", "ada"));
        assert_eq!((message.content.as_str(), message.req_id.as_str()), ("hi", "r1"));
        assert_eq!(message.metadata["is_group"], false);
        assert_eq!(message.metadata["req_id"], "r1");
    }

    #[test]
    fn a_group_text_is_the_groups_chat_without_the_bots_mention() {
        let group = body(json!({"chattype": "group", "chatid": "wrkGroup", "msgtype": "text",
                                "text": {"content": "@oxibot  what's up?"}}));
        let Verdict::Submit(message) = judge("r1", &group) else { panic!("ignored") };
        assert_eq!((message.chat_id.as_str(), message.content.as_str()), ("wrkGroup", "what's up?"));
        assert_eq!(message.metadata["is_group"], true);
    }

    #[test]
    fn other_kinds_become_placeholders_and_mixed_messages_are_joined() {
        let voice = body(json!({"msgtype": "voice", "voice": {"content": "call me"}}));
        assert!(matches!(judge("r", &voice), Verdict::Submit(m) if m.content == "[voice] call me"));
        let file = body(json!({"msgtype": "file", "file": {"name": "a.pdf", "url": "u", "aeskey": "k"}}));
        assert!(matches!(judge("r", &file), Verdict::Submit(m) if m.content == "[file: a.pdf]"));
        let mixed = body(json!({"msgtype": "mixed", "mixed": {"msg_item": [
            {"msgtype": "text", "text": {"content": "look"}}, {"msgtype": "image", "image": {"url": "u"}}]}}));
        assert!(matches!(judge("r", &mixed), Verdict::Submit(m) if m.content == "look\n[image]"));
    }

    #[test]
    fn a_message_without_sender_or_text_is_ignored() {
        assert!(matches!(judge("r", &json!({"msgid": "m", "msgtype": "text"})), Verdict::Ignore(_)));
        assert!(matches!(judge("r", &body(json!({"msgtype": "text", "text": {"content": " "}}))), Verdict::Ignore(_)));
    }
}
