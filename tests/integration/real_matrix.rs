//! The Matrix channel through the real `oxibot gateway` against a real Synapse (issue 27): a
//! reply whose answer was lost on its way back and that the kernel retried shows once in the
//! room, a reply outlives the homeserver being down for 30 s, and what was written in a room
//! before the bot was invited gets no reply. One Synapse serves the tests that leave it
//! running; the outage test stops its own.

use std::time::Duration;

use oxibot_tests::TempDir;
use oxibot_tests::fault_proxy::FaultProxy;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use oxibot_tests::synapse::{MatrixUser, Synapse};
use serde_json::{Value, json};

use super::gateway::GatewayEnv;

/// How long a test waits for the bot to act in a room.
const PATIENCE: Duration = Duration::from_secs(60);

/// A bot account and a human one, named after the test so tests sharing a Synapse never meet.
fn accounts(synapse: &Synapse, test: &str) -> (MatrixUser, MatrixUser) {
    (synapse.register(&format!("bot-{test}"), "bot-password"), synapse.register(&format!("ada-{test}"), "ada-password"))
}

/// The channel's config section: `bot` on the homeserver at `homeserver`, answering `allow`.
fn section(homeserver: &str, bot: &MatrixUser, media: &TempDir, allow: Value) -> Value {
    json!({"matrix": {
        "enabled": true, "homeserver": homeserver, "userId": bot.user_id, "accessToken": bot.token,
        "deviceId": bot.device_id, "mediaDir": media.path(), "allowFrom": allow
    }})
}

/// Waits until `bot` joined `room` (the channel follows invites from allowed users).
fn wait_joined(synapse: &Synapse, reader: &MatrixUser, room: &str, bot: &MatrixUser) {
    let joined = || synapse.has_joined(reader, room, &bot.user_id);
    assert!(wait_until(PATIENCE, joined), "the bot never joined {room}");
}

/// The bodies of the bot's messages in `room`, once there are at least `count`.
fn wait_bot_messages(
    synapse: &Synapse,
    reader: &MatrixUser,
    room: &str,
    bot: &MatrixUser,
    count: usize,
) -> Vec<String> {
    let bodies = || -> Vec<String> {
        synapse
            .messages_from(reader, room, &bot.user_id)
            .iter()
            .map(|event| event["content"]["body"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let arrived = wait_until(PATIENCE, || bodies().len() >= count);
    assert!(arrived, "the bot posted {:?}, waited for {count} messages", bodies());
    bodies()
}

// Issue 27, finding 1: the answer to the bot's PUT is lost after Synapse stored the event, the
// kernel retries the delivery, and Synapse must recognise the same transaction.
#[test]
fn a_reply_whose_answer_was_lost_and_that_the_kernel_retried_shows_once_in_the_room() {
    let synapse = Synapse::shared();
    let (bot, ada) = accounts(synapse, "lost-answer");
    let proxy = FaultProxy::start(synapse.port());
    let media = TempDir::new("matrix-lost-answer");
    let env = GatewayEnv::with_channels(section(&proxy.url(), &bot, &media, json!([ada.user_id])));
    let _gateway = env.start_with_env("matrix", &[("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "200")]);
    let room = synapse.create_room(&ada, &[&bot.user_id]);
    wait_joined(synapse, &ada, &room, &bot);
    proxy.swallow_answers("PUT", "/send/m.room.message/", 1);
    env.llm.push(Reply::Text("only once, please".into()));
    synapse.say(&ada, &room, "hello bot");
    let bodies = wait_bot_messages(synapse, &ada, &room, &bot, 1);
    assert_eq!(proxy.swallowed().len(), 1, "the fault was never injected");
    let retried = || env.log().contains("delivered after retrying");
    assert!(wait_until(PATIENCE, retried), "the kernel did not retry the delivery:\n{}", env.log());
    std::thread::sleep(Duration::from_millis(500));
    let bodies_after = synapse.messages_from(&ada, &room, &bot.user_id);
    assert_eq!(bodies, ["only once, please"]);
    assert_eq!(bodies_after.len(), 1, "the retried reply was posted again: {bodies_after:?}");
}

// Issue 27, finding 3: the first sync after a join carries the room's recent timeline, and the
// channel answered every message in it.
#[test]
fn messages_written_before_the_bot_was_invited_get_no_reply_and_the_next_one_does() {
    let synapse = Synapse::shared();
    let (bot, ada) = accounts(synapse, "history");
    let media = TempDir::new("matrix-history");
    let env = GatewayEnv::with_channels(section(&synapse.url(), &bot, &media, json!([ada.user_id])));
    let _gateway = env.start_with("matrix");
    let room = synapse.create_room(&ada, &[]);
    for n in 1..=3 {
        synapse.say(&ada, &room, &format!("old message {n}"));
    }
    synapse.invite(&ada, &room, &bot.user_id);
    wait_joined(synapse, &ada, &room, &bot);
    env.llm.push(Reply::Text("answering the new one".into()));
    synapse.say(&ada, &room, "a message after the invite");
    let bodies = wait_bot_messages(synapse, &ada, &room, &bot, 1);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(bodies, ["answering the new one"]);
    assert_eq!(synapse.messages_from(&ada, &room, &bot.user_id).len(), 1, "history was answered");
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 1, "the model was asked {} times", requests.len());
    let asked = requests[0].to_string();
    assert!(asked.contains("a message after the invite") && !asked.contains("old message"), "{asked}");
}

// Issue 27, finding 2: the kernel gave a reply up after ~7 s of failed attempts, so a
// homeserver restart lost it for good.
#[test]
fn a_reply_written_while_the_homeserver_is_down_for_30_seconds_reaches_the_room_when_it_is_back() {
    let mut synapse = Synapse::start();
    let (bot, ada) = accounts(&synapse, "outage");
    let media = TempDir::new("matrix-outage");
    let env = GatewayEnv::with_channels(section(&synapse.url(), &bot, &media, json!([ada.user_id])));
    let _gateway = env.start_with_env("matrix", &[("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "1000,2000")]);
    let room = synapse.create_room(&ada, &[&bot.user_id]);
    wait_joined(&synapse, &ada, &room, &bot);
    env.llm.push(Reply::SlowFirstToken { delay_ms: 5_000, text: "sorry for the wait".into() });
    synapse.say(&ada, &room, "answer me after the upgrade");
    assert!(wait_until(PATIENCE, || !env.llm.requests().is_empty()), "the message never reached the model");
    synapse.stop();
    std::thread::sleep(Duration::from_secs(30));
    synapse.restart();
    let bodies = wait_bot_messages(&synapse, &ada, &room, &bot, 1);
    assert_eq!(bodies, ["sorry for the wait"]);
}
