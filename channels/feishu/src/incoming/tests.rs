//! Tests of which events are submitted and what their messages say.

use serde_json::{Value, json};

use super::*;

const BOT: &str = "ou_bot";

fn config(extra: Value) -> Config {
    let mut section = json!({"appId": "cli_1", "appSecret": "s"});
    if let (Some(section), Some(extra)) = (section.as_object_mut(), extra.as_object()) {
        section.extend(extra.clone());
    }
    Config::from_value(&section).unwrap()
}

fn event(chat_type: &str, msg_type: &str, content: Value, mentions: Value) -> Value {
    json!({
        "schema": "2.0",
        "header": {"event_id": "ev1", "event_type": "im.message.receive_v1", "create_time": "1700000000000", "app_id": "cli_1"},
        "event": {
            "sender": {"sender_id": {"open_id": "ou_ada", "union_id": "on_ada", "user_id": "ada"}, "sender_type": "user"},
            "message": {"message_id": "om_1", "chat_id": "oc_chat", "chat_type": chat_type, "message_type": msg_type,
                        "content": content.to_string(), "mentions": mentions, "create_time": "1700000000000"}
        }
    })
}

fn bot_mention() -> Value {
    json!([{"key": "@_user_1", "id": {"open_id": BOT, "union_id": "on_bot"}, "name": "oxibot"}])
}

fn submitted(verdict: Verdict) -> UserMessage {
    match verdict {
        Verdict::Submit(message) => message,
        other => panic!("not submitted: {other:?}"),
    }
}

#[test]
fn a_one_to_one_text_is_the_senders_chat() {
    let message =
        submitted(judge(&event("p2p", "text", json!({"text": " hello "}), json!([])), BOT, &config(json!({}))));
    assert_eq!(
        (message.id.as_str(), message.sender_id.as_str(), message.chat_id.as_str()),
        ("om_1", "ou_ada", "ou_ada")
    );
    assert_eq!(message.content, "hello");
    assert_eq!(message.metadata["is_group"], false);
    assert_eq!(message.metadata["chat_id"], "oc_chat");
}

#[test]
fn a_group_message_needs_a_mention_of_the_bot_unless_the_policy_is_open() {
    let plain = event("group", "text", json!({"text": "chatting"}), json!([]));
    assert!(matches!(judge(&plain, BOT, &config(json!({}))), Verdict::Ignore(_)));
    let other = event(
        "group",
        "text",
        json!({"text": "@_user_1 hi"}),
        json!([{"key": "@_user_1", "id": {"open_id": "ou_bo"}, "name": "Bo"}]),
    );
    assert!(matches!(judge(&other, BOT, &config(json!({}))), Verdict::Ignore(_)));
    assert!(matches!(judge(&plain, BOT, &config(json!({"groupPolicy": "open"}))), Verdict::Submit(_)));
    let everyone = event("group", "text", json!({"text": "@_all standup"}), json!([]));
    assert!(matches!(judge(&everyone, BOT, &config(json!({}))), Verdict::Submit(_)));
}

#[test]
fn the_bots_mention_is_stripped_and_other_mentions_are_named() {
    let mentions = json!([{"key": "@_user_1", "id": {"open_id": BOT}, "name": "oxibot"},
                          {"key": "@_user_2", "id": {"open_id": "ou_bo"}, "name": "Bo"}]);
    let data = event("group", "text", json!({"text": "@_user_1 ask @_user_2 about it"}), mentions);
    let message = submitted(judge(&data, BOT, &config(json!({}))));
    assert_eq!(message.content, "ask @Bo (ou_bo) about it");
}

#[test]
fn a_group_chat_is_per_topic_with_topic_isolation_and_whole_without() {
    let mut data = event("group", "text", json!({"text": "@_user_1 go"}), bot_mention());
    assert_eq!(submitted(judge(&data, BOT, &config(json!({})))).chat_id, "oc_chat:om_1");
    data["event"]["message"]["root_id"] = json!("om_root");
    data["event"]["message"]["thread_id"] = json!("omt_1");
    let message = submitted(judge(&data, BOT, &config(json!({}))));
    assert_eq!(message.chat_id, "oc_chat:om_root");
    assert_eq!(
        (message.metadata["root_id"].as_str(), message.metadata["thread_id"].as_str()),
        (Some("om_root"), Some("omt_1"))
    );
    assert_eq!(submitted(judge(&data, BOT, &config(json!({"topicIsolation": false})))).chat_id, "oc_chat");
}

#[test]
fn messages_from_bots_and_other_events_are_ignored() {
    let mut data = event("p2p", "text", json!({"text": "x"}), json!([]));
    data["event"]["sender"]["sender_type"] = json!("app");
    assert_eq!(judge(&data, BOT, &config(json!({}))), Verdict::Ignore("sent by a bot"));
    let read = json!({"schema": "2.0", "header": {"event_type": "im.message.message_read_v1"}, "event": {}});
    assert_eq!(judge(&read, BOT, &config(json!({}))), Verdict::Ignore("not a message"));
    assert!(matches!(
        judge(&event("p2p", "text", json!({"text": "  "}), json!([])), BOT, &config(json!({}))),
        Verdict::Ignore(_)
    ));
}

#[test]
fn rich_text_becomes_markdown_with_its_pictures_as_attachments() {
    let post = json!({"zh_cn": {"title": "Plan", "content": [
        [{"tag": "at", "user_id": BOT, "user_name": "oxibot"}, {"tag": "text", "text": " see "}, {"tag": "a", "text": "docs", "href": "https://x.io"}],
        [{"tag": "img", "image_key": "img_v2_1"}],
        [{"tag": "code_block", "language": "RUST", "text": "fn main() {}\n"}]
    ]}});
    let message = submitted(judge(&event("p2p", "post", post, json!([])), BOT, &config(json!({}))));
    assert_eq!(message.content, "Plan\nsee [docs](https://x.io)\n```rust\nfn main() {}\n```");
    assert_eq!(message.attachments.len(), 1);
    assert_eq!((message.attachments[0].kind, message.attachments[0].key.as_str()), (ResourceKind::Image, "img_v2_1"));
}

#[test]
fn pictures_files_voice_and_videos_are_attachments_and_other_kinds_placeholders() {
    let config = config(json!({}));
    let image = submitted(judge(&event("p2p", "image", json!({"image_key": "img_1"}), json!([])), BOT, &config));
    assert_eq!((image.content.as_str(), image.attachments[0].label.as_str()), ("", "[image]"));
    let file = submitted(judge(
        &event("p2p", "file", json!({"file_key": "file_1", "file_name": "Q3.PDF"}), json!([])),
        BOT,
        &config,
    ));
    assert_eq!((file.attachments[0].label.as_str(), file.attachments[0].extension.as_str()), ("[file: Q3.PDF]", "pdf"));
    assert_eq!(file.attachments[0].kind, ResourceKind::File);
    let voice = submitted(judge(
        &event("p2p", "audio", json!({"file_key": "file_2", "duration": 2000}), json!([])),
        BOT,
        &config,
    ));
    assert_eq!(voice.attachments[0].label, "[audio]");
    let sticker = submitted(judge(&event("p2p", "sticker", json!({"file_key": "s"}), json!([])), BOT, &config));
    assert_eq!(sticker.content, "[sticker]");
}
