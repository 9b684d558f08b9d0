//! The Telegram channel through the real plugin host against a fake Bot API: messages arrive as
//! inbound events (the update offset moving only after the kernel accepted them), replies go
//! out as HTML, long replies in parts, streamed replies as one edited message, group messages
//! only when they mention the bot, photos downloaded, "typing…" while a reply is pending.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::{DeliveryAck, Delta, Feature, Inbound, InboundAccepted, Message};
use oxibot_tests::channels::event_where;
use oxibot_tests::channels::outbound;
use oxibot_tests::fakes_telegram::{BOT_USERNAME, FIRST_UPDATE_ID, FakeTelegram, group_text, private_text, user};
use oxibot_tests::{TempDir, bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// A running Telegram channel wired to a fake Bot API.
struct Harness {
    fake: FakeTelegram,
    host: PluginHost,
    events: UnboundedReceiver<PluginEvent>,
    media: TempDir,
}

impl Harness {
    /// Starts the channel with the fake's config plus `extra` keys, and waits until it polls.
    async fn start(extra: Value) -> Harness {
        let fake = FakeTelegram::start();
        let media = TempDir::new("telegram-media");
        let mut config = fake.config(&media.path().join("telegram"));
        for (key, value) in extra.as_object().cloned().unwrap_or_default() {
            config[key] = value;
        }
        let spec = channel_spec(&bin("oxibot"), "telegram", &config)
            .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"));
        let host = start_host(vec![spec]).await;
        let mut events = host.subscribe();
        let ready =
            event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "telegram")).await;
        let PluginEvent::Ready { features, .. } = ready else { unreachable!() };
        assert!(features.contains(&Feature::Streaming), "{features:?}");
        let harness = Harness { fake, host, events, media };
        harness.fake.wait_for("getUpdates", |_| true).await;
        harness
    }

    async fn next_inbound(&mut self) -> Inbound {
        match event_where(&mut self.events, |e| matches!(e, PluginEvent::Inbound { .. })).await {
            PluginEvent::Inbound { plugin, inbound } => {
                assert_eq!(plugin, "telegram");
                inbound
            }
            _ => unreachable!(),
        }
    }

    fn accept(&self, inbound: &Inbound) {
        self.host.send("telegram", Message::InboundAccepted(InboundAccepted { id: inbound.id.clone() })).unwrap();
    }

    fn send(&self, message: Message) {
        self.host.send("telegram", message).unwrap();
    }

    async fn delivery(&mut self) -> DeliveryAck {
        match event_where(&mut self.events, |e| matches!(e, PluginEvent::Delivery { .. })).await {
            PluginEvent::Delivery { ack, .. } => ack,
            _ => unreachable!(),
        }
    }

    /// The `offset`s of the `getUpdates` calls so far (`None`: no offset).
    fn offsets(&self) -> Vec<Option<i64>> {
        self.fake.calls_of("getUpdates").iter().map(|p| p["offset"].as_i64()).collect()
    }
}

fn delta(stream_id: u64, text: &str) -> Message {
    Message::Delta(Delta { stream_id, chat_id: "42".into(), text: text.into() })
}

fn ada() -> Value {
    user(42, "Ada", "ada")
}

fn ok(id: u64) -> DeliveryAck {
    DeliveryAck { id, ok: true, error: None, permanent: false }
}

#[actix_rt::test]
async fn a_private_text_message_arrives_as_an_inbound_with_its_sender_chat_and_metadata() {
    let mut t = Harness::start(json!({})).await;
    t.fake.push_message(private_text(5, &ada(), "hello there"));
    let inbound = t.next_inbound().await;
    assert_eq!(inbound.id, FIRST_UPDATE_ID.to_string());
    assert_eq!(
        (inbound.channel.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str()),
        ("telegram", "42", "42")
    );
    assert_eq!(inbound.content, "hello there");
    assert!(inbound.media.is_empty());
    assert_eq!(
        inbound.metadata,
        json!({"message_id": 5, "is_group": false, "chat_type": "private", "user_id": 42, "first_name": "Ada", "username": "ada"})
    );
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn the_update_offset_moves_past_a_message_only_after_the_kernel_accepted_it() {
    let mut t = Harness::start(json!({"acceptTimeout": 1})).await;
    t.fake.push_message(private_text(5, &ada(), "persist me"));
    let first = t.next_inbound().await;
    // Not accepted: the update stays unconfirmed, Telegram hands it out again, same id.
    let again = t.next_inbound().await;
    assert_eq!((again.id.as_str(), again.content.as_str()), (first.id.as_str(), "persist me"));
    let next = Some(FIRST_UPDATE_ID + 1);
    assert!(!t.offsets().contains(&next), "the offset moved before acceptance: {:?}", t.offsets());
    t.accept(&again);
    t.fake.wait_for("getUpdates", |p| p["offset"].as_i64() == next).await;
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_markdown_reply_reaches_send_message_as_html_replying_to_the_users_message_and_is_acked() {
    let mut t = Harness::start(json!({})).await;
    t.send(outbound(7, "42", "**Hi** <there> & `x < y`\n\n- one", json!({"message_id": 5, "is_group": false})));
    let sent = t.fake.wait_for("sendMessage", |_| true).await;
    assert_eq!(sent["chat_id"], json!(42));
    assert_eq!(sent["text"], "<b>Hi</b> &lt;there&gt; &amp; <code>x &lt; y</code>\n\n• one");
    assert_eq!(sent["parse_mode"], "HTML");
    assert_eq!(sent["reply_parameters"]["message_id"], json!(5));
    assert_eq!(t.delivery().await, ok(7));
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_of_nine_thousand_characters_is_sent_as_three_messages() {
    let mut t = Harness::start(json!({})).await;
    let lines: Vec<String> = (0..100).map(|i| format!("{i:03} {}", "x".repeat(86))).collect();
    let content = lines.join("\n");
    assert_eq!(content.len(), 9099);
    t.send(outbound(8, "42", &content, json!({"message_id": 5})));
    assert_eq!(t.delivery().await, ok(8));
    let parts = t.fake.calls_of("sendMessage");
    assert_eq!(parts.len(), 3, "{parts:#?}");
    assert_eq!(parts[0]["reply_parameters"]["message_id"], json!(5));
    assert!(parts[1].get("reply_parameters").is_none() && parts[2].get("reply_parameters").is_none());
    let texts: Vec<&str> = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert!(texts.iter().all(|t| t.chars().count() <= 4096));
    assert_eq!(texts.join("\n"), content, "parts end at line breaks and lose nothing");
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_reply_is_one_message_edited_at_most_once_a_second_until_it_shows_the_final_text() {
    let mut t = Harness::start(json!({})).await;
    t.send(delta(1, "Hel"));
    t.send(delta(1, "lo"));
    let first = t.fake.wait_for("sendMessage", |_| true).await;
    assert_eq!(first["text"], "Hel");
    let message_id = json!(501);
    t.fake.wait_for("editMessageText", |p| p["text"] == "Hello" && p["message_id"] == message_id).await;
    let calls = t.fake.calls();
    let at = |method: &str| calls.iter().find(|c| c.method == method).unwrap().at;
    assert!(at("editMessageText") - at("sendMessage") >= Duration::from_millis(900), "the edit was not throttled");
    t.send(delta(1, " **wor"));
    let mut last = outbound(9, "42", "Hello **world**", json!({"message_id": 5}));
    if let Message::Outbound(o) = &mut last {
        o.stream_id = Some(1);
    }
    t.send(last);
    assert_eq!(t.delivery().await, ok(9));
    assert_eq!(t.fake.calls_of("sendMessage").len(), 1);
    let edits = t.fake.calls_of("editMessageText");
    let final_edit = edits.last().unwrap();
    assert_eq!(
        (&final_edit["text"], &final_edit["message_id"], &final_edit["parse_mode"]),
        (&json!("Hello <b>world</b>"), &message_id, &json!("HTML"))
    );
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_reply_that_outgrows_one_message_continues_in_new_messages() {
    let mut t = Harness::start(json!({})).await;
    t.send(delta(2, "Long answer:"));
    t.fake.wait_for("sendMessage", |_| true).await;
    let lines: Vec<String> = (0..100).map(|i| format!("{i:03} {}", "y".repeat(86))).collect();
    let mut last = outbound(10, "42", &lines.join("\n"), json!({}));
    if let Message::Outbound(o) = &mut last {
        o.stream_id = Some(2);
    }
    t.send(last);
    assert_eq!(t.delivery().await, ok(10));
    let sent = t.fake.calls_of("sendMessage");
    let edits = t.fake.calls_of("editMessageText");
    assert_eq!((sent.len(), edits.len()), (3, 1), "one message edited, two more sent");
    assert_eq!(edits[0]["message_id"], json!(501));
    let shown = [&edits[0], &sent[1], &sent[2]].map(|p| p["text"].as_str().unwrap().to_owned());
    assert_eq!(shown.join("\n"), lines.join("\n"));
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_group_message_without_a_mention_is_ignored_and_one_with_a_mention_is_submitted_without_it() {
    let mut t = Harness::start(json!({})).await;
    t.fake.push_message(group_text(10, -1001, &ada(), "just chatting among ourselves"));
    t.fake.push_message(group_text(11, -1001, &ada(), &format!("@{BOT_USERNAME} what is 2+2?")));
    let inbound = t.next_inbound().await;
    assert_eq!(inbound.id, (FIRST_UPDATE_ID + 1).to_string(), "the message without a mention was submitted");
    assert_eq!((inbound.chat_id.as_str(), inbound.content.as_str()), ("-1001", "what is 2+2?"));
    assert_eq!((&inbound.metadata["is_group"], &inbound.metadata["message_id"]), (&json!(true), &json!(11)));
    t.accept(&inbound);
    t.fake.wait_for("getUpdates", |p| p["offset"].as_i64() == Some(FIRST_UPDATE_ID + 2)).await;
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_photo_is_downloaded_into_the_media_dir_and_its_path_passed_in_media() {
    let mut t = Harness::start(json!({})).await;
    t.fake.add_file("photo-big", "uniq-big", "photos/file_7.jpg", b"\xff\xd8 a jpeg");
    let sizes = json!([{"file_id": "photo-small", "file_unique_id": "uniq-small", "width": 90, "height": 60},
                       {"file_id": "photo-big", "file_unique_id": "uniq-big", "width": 1280, "height": 853}]);
    let mut message = private_text(6, &ada(), "");
    message.as_object_mut().unwrap().remove("text");
    message["photo"] = sizes;
    t.fake.push_message(message);
    let inbound = t.next_inbound().await;
    let expected = t.media.path().join("telegram").join("uniq-big.jpg");
    assert_eq!(inbound.content, "[image]");
    assert_eq!(inbound.media, [expected.display().to_string()]);
    assert_eq!(std::fs::read(&expected).unwrap(), b"\xff\xd8 a jpeg");
    assert_eq!(t.fake.calls_of("getFile"), [json!({"file_id": "photo-big"})]);
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn the_bot_shows_typing_once_a_message_is_accepted_and_every_few_seconds_until_the_reply() {
    let mut t = Harness::start(json!({})).await;
    t.fake.push_message(private_text(5, &ada(), "think hard"));
    let inbound = t.next_inbound().await;
    assert!(t.fake.calls_of("sendChatAction").is_empty(), "typing before the kernel accepted the message");
    t.accept(&inbound);
    let typing = t.fake.wait_for("sendChatAction", |_| true).await;
    assert_eq!(typing, json!({"chat_id": 42, "action": "typing"}));
    t.fake.wait_for("sendChatAction", |_| t.fake.calls_of("sendChatAction").len() >= 2).await;
    t.send(outbound(3, "42", "done", json!({"message_id": 5})));
    assert_eq!(t.delivery().await, ok(3));
    let shown = t.fake.calls_of("sendChatAction").len();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(t.fake.calls_of("sendChatAction").len(), shown, "typing went on after the reply");
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn html_that_telegram_cannot_parse_is_sent_again_as_plain_text() {
    let mut t = Harness::start(json!({})).await;
    t.fake.fail_next(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0",
    );
    t.send(outbound(4, "42", "**bold** & <more>", json!({})));
    assert_eq!(t.delivery().await, ok(4));
    let sent = t.fake.calls_of("sendMessage");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["parse_mode"], "HTML");
    assert_eq!(sent[1], json!({"chat_id": 42, "text": "bold & <more>"}));
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_delivery_telegram_refuses_is_acked_with_its_reason() {
    let mut t = Harness::start(json!({})).await;
    t.fake.fail_next("sendMessage", 400, "Bad Request: chat not found");
    t.send(outbound(5, "77", "hello?", json!({})));
    let ack = t.delivery().await;
    assert!(!ack.ok && ack.error.as_deref().unwrap_or_default().contains("chat not found"), "{ack:?}");
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_file_in_an_outbound_is_uploaded_with_send_document_after_the_text() {
    let mut t = Harness::start(json!({})).await;
    let report = t.media.write("out/report.txt", "quarterly numbers");
    let mut message = outbound(6, "42", "Here it is", json!({}));
    if let Message::Outbound(o) = &mut message {
        o.media = vec![report.display().to_string()];
    }
    t.send(message);
    assert_eq!(t.delivery().await, ok(6));
    let upload = t.fake.wait_for("sendDocument", |_| true).await;
    assert_eq!(upload, json!({"chat_id": "42", "document": {"filename": "report.txt", "size": 17}}));
    let methods: Vec<String> = t.fake.calls().into_iter().map(|c| c.method).filter(|m| m.starts_with("send")).collect();
    assert_eq!(methods, ["sendMessage", "sendDocument"]);
    t.host.shutdown().await;
}

#[actix_rt::test]
async fn a_token_telegram_refuses_makes_the_channel_fail_with_a_reason_that_says_so() {
    let fake = FakeTelegram::start();
    let media = TempDir::new("telegram-bad-token");
    let mut config = fake.config(media.path());
    config["token"] = json!("000:wrong");
    let spec = channel_spec(&bin("oxibot"), "telegram", &config).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        while host.statuses()[0].state != "failed" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(failed.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("rejected the bot token"), "{reason}");
    assert!(!reason.contains("wrong"), "the token leaked into the reason: {reason}");
    host.shutdown().await;
}
