//! What a reply looks like and where it goes: interactive cards holding one Markdown element
//! (shared, so updating them updates them for everyone), cut to fit, sent to the chat or user a
//! chat id names, quoting the user's message when the config or a topic asks for it; an
//! approval request's card adds a button per answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use oxibot_plugin::chat::{Choice, Markup, Measure, SplitRules};
use serde_json::{Value, json};

use crate::api::Receiver;

/// How much Markdown one card holds: 15,000 bytes, well inside the 30 KB a card request may
/// have with its JSON around it.
pub const FEISHU: SplitRules = SplitRules { limit: 15_000, measure: Measure::Bytes, markup: Markup::Markdown };
/// How many chats' latest messages are remembered.
const REMEMBERED_CHATS: usize = 1000;

/// A card showing `markdown`.
pub fn card(markdown: &str) -> Value {
    json!({
        "config": {"wide_screen_mode": true, "update_multi": true},
        "elements": [{"tag": "markdown", "content": markdown}],
    })
}

/// The key of a button's value holding the approval answer a press submits.
pub const ANSWER_KEY: &str = "oxibot_answer";
/// The key of a button's value holding the chat the request was asked in (a press comes back
/// naming only Feishu's chat, not the kernel's chat id of a one-to-one chat or a topic).
pub const ANSWER_CHAT_KEY: &str = "oxibot_chat";

/// A card asking a person to approve a tool call: the request's `markdown`, then one button
/// per choice (the refusing one red). Each button's value holds its answer and `chat_id`;
/// Feishu sends both back in the `card.action.trigger` callback of a press.
pub fn approval_card(markdown: &str, chat_id: &str, choices: &[Choice]) -> Value {
    let buttons: Vec<Value> = choices
        .iter()
        .map(|choice| {
            json!({
                "tag": "button",
                "text": {"tag": "plain_text", "content": choice.label},
                "type": if choice.refuses { "danger" } else { "primary" },
                "value": {ANSWER_KEY: choice.answer, ANSWER_CHAT_KEY: chat_id},
            })
        })
        .collect();
    json!({
        "config": {"wide_screen_mode": true, "update_multi": true},
        "elements": [{"tag": "markdown", "content": markdown}, {"tag": "action", "actions": buttons}],
    })
}

/// Where a reply to chat `chat_id` goes: a group chat (`oc_…`, perhaps with `:<topic root>`),
/// else the user with that open id.
pub fn receiver(chat_id: &str) -> Receiver {
    if chat_id.starts_with("oc_") {
        let chat = chat_id.split_once(':').map_or(chat_id, |(chat, _)| chat);
        Receiver::Chat(chat.to_owned())
    } else {
        Receiver::User(chat_id.to_owned())
    }
}

/// Which message a reply answers through the reply API, and whether it opens a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// The user's message.
    pub message_id: String,
    /// Whether the reply starts (or continues) a thread under it.
    pub in_thread: bool,
    /// Whether every part of a long reply answers it (inside a topic), not just the first.
    pub every_part: bool,
}

/// The quote a reply carries, from the metadata of the message it answers: with
/// `replyToMessage`, the message (opening a thread in groups); inside a topic, always the
/// message, so the reply stays in the topic.
pub fn quote(metadata: &Value, reply_to_message: bool) -> Option<Quote> {
    let message_id = metadata["message_id"].as_str().filter(|id| !id.is_empty())?.to_owned();
    let in_topic = metadata["thread_id"].as_str().is_some_and(|thread| !thread.is_empty());
    let is_group = metadata["chat_type"] == "group" || metadata["is_group"] == true;
    match (reply_to_message, in_topic) {
        (true, _) => Some(Quote { message_id, in_thread: is_group, every_part: in_topic }),
        (false, true) => Some(Quote { message_id, in_thread: false, every_part: true }),
        (false, false) => None,
    }
}

/// The metadata of the latest accepted message of each chat, shared by the submitter and the
/// deliverer: streamed replies start from deltas, which carry none.
#[derive(Debug, Clone, Default)]
pub struct LastMessages(Arc<Mutex<HashMap<String, Value>>>);

impl LastMessages {
    /// Remembers `metadata` as the latest of `chat_id`.
    pub fn remember(&self, chat_id: &str, metadata: Value) {
        let mut chats = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if chats.len() >= REMEMBERED_CHATS && !chats.contains_key(chat_id) {
            chats.clear();
        }
        chats.insert(chat_id.to_owned(), metadata);
    }

    /// The metadata of the latest message of `chat_id` (`null` when none is known).
    pub fn of(&self, chat_id: &str) -> Value {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(chat_id).cloned().unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_is_one_shared_markdown_element() {
        let card = card("**hi**");
        assert_eq!(card["config"]["update_multi"], true);
        assert_eq!(card["elements"], json!([{"tag": "markdown", "content": "**hi**"}]));
    }

    #[test]
    fn an_approval_card_has_a_button_per_answer_carrying_it_and_the_chat() {
        let choices = [
            Choice { label: "Approve".into(), answer: "/approve AB12CD34".into(), refuses: false },
            Choice { label: "Deny".into(), answer: "/deny AB12CD34".into(), refuses: true },
        ];
        let card = approval_card("Run `ls`?", "oc_1:om_root", &choices);
        let buttons = &card["elements"][1]["actions"];
        assert_eq!(card["elements"][1]["tag"], "action");
        assert_eq!(buttons[0]["value"], json!({"oxibot_answer": "/approve AB12CD34", "oxibot_chat": "oc_1:om_root"}));
        assert_eq!((&buttons[0]["type"], &buttons[1]["type"]), (&json!("primary"), &json!("danger")));
        assert_eq!(buttons[1]["text"], json!({"tag": "plain_text", "content": "Deny"}));
    }

    #[test]
    fn a_chat_id_names_a_group_with_or_without_a_topic_or_else_a_user() {
        assert_eq!(receiver("oc_1"), Receiver::Chat("oc_1".into()));
        assert_eq!(receiver("oc_1:om_root"), Receiver::Chat("oc_1".into()));
        assert_eq!(receiver("ou_ada"), Receiver::User("ou_ada".into()));
    }

    #[test]
    fn a_reply_quotes_the_message_when_configured_or_inside_a_topic() {
        let group = json!({"message_id": "om_1", "chat_type": "group", "thread_id": null});
        assert_eq!(quote(&group, false), None);
        assert_eq!(quote(&group, true), Some(Quote { message_id: "om_1".into(), in_thread: true, every_part: false }));
        let direct = json!({"message_id": "om_2", "chat_type": "p2p"});
        assert_eq!(
            quote(&direct, true),
            Some(Quote { message_id: "om_2".into(), in_thread: false, every_part: false })
        );
        let topic = json!({"message_id": "om_3", "chat_type": "group", "thread_id": "omt_1"});
        assert_eq!(quote(&topic, false), Some(Quote { message_id: "om_3".into(), in_thread: false, every_part: true }));
        assert_eq!(quote(&json!({}), true), None);
    }

    #[test]
    fn the_latest_message_of_each_chat_is_remembered() {
        let last = LastMessages::default();
        assert_eq!(last.of("oc_1"), Value::Null);
        last.remember("oc_1", json!({"message_id": "om_1"}));
        last.remember("oc_1", json!({"message_id": "om_2"}));
        assert_eq!(last.of("oc_1")["message_id"], "om_2");
    }
}
