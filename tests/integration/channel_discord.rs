//! The Discord channel plugin through the real plugin host, against a fake Discord (Gateway
//! and REST on 127.0.0.1): which messages become inbound events and how, heartbeats and
//! resuming after a lost connection, and how replies are split, posted, retried and acked.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginEvent, PluginHost, channel_spec};
use oxibot_proto::{DeliveryAck, Inbound, InboundAccepted, Message, Outbound, PeerKind};
use oxibot_tests::channels::event_where;
use oxibot_tests::channels::outbound;
use oxibot_tests::fakes_discord::{
    BOT_ID, FakeDiscord, HEARTBEAT_MS, SESSION_ID, TOKEN, direct_message, guild_message,
};
use oxibot_tests::{TempDir, bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// The host running the Discord channel against `fake`, once the channel has identified.
async fn discord_host(fake: &FakeDiscord, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let spec = channel_spec(&bin("oxibot"), "discord", &fake.config(extra))
        .unwrap_or_else(|e| panic!("{e}; run `cargo build --workspace` before the tests"));
    let host = start_host(vec![spec]).await;
    let mut events = host.subscribe();
    let ready =
        event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "discord")).await;
    assert!(matches!(ready, PluginEvent::Ready { kind: PeerKind::Channel, .. }), "{ready:?}");
    fake.wait_until("the channel identified", |f| f.identifies().len() == 1).await;
    (host, events)
}

/// The next inbound event from the Discord channel.
async fn next_inbound(events: &mut UnboundedReceiver<PluginEvent>) -> Inbound {
    match event_where(events, |e| matches!(e, PluginEvent::Inbound { .. })).await {
        PluginEvent::Inbound { plugin, inbound } => {
            assert_eq!(plugin, "discord");
            inbound
        }
        _ => unreachable!(),
    }
}

/// The next delivery ack from the Discord channel.
async fn next_ack(events: &mut UnboundedReceiver<PluginEvent>) -> DeliveryAck {
    match event_where(events, |e| matches!(e, PluginEvent::Delivery { .. })).await {
        PluginEvent::Delivery { ack, .. } => ack,
        _ => unreachable!(),
    }
}

fn accept(host: &PluginHost, inbound: &Inbound) {
    host.send("discord", Message::InboundAccepted(InboundAccepted { id: inbound.id.clone() })).unwrap();
}

/// A line of code `width` characters long.
fn code_line(index: usize, width: usize) -> String {
    let line = format!("let value_{index:03} = compute({index});");
    format!("{line}{}", " ".repeat(width.saturating_sub(line.len())))
}

#[actix_rt::test]
async fn a_direct_message_arrives_as_an_inbound_with_its_ids_and_metadata_and_shows_typing_once_accepted() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    let identify = &fake.identifies()[0];
    assert_eq!((identify["token"].as_str(), identify["intents"].as_u64()), (Some(TOKEN), Some(37377)));
    assert!(identify["properties"]["os"].is_string(), "{identify}");
    fake.message_create(direct_message("111", "dm-7", "42", "alice", "hello there"));
    let inbound = next_inbound(&mut events).await;
    assert_eq!((inbound.id.as_str(), inbound.channel.as_str()), ("111", "discord"));
    assert_eq!(
        (inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("42", "dm-7", "hello there")
    );
    assert!(inbound.media.is_empty());
    assert_eq!(inbound.metadata, json!({"message_id": "111", "is_group": false, "username": "alice"}));
    assert!(fake.typing().is_empty(), "typing before the kernel accepted the message");
    accept(&host, &inbound);
    fake.wait_until("typing shows in the DM", |f| f.typing() == ["dm-7"]).await;
    let typing = fake.requests().into_iter().find(|r| r.path.ends_with("/typing")).unwrap();
    assert_eq!(typing.header("authorization"), Some(format!("Bot {TOKEN}").as_str()));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_guild_message_without_a_mention_is_ignored_and_one_with_a_mention_is_submitted_without_it() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    fake.message_create(guild_message("201", "g1", "c1", "42", "just chatting", false));
    fake.message_create(guild_message("202", "g1", "c1", "42", &format!("<@{BOT_ID}> what is the weather?"), true));
    let inbound = next_inbound(&mut events).await;
    assert_eq!(
        (inbound.id.as_str(), inbound.content.as_str(), inbound.chat_id.as_str()),
        ("202", "what is the weather?", "c1")
    );
    assert_eq!(
        inbound.metadata,
        json!({"message_id": "202", "guild_id": "g1", "is_group": true, "username": "user42"})
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn messages_from_the_bot_itself_and_other_bots_are_ignored() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    let mut own = direct_message("301", "dm-1", BOT_ID, "oxibot", "my own reply");
    own["author"]["bot"] = json!(true);
    let mut other_bot = direct_message("302", "dm-1", "77", "otherbot", "beep");
    other_bot["author"]["bot"] = json!(true);
    fake.message_create(own);
    fake.message_create(other_bot);
    fake.message_create(direct_message("303", "dm-1", "42", "alice", "a person"));
    assert_eq!(next_inbound(&mut events).await.id, "303");
    host.shutdown().await;
}

#[actix_rt::test]
async fn allow_channels_keeps_out_guild_channels_not_listed_but_never_direct_messages() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({"allowChannels": ["c-allowed"], "groupPolicy": "open"})).await;
    fake.message_create(guild_message("401", "g1", "c-other", "42", "elsewhere", true));
    fake.message_create(guild_message("402", "g1", "c-allowed", "42", "in the open channel", false));
    let inbound = next_inbound(&mut events).await;
    assert_eq!((inbound.id.as_str(), inbound.content.as_str()), ("402", "in the open channel"));
    accept(&host, &inbound);
    fake.message_create(direct_message("403", "dm-9", "42", "alice", "a DM"));
    assert_eq!(next_inbound(&mut events).await.id, "403");
    host.shutdown().await;
}

#[actix_rt::test]
async fn heartbeats_go_out_on_schedule_carrying_the_last_sequence_number() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    fake.wait_until("a first heartbeat", |f| !f.beats().is_empty()).await;
    let seq = fake.message_create(direct_message("501", "dm-1", "42", "alice", "tick"));
    next_inbound(&mut events).await;
    let count = fake.beats().len();
    fake.wait_until("four more heartbeats", |f| f.beats().len() >= count + 4).await;
    let beats = fake.beats();
    // The fake stamps a beat when it arrives, and a busy machine can delay any one arrival, so
    // one gap alone says little; over the whole run the beats keep to the schedule: never
    // faster than the interval, and not far slower.
    let gaps = u32::try_from(beats.len() - 1).unwrap();
    let span = beats.last().unwrap().at - beats[0].at;
    let interval = Duration::from_millis(HEARTBEAT_MS);
    assert!(span >= interval * gaps * 3 / 4, "{gaps} gaps in {span:?}: beats come faster than every {interval:?}");
    assert!(span <= interval * gaps * 3, "{gaps} gaps in {span:?}: beats come far slower than every {interval:?}");
    assert_eq!(beats.last().unwrap().seq, json!(seq), "the last beat carries the last sequence number");
    assert_eq!(fake.connections(), 1, "acknowledged beats keep the one connection");
    host.shutdown().await;
}

#[actix_rt::test]
async fn after_a_dropped_connection_the_channel_resumes_the_session_and_messages_still_arrive() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    let seq = fake.message_create(direct_message("601", "dm-1", "42", "alice", "before"));
    let first = next_inbound(&mut events).await;
    accept(&host, &first);
    fake.disconnect();
    fake.wait_until("the channel resumed", |f| f.resumes().len() == 1).await;
    assert_eq!(fake.resumes()[0], json!({"token": TOKEN, "session_id": SESSION_ID, "seq": seq}));
    assert_eq!((fake.connections(), fake.identifies().len()), (2, 1), "a resume, not a new session");
    fake.message_create(direct_message("602", "dm-1", "42", "alice", "after"));
    let second = next_inbound(&mut events).await;
    assert_eq!((second.id.as_str(), second.content.as_str()), ("602", "after"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_heartbeat_left_unacknowledged_makes_the_channel_reconnect_and_resume() {
    let fake = FakeDiscord::start();
    let (host, _events) = discord_host(&fake, json!({})).await;
    fake.wait_until("a first heartbeat", |f| !f.beats().is_empty()).await;
    fake.withhold_acks(true);
    fake.wait_until("the channel gave up on the silent connection and resumed", |f| f.resumes().len() == 1).await;
    assert_eq!(fake.resumes()[0]["session_id"], SESSION_ID);
    assert_eq!(fake.identifies().len(), 1);
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_of_4500_characters_becomes_three_posts_with_balanced_fences_the_first_answering_the_message() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    let code: Vec<String> = (0..70).map(|i| code_line(i, 50)).collect();
    let intro = "Here is the program you asked for, explained line by line. ".repeat(8);
    let mut content = format!("{intro}\n\n```rust\n{}\n```\n\nThat is all of it.", code.join("\n"));
    while content.chars().count() < 4500 {
        content.push_str(" More.");
    }
    host.send("discord", outbound(31, "dm-7", &content, json!({"message_id": "111", "is_group": false}))).unwrap();
    assert_eq!(next_ack(&mut events).await, DeliveryAck { id: 31, ok: true, error: None, permanent: false });
    let posts = fake.posts();
    assert_eq!(posts.len(), 3, "{:#?}", posts.iter().map(|p| &p.json["content"]).collect::<Vec<_>>());
    for post in &posts {
        assert!(post.path.ends_with("/channels/dm-7/messages"), "{}", post.path);
        assert_eq!(post.header("authorization"), Some(format!("Bot {TOKEN}").as_str()));
        let text = post.json["content"].as_str().unwrap();
        assert!(text.chars().count() <= 2000, "{} characters", text.chars().count());
        assert_eq!(
            text.lines().filter(|l| l.trim_start().starts_with("```")).count() % 2,
            0,
            "unbalanced fences:\n{text}"
        );
        assert_eq!(post.json["allowed_mentions"]["parse"], json!(["users"]), "{}", post.json);
    }
    assert_eq!(posts[0].json["message_reference"]["message_id"], "111");
    assert!(posts[1].json.get("message_reference").is_none() && posts[2].json.get("message_reference").is_none());
    assert!(posts[1].json["content"].as_str().unwrap().starts_with("```rust\n"));
    let all: String = posts.iter().map(|p| p.json["content"].as_str().unwrap()).collect();
    assert!(code.iter().all(|line| all.contains(line.as_str())), "a line of code was lost");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_rate_limited_post_is_retried_after_the_wait_discord_asked_for() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    fake.fail_posts(429, r#"{"message": "You are being rate limited.", "retry_after": 0.4, "global": false}"#, 1);
    host.send("discord", outbound(32, "dm-7", "hi again", json!({}))).unwrap();
    assert_eq!(next_ack(&mut events).await, DeliveryAck { id: 32, ok: true, error: None, permanent: false });
    let attempts: Vec<_> = fake.requests().into_iter().filter(|r| r.path.ends_with("/messages")).collect();
    assert_eq!(attempts.iter().map(|r| r.status).collect::<Vec<_>>(), [429, 200]);
    let waited = attempts[1].at - attempts[0].at;
    assert!(waited >= Duration::from_millis(400), "retried after {waited:?}");
    assert_eq!(fake.posts()[0].json["content"], "hi again");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_post_that_keeps_failing_is_acked_with_an_error() {
    let fake = FakeDiscord::start();
    let (host, mut events) = discord_host(&fake, json!({})).await;
    fake.fail_posts(500, r#"{"message": "Internal Server Error", "code": 0}"#, usize::MAX);
    host.send("discord", outbound(33, "dm-7", "doomed", json!({}))).unwrap();
    let ack = next_ack(&mut events).await;
    assert_eq!((ack.id, ack.ok), (33, false));
    assert!(ack.error.as_deref().unwrap_or_default().contains("500"), "{ack:?}");
    assert!(fake.posts().is_empty());
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_attachment_is_downloaded_into_the_media_dir_and_passed_as_media() {
    let fake = FakeDiscord::start();
    let media = TempDir::new("discord-media");
    let (host, mut events) = discord_host(&fake, json!({"mediaDir": media.path()})).await;
    let url = fake.serve_file("photo.png", b"not really a png");
    let mut message = direct_message("701", "dm-1", "42", "alice", "look at this");
    message["attachments"] = json!([{"id": "8801", "filename": "photo.png", "url": url, "size": 16}]);
    fake.message_create(message);
    let inbound = next_inbound(&mut events).await;
    let path = media.path().join("8801_photo.png");
    assert_eq!(inbound.media, [path.display().to_string()]);
    assert_eq!(std::fs::read(&path).unwrap(), b"not really a png");
    assert_eq!(inbound.content, format!("look at this\n[attachment: {}]", path.display()));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_reply_with_a_file_is_uploaded_as_multipart_with_its_text() {
    let fake = FakeDiscord::start();
    let files = TempDir::new("discord-upload");
    let file = files.write("report.txt", "the report body");
    let (host, mut events) = discord_host(&fake, json!({})).await;
    let outbound = Outbound {
        id: 34,
        chat_id: "dm-7".into(),
        content: "here you go".into(),
        media: vec![file.display().to_string()],
        stream_id: None,
        metadata: json!({}),
    };
    host.send("discord", Message::Outbound(outbound)).unwrap();
    assert_eq!(next_ack(&mut events).await, DeliveryAck { id: 34, ok: true, error: None, permanent: false });
    let post = &fake.posts()[0];
    assert!(post.header("content-type").unwrap().starts_with("multipart/form-data; boundary="));
    assert!(
        post.raw.contains("name=\"payload_json\"") && post.raw.contains("\"content\":\"here you go\""),
        "{}",
        post.raw
    );
    assert!(
        post.raw.contains("name=\"files[0]\"; filename=\"report.txt\"") && post.raw.contains("the report body"),
        "{}",
        post.raw
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_token_discord_rejects_stops_the_channel_for_good_with_the_reason() {
    let fake = FakeDiscord::start();
    fake.reject_identify();
    let spec = channel_spec(&bin("oxibot"), "discord", &fake.config(json!({}))).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = || host.statuses()[0].state == "failed";
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        while !failed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(settled.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("4004") && reason.contains("token"), "{reason}");
    assert!(fake.resumes().is_empty(), "a rejected token is not retried by resuming");
    host.shutdown().await;
}

// Issue 27: the parts of a reply already posted were remembered only inside the plugin, so a
// retry after a plugin restart posted the first part again.
#[actix_rt::test]
async fn a_reply_retried_after_the_plugin_died_between_its_parts_posts_each_part_once() {
    let fake = FakeDiscord::start();
    let media = TempDir::new("discord-parts");
    let (host, mut events) = discord_host(&fake, json!({"mediaDir": media.path()})).await;
    // The second post is rate limited for 25 s: the plugin waits, and is killed meanwhile.
    fake.fail_posts_after(1, 429, r#"{"message": "You are being rate limited.", "retry_after": 25}"#, 1);
    let part = |n: usize| format!("part {n} {}", "x".repeat(1_900));
    let content = format!("{}\n\n{}\n\n{}", part(1), part(2), part(3));
    host.send("discord", outbound(51, "dm-7", &content, json!({}))).unwrap();
    fake.wait_until("the second post was rate limited", |f| f.requests().iter().any(|r| r.status == 429)).await;
    oxibot_tests::procs::sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "discord")).await;
    host.send("discord", outbound(51, "dm-7", &content, json!({}))).unwrap();
    assert_eq!(next_ack(&mut events).await, DeliveryAck { id: 51, ok: true, error: None, permanent: false });
    let posted: Vec<String> =
        fake.posts().iter().map(|p| p.json["content"].as_str().unwrap_or_default()[..6].to_owned()).collect();
    assert_eq!(posted, ["part 1", "part 2", "part 3"], "each part posted once, in order");
    host.shutdown().await;
}
