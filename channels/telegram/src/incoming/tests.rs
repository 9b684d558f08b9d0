//! Unit tests of reading Telegram messages: fields, metadata, group policy, mentions, files.

use serde_json::json;

use super::*;

fn bot() -> Bot {
    Bot { id: 999, username: "OxiBot".into() }
}

fn message(value: Value) -> Message {
    serde_json::from_value(value).unwrap()
}

fn private(text: &str) -> Message {
    message(
        json!({"message_id": 5, "date": 0, "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada", "username": "ada"}, "text": text}),
    )
}

fn group(text: &str) -> Value {
    json!({"message_id": 6, "date": 0, "chat": {"id": -100, "type": "supergroup", "title": "g"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada"}, "text": text})
}

#[test]
fn a_private_message_keeps_its_text_and_tells_who_wrote_it_where() {
    let draft = read(&private("hello"), &bot(), GroupPolicy::Mention).unwrap();
    assert_eq!((draft.sender_id.as_str(), draft.chat_id.as_str(), draft.text.as_str()), ("42", "42", "hello"));
    assert_eq!(
        draft.metadata,
        json!({"message_id": 5, "is_group": false, "chat_type": "private", "user_id": 42, "first_name": "Ada", "username": "ada"})
    );
    assert_eq!(draft.target, ReplyTarget { message_id: Some(5), thread: None });
}

#[test]
fn a_group_message_must_mention_the_bot_or_reply_to_it_unless_the_group_is_open() {
    assert_eq!(read(&message(group("hi all")), &bot(), GroupPolicy::Mention), Err(Skip::NotAddressed));
    assert_eq!(read(&message(group("hi @OxiBotter")), &bot(), GroupPolicy::Mention), Err(Skip::NotAddressed));
    assert_eq!(read(&message(group("hi all")), &bot(), GroupPolicy::Open).unwrap().text, "hi all");
    let mut reply = group("and you?");
    reply["reply_to_message"] = json!({"message_id": 1, "date": 0, "chat": {"id": -100, "type": "supergroup"}, "from": {"id": 999, "is_bot": true, "first_name": "Oxi"}, "text": "earlier"});
    assert_eq!(read(&message(reply), &bot(), GroupPolicy::Mention).unwrap().text, "and you?");
}

#[test]
fn a_mention_is_found_in_any_case_and_stripped_from_the_text() {
    let draft = read(&message(group("@oxibot what is up?")), &bot(), GroupPolicy::Mention).unwrap();
    assert_eq!(draft.text, "what is up?");
    assert_eq!(draft.metadata["is_group"], json!(true));
    assert_eq!(draft.chat_id, "-100");
}

#[test]
fn stripping_a_mention_leaves_the_sentence_readable() {
    assert_eq!(strip_mentions("hey @OxiBot how are you", "OxiBot"), "hey how are you");
    assert_eq!(strip_mentions("@OxiBot, summarise this", "OxiBot"), "summarise this");
    assert_eq!(strip_mentions("/help@oxibot", "OxiBot"), "/help");
    assert_eq!(strip_mentions("ask @OxiBot_fan or @oxibot", "OxiBot"), "ask @OxiBot_fan or");
}

#[test]
fn a_photo_with_a_caption_brings_its_largest_size() {
    let photo = message(
        json!({"message_id": 7, "date": 0, "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
        "caption": "look", "photo": [{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90}, {"file_id": "big", "file_unique_id": "b", "width": 800, "height": 600}]}),
    );
    let draft = read(&photo, &bot(), GroupPolicy::Mention).unwrap();
    assert_eq!(draft.text, "look");
    assert_eq!(
        draft.attachments,
        [Attachment {
            kind: AttachmentKind::Image,
            file_id: "big".into(),
            unique_id: Some("b".into()),
            file_name: None
        }]
    );
}

#[test]
fn a_voice_note_without_text_is_still_read_and_an_image_document_counts_as_an_image() {
    let voice = message(
        json!({"message_id": 8, "date": 0, "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
        "voice": {"file_id": "v", "file_unique_id": "vu", "duration": 3, "mime_type": "audio/ogg"}}),
    );
    let draft = read(&voice, &bot(), GroupPolicy::Mention).unwrap();
    assert_eq!((draft.text.as_str(), draft.attachments[0].kind), ("", AttachmentKind::Voice));
    let png = message(
        json!({"message_id": 9, "date": 0, "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
        "document": {"file_id": "d", "file_name": "shot.png", "mime_type": "image/png"}}),
    );
    assert_eq!(read(&png, &bot(), GroupPolicy::Mention).unwrap().attachments[0].kind, AttachmentKind::Image);
}

#[test]
fn stickers_and_channel_posts_are_skipped() {
    let sticker = message(
        json!({"message_id": 10, "date": 0, "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false, "first_name": "Ada"}, "sticker": {"file_id": "x"}}),
    );
    assert_eq!(read(&sticker, &bot(), GroupPolicy::Mention), Err(Skip::Unreadable));
    let post = message(json!({"message_id": 11, "date": 0, "chat": {"id": -5, "type": "channel"}, "text": "news"}));
    assert_eq!(read(&post, &bot(), GroupPolicy::Mention), Err(Skip::NoSender));
}

#[test]
fn a_forum_topic_message_keeps_its_thread() {
    let mut topic = group("@oxibot hi");
    topic["message_thread_id"] = json!(77);
    let draft = read(&message(topic), &bot(), GroupPolicy::Mention).unwrap();
    assert_eq!(draft.metadata["message_thread_id"], json!(77));
    assert_eq!(draft.target.thread, Some(77));
}
