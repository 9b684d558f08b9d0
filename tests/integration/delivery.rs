//! Replies through the real `oxibot gateway` when their channel fails, with the loopback
//! channel's delivery faults (`failFirst`, `announce`, `holdWithoutClient`) and the api
//! channel: one outbound id for every attempt of a reply (so a service that de-duplicates by
//! it posts once), a reply that outlives an outage and a restart of its channel's plugin, and
//! a `message` to the turn's own chat that cannot be delivered (issues 26 and 27).

use std::time::{Duration, Instant};

use oxibot_tests::channels::free_port;
use oxibot_tests::http;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::{sigkill, wait_until};
use oxibot_tests::wait::block_on;
use serde_json::{Value, json};

use super::automation::Loopback;
use super::gateway::GatewayEnv;

/// Environment variable with the waits between delivery attempts, in milliseconds.
const WAITS: &str = "OXIBOT_DELIVERY_RETRY_DELAYS_MS";

/// A gateway environment with the loopback channel on a fresh port, open to everyone, with
/// `faults` in its section; returns the port too.
fn loopback_env(faults: Value) -> (GatewayEnv, u16) {
    let port = free_port();
    let mut section = json!({"enabled": true, "port": port, "allowFrom": "*"});
    if let (Some(section), Some(faults)) = (section.as_object_mut(), faults.as_object()) {
        section.extend(faults.clone());
    }
    (GatewayEnv::with_channels(json!({"loopback": section})), port)
}

// Issue 27, finding 1: every attempt had a fresh outbound id, so the Matrix transaction id
// built from it changed and the homeserver posted a retried reply again.
#[test]
fn a_reply_keeps_one_outbound_id_through_every_attempt() {
    let (env, port) = loopback_env(json!({"failFirst": 3, "announce": true}));
    let _gateway = env.start_with_env("loopback", &[(WAITS, "50,50,50")]);
    env.llm.push(Reply::Text("third time lucky".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "hello");
    let mut ids = Vec::new();
    loop {
        let line = client.expect("");
        if let Some(attempt) = line.strip_prefix("TRY ") {
            ids.push(attempt.split(' ').next().unwrap_or_default().to_owned());
        } else if line.starts_with("OUT c1") {
            assert_eq!(line, "OUT c1 third time lucky");
            break;
        }
    }
    assert_eq!(ids.len(), 4, "three refused attempts and the one that went through: {ids:?}");
    assert!(ids.iter().all(|id| id == &ids[0]), "every attempt of the reply carries the same outbound id: {ids:?}");
}

// Issue 27, finding 2: the kernel retried after 1, 2 and 4 s, then gave the reply up.
#[test]
fn a_reply_reaches_a_chat_that_comes_back_after_longer_than_the_first_retries_last() {
    let (env, port) = loopback_env(json!({}));
    // Waits of 100 ms growing to 1 s: the old schedule of this length gave up after 2.5 s.
    let _gateway = env.start_with_env("loopback", &[(WAITS, "100,200,400,800,1000")]);
    env.llm.push(Reply::SlowFirstToken { delay_ms: 300, text: "worth the wait".into() });
    {
        let mut client = Loopback::connect(port);
        client.say("alice", "c1", "answer me when you can");
        client.expect("ACCEPTED");
    } // the client leaves: the chat is down until it comes back
    std::thread::sleep(Duration::from_secs(8));
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 worth the wait", "the reply outlived the outage");
    assert!(!env.session_file("loopback:c1").contains("undelivered"), "it was never given up");
}

// Issue 27, finding 1: a plugin killed before it acknowledged a reply got it again only after
// the 30 s acknowledgement timeout, although its successor was ready at once.
#[test]
fn a_reply_pending_when_its_channel_plugin_dies_goes_out_as_soon_as_the_plugin_is_back() {
    let (env, port) = loopback_env(json!({"holdWithoutClient": true}));
    let _gateway = env.start_with("loopback");
    env.llm.push(Reply::SlowFirstToken { delay_ms: 300, text: "you missed me".into() });
    {
        let mut client = Loopback::connect(port);
        client.say("alice", "c1", "are you there?");
        client.expect("ACCEPTED");
    } // the client leaves: the plugin holds the reply without acknowledging it
    let held = || env.session_file("loopback:c1").contains("you missed me");
    assert!(wait_until(Duration::from_secs(15), held), "the turn never ended");
    std::thread::sleep(Duration::from_millis(500));
    let pid = env.plugin_status("loopback")["pid"].as_u64().unwrap();
    let killed = Instant::now();
    sigkill(pid as u32);
    let back = || {
        let status = env.plugin_status("loopback");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), back), "the loopback plugin did not come back");
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 you missed me");
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(15), "the pending reply waited {took:?} after the kill, not for the restart");
}

// Issue 26: a turn whose `message` to its own chat failed waited for the session to record the
// failure, and the session waited for the turn: the session answered nothing ever again.
#[test]
fn a_message_to_its_own_api_chat_that_nobody_waits_for_leaves_the_session_answering() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({
        "api": {"enabled": true, "port": port, "allowFrom": "*"},
        "deliveryRetryHours": 0.0005
    }));
    // A cron job due before the gateway starts runs a turn in api session s1, where no request
    // waits for a reply.
    let due = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 - 60_000;
    let jobs = json!({"version": 1, "jobs": [{
        "id": "f00dcafe", "name": "report", "enabled": true,
        "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": "Send the daily report", "sessionKey": "api:s1"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true
    }]});
    std::fs::create_dir_all(env.workspace().join("cron")).unwrap();
    std::fs::write(env.workspace().join("cron/jobs.json"), jobs.to_string()).unwrap();
    let report = json!({"content": "Your report is ready."});
    env.llm.push(Reply::ToolCalls(vec![("message".into(), report.to_string())]));
    env.llm.push(Reply::Text("I sent the report.".into()));
    env.llm.push(Reply::Text("Still here.".into()));
    let _gateway = env.start_with_env("api", &[(WAITS, "50")]);

    let given_up = || {
        let header = env.session_file("api:s1").lines().next().unwrap_or_default().to_owned();
        header.contains("Your report is ready.") && header.contains("I sent the report.")
    };
    assert!(
        wait_until(Duration::from_secs(20), given_up),
        "the session never recorded the failed deliveries: {}",
        env.log()
    );
    let tool_result = env.llm.requests()[1]["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(tool_result.to_string().contains("did not take it"), "the turn was told at once: {tool_result}");

    let key = env.api_authorization();
    let body =
        json!({"model": "oxibot", "messages": [{"role": "user", "content": "still there?"}], "session_id": "s1"});
    let reply = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let headers = [("Authorization", key.as_str())];
        let asked = http::post_json(port, "/v1/chat/completions", &headers, &body);
        tokio::time::timeout(Duration::from_secs(20), async { asked.await.json().await }).await
    });
    let reply = reply.unwrap_or_else(|_| panic!("the session no longer answers: {}", env.log()));
    assert_eq!(reply["choices"][0]["message"]["content"], "Still here.");
    let asked =
        env.llm.requests().last().unwrap()["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(
        asked.contains("Not delivered") && asked.contains("Your report is ready."),
        "the next turn tells the model what never arrived: {asked}"
    );
}

#[test]
fn an_api_reply_nobody_waits_for_is_given_up_at_once_and_never_answers_a_later_request() {
    let port = free_port();
    // The default retry window (hours): only the channel's refusal can end the retries.
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let due = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 - 60_000;
    let jobs = json!({"version": 1, "jobs": [{
        "id": "0ddba11", "name": "report", "enabled": true,
        "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": "Send the daily report", "sessionKey": "api:s2"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true
    }]});
    std::fs::create_dir_all(env.workspace().join("cron")).unwrap();
    std::fs::write(env.workspace().join("cron/jobs.json"), jobs.to_string()).unwrap();
    env.llm.push(Reply::Text("The daily report, for nobody.".into()));
    env.llm.push(Reply::Text("Your own answer.".into()));
    let _gateway = env.start_with_env("api", &[(WAITS, "50")]);

    let given_up =
        || env.session_file("api:s2").lines().next().unwrap_or_default().contains("The daily report, for nobody.");
    assert!(
        wait_until(Duration::from_secs(20), given_up),
        "the reply nobody waits for is still being retried: {}",
        env.log()
    );
    let key = env.api_authorization();
    let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "hello?"}], "session_id": "s2"});
    let reply = block_on(async {
        let headers = [("Authorization", key.as_str())];
        let asked = http::post_json(port, "/v1/chat/completions", &headers, &body);
        tokio::time::timeout(Duration::from_secs(20), async { asked.await.json().await }).await
    });
    let reply = reply.unwrap_or_else(|_| panic!("no answer: {}", env.log()));
    assert_eq!(reply["choices"][0]["message"]["content"], "Your own answer.");
}
