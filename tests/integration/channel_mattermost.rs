//! The Mattermost channel plugin through the real plugin host against a fake Mattermost:
//! `posted` events become inbound events after the `authentication_challenge`, the group
//! policy and mentions decide in channels, a post delivered twice reaches the kernel once, a
//! dropped WebSocket is resumed with the posts sent meanwhile replayed, and replies reach
//! `POST /api/v4/posts` in the right thread, cut at the limit, or stream into one patched post.

use std::time::Duration;

use oxibot_kernel::plugin::{PluginHost, channel_spec};
use oxibot_proto::{DeliveryAck, Delta, Message};
use oxibot_tests::channels::{accept, event_where, next_delivery, next_inbound, outbound, started_channel};
use oxibot_tests::fakes_mattermost::{BOT_ID, FakeMattermost, TOKEN, post, thread_post};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{bin, start_host};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use oxibot_kernel::plugin::PluginEvent;

/// Starts the host with the Mattermost channel configured for `mattermost`, and waits until
/// the channel's WebSocket is authenticated.
async fn mattermost_host(mattermost: &FakeMattermost, extra: Value) -> (PluginHost, UnboundedReceiver<PluginEvent>) {
    let (host, events) = started_channel("mattermost", &mattermost.config(extra)).await;
    mattermost.wait_greeted(1).await;
    (host, events)
}

#[actix_rt::test]
async fn a_direct_message_arrives_as_an_inbound_after_the_authentication_challenge_and_gets_the_reaction() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({"reactEmoji": "eyes"})).await;
    assert_eq!(mattermost.connections()[0].token.as_deref(), Some(TOKEN));
    mattermost.post(post("p1", "dmchan", "ada", "hello there"), "D").await;
    let inbound = next_inbound(&mut events, "mattermost").await;
    assert_eq!(
        (inbound.id.as_str(), inbound.sender_id.as_str(), inbound.chat_id.as_str(), inbound.content.as_str()),
        ("p1", "ada", "dmchan", "hello there")
    );
    assert_eq!(inbound.metadata["is_group"], false);
    assert_eq!(inbound.metadata["mattermost"], json!({"post_id": "p1", "root_id": "", "channel_type": "dm"}));
    assert!(mattermost.requests("POST", "/reactions").is_empty(), "reacted before the kernel accepted");
    accept(&host, "mattermost", &inbound);
    let reactions = mattermost.wait_requests("POST", "/reactions", 1).await;
    assert_eq!(reactions[0].body, json!({"user_id": BOT_ID, "post_id": "p1", "emoji_name": "eyes"}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_channel_post_without_a_mention_is_left_out_and_one_with_it_is_submitted_in_its_thread() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    mattermost.post(post("p1", "town", "ada", "just chatting"), "O").await;
    mattermost.post(post("p2", "town", "ada", "@oxibot what is up?"), "O").await;
    let inbound = next_inbound(&mut events, "mattermost").await;
    assert_eq!(inbound.id, "p2", "the first inbound must be the mention");
    assert_eq!((inbound.chat_id.as_str(), inbound.content.as_str()), ("town:p2", "what is up?"));
    assert_eq!(inbound.metadata["is_group"], true);
    accept(&host, "mattermost", &inbound);
    mattermost.post(thread_post("p3", "town", "ada", "@oxibot and then?", "p2"), "O").await;
    let in_thread = next_inbound(&mut events, "mattermost").await;
    assert_eq!((in_thread.chat_id.as_str(), in_thread.metadata["root_id"].as_str()), ("town:p2", Some("p2")));
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_open_policy_submits_every_channel_post_but_never_the_bots_own() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({"groupPolicy": "open"})).await;
    mattermost.post(post("p0", "town", BOT_ID, "my own reply"), "O").await;
    mattermost.post(post("p1", "town", "ada", "just chatting"), "O").await;
    let inbound = next_inbound(&mut events, "mattermost").await;
    assert_eq!((inbound.id.as_str(), inbound.content.as_str()), ("p1", "just chatting"));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_post_delivered_twice_reaches_the_kernel_once() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    mattermost.post(post("p1", "dmchan", "ada", "only once"), "D").await;
    let inbound = next_inbound(&mut events, "mattermost").await;
    mattermost.post(post("p1", "dmchan", "ada", "only once"), "D").await;
    accept(&host, "mattermost", &inbound);
    mattermost.post(post("p1", "dmchan", "ada", "only once"), "D").await;
    mattermost.post(post("p2", "dmchan", "ada", "a new one"), "D").await;
    let next = next_inbound(&mut events, "mattermost").await;
    assert_eq!(next.id, "p2", "the post delivered again came through twice");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_dropped_websocket_is_resumed_and_the_posts_sent_meanwhile_are_replayed() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    mattermost.post(post("p1", "dmchan", "ada", "before"), "D").await;
    let before = next_inbound(&mut events, "mattermost").await;
    accept(&host, "mattermost", &before);
    mattermost.cut().await;
    mattermost.post(post("p2", "dmchan", "ada", "while you were away"), "D").await;
    mattermost.wait_greeted(2).await;
    let missed = next_inbound(&mut events, "mattermost").await;
    assert_eq!((missed.id.as_str(), missed.content.as_str()), ("p2", "while you were away"));
    let resumed = &mattermost.connections()[1];
    assert_eq!(resumed.query, "connection_id=conn1&sequence_number=2", "hello was 0, p1 was 1");
    accept(&host, "mattermost", &missed);
    mattermost.post(post("p3", "dmchan", "ada", "after"), "D").await;
    assert_eq!(next_inbound(&mut events, "mattermost").await.id, "p3");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_post_not_accepted_before_the_channel_died_is_replayed_to_the_restarted_channel() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    mattermost.post(post("p1", "dmchan", "ada", "saved"), "D").await;
    let saved = next_inbound(&mut events, "mattermost").await;
    accept(&host, "mattermost", &saved);
    mattermost.post(post("p2", "dmchan", "ada", "do not lose me"), "D").await;
    let first = next_inbound(&mut events, "mattermost").await;
    assert_eq!(first.id, "p2");
    sigkill(host.statuses()[0].pid.unwrap());
    event_where(&mut events, |e| matches!(e, PluginEvent::Ready { plugin, .. } if plugin == "mattermost")).await;
    let again = next_inbound(&mut events, "mattermost").await;
    assert_eq!((again.id.as_str(), again.content.as_str()), ("p2", "do not lose me"), "p1 was replayed, or p2 lost");
    assert_eq!(mattermost.connections()[1].query, "connection_id=conn1&sequence_number=2", "hello was 0, p1 was 1");
    accept(&host, "mattermost", &again);
    mattermost.post(post("p3", "dmchan", "ada", "after"), "D").await;
    assert_eq!(next_inbound(&mut events, "mattermost").await.id, "p3");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_outbound_is_posted_as_markdown_in_the_thread_its_chat_id_names_and_acked_ok() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    host.send("mattermost", outbound(11, "town:p2", "**Done** & `ok`", json!({}))).unwrap();
    assert_eq!(next_delivery(&mut events).await, DeliveryAck { id: 11, ok: true, error: None, permanent: false });
    host.send("mattermost", outbound(12, "dmchan", "hi", json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let posts = mattermost.requests("POST", "/api/v4/posts");
    assert_eq!(posts[0].authorization, format!("Bearer {TOKEN}"));
    assert_eq!(posts[0].body, json!({"channel_id": "town", "root_id": "p2", "message": "**Done** & `ok`"}));
    assert_eq!(posts[1].body, json!({"channel_id": "dmchan", "message": "hi"}));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_long_reply_is_posted_in_parts_that_each_fit_mattermosts_limit() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    let lines: Vec<String> = (0..900).map(|n| format!("line {n:03} {}", "x".repeat(40))).collect();
    let content = format!("intro\n```\n{}\n```\noutro", lines.join("\n"));
    host.send("mattermost", outbound(13, "dmchan", &content, json!({}))).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    let posts = mattermost.requests("POST", "/api/v4/posts");
    assert!(posts.len() >= 3, "{} parts", posts.len());
    let texts: Vec<&str> = posts.iter().map(|post| post.body["message"].as_str().unwrap()).collect();
    for text in &texts {
        assert!(text.chars().count() <= 16_383, "a part of {} characters", text.chars().count());
        assert_eq!(text.matches("```").count() % 2, 0, "a part with an open code block");
    }
    let all = texts.join("\n");
    assert!((0..900).all(|n| all.contains(&format!("line {n:03} "))));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_reply_is_one_post_patched_less_often_than_deltas_come_and_ends_with_the_final_text() {
    let mattermost = FakeMattermost::start();
    let (host, mut events) = mattermost_host(&mattermost, json!({})).await;
    let mut text = String::new();
    for n in 0..40 {
        let piece = format!("word{n} ");
        text.push_str(&piece);
        let delta = Delta { stream_id: 7, chat_id: "town:p2".into(), text: piece };
        host.send("mattermost", Message::Delta(delta)).unwrap();
    }
    let created = mattermost.wait_requests("POST", "/api/v4/posts", 1).await;
    assert_eq!(
        (created[0].body["channel_id"].as_str(), created[0].body["root_id"].as_str()),
        (Some("town"), Some("p2"))
    );
    let mut last = outbound(14, "town:p2", "the **final** text", json!({}));
    if let Message::Outbound(outbound) = &mut last {
        outbound.stream_id = Some(7);
    }
    host.send("mattermost", last).unwrap();
    assert!(next_delivery(&mut events).await.ok);
    assert_eq!(mattermost.requests("POST", "/api/v4/posts").len(), 1, "the streamed reply became several posts");
    assert_eq!(mattermost.post_text("botpost1").as_deref(), Some("the **final** text"));
    let patches = mattermost.requests("PUT", "/api/v4/posts/botpost1/patch");
    assert!(!patches.is_empty() && patches.len() < 40, "{} patches for 40 deltas", patches.len());
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_refused_token_fails_the_channel_with_a_reason_that_names_the_key() {
    let mattermost = FakeMattermost::start();
    let spec = channel_spec(&bin("oxibot"), "mattermost", &mattermost.config(json!({"token": "revoked"}))).unwrap();
    let host = start_host(vec![spec]).await;
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        while host.statuses()[0].state != "failed" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(failed.await.is_ok(), "{:?}", host.statuses()[0].state);
    let reason = host.statuses()[0].reason.clone().unwrap();
    assert!(reason.contains("channels.mattermost.token") && reason.contains("401"), "{reason}");
    assert!(mattermost.connections().is_empty());
    host.shutdown().await;
}
