//! Replies through the real `oxibot gateway` when their channel fails, with the loopback
//! channel's delivery faults (`failFirst`, `announce`, `holdWithoutClient`) and the api
//! channel: one outbound id for every attempt of a reply (so a service that de-duplicates by
//! it posts once), a reply that outlives an outage and a restart of its channel's plugin, and
//! a `message` to the turn's own chat that cannot be delivered, and the outbox kept across a
//! kernel restart: resent under the same id, a final failure told to the model, a corrupt
//! outbox file moved aside, and one chat's replies kept in order (issues 26 and 27).

use std::time::{Duration, Instant};

use oxibot_tests::channels::free_port;
use oxibot_tests::http;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::{is_alive, sigkill, wait_until};
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

// Issue 26: a reply whose first attempt failed waited for its retry while the chat's next reply
// went out at once, so the chat read the answers in the wrong order.
#[test]
fn replies_to_one_chat_arrive_in_the_order_they_were_written_even_when_the_first_needs_a_retry() {
    let (env, port) = loopback_env(json!({"failFirst": 1}));
    let _gateway = env.start_with_env("loopback", &[(WAITS, "1500")]);
    env.llm.push(Reply::Text("answer one".into()));
    env.llm.push(Reply::Text("answer two".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "first question");
    client.expect("ACCEPTED");
    client.say("alice", "c1", "second question");
    client.expect("ACCEPTED");
    assert_eq!(client.expect("OUT c1"), "OUT c1 answer one");
    assert_eq!(client.expect("OUT c1"), "OUT c1 answer two");
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

/// The gateway's outbox file in the data dir.
const OUTBOX: &str = "outbox.jsonl";

/// SIGKILLs the gateway and waits until its loopback plugin is gone too (and its port free).
fn kill_gateway_and_its_channel(env: &GatewayEnv, gateway: &mut super::gateway::Gateway) {
    let channel_pid = env.plugin_status("loopback")["pid"].as_u64().unwrap() as u32;
    gateway.kill();
    assert!(wait_until(Duration::from_secs(10), || !is_alive(channel_pid)), "the channel outlived its kernel");
}

/// Changes the loopback channel's section of the config.
fn edit_loopback(env: &GatewayEnv, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    env.edit_config(|config| edit(config["channels"]["loopback"].as_object_mut().unwrap()));
}

// Issue 26 (durable outbox): a reply the channel took but had not acknowledged when the kernel
// died was lost with the kernel's memory; now it is resent under the same id, and a channel
// that de-duplicates by id shows it once.
#[test]
fn a_reply_unacknowledged_when_the_kernel_dies_is_resent_with_its_id_and_shown_once() {
    let (env, port) = loopback_env(json!({"announce": true, "stallAcks": true}));
    // In the channel's media directory: a channel plugin may write there under the sandbox.
    let seen_file = env.data_dir().join("media/loopback/seen-ids");
    edit_loopback(&env, |loopback| {
        loopback.insert("seenIdsFile".into(), json!(seen_file));
    });
    let mut gateway = env.start_with("loopback");
    env.llm.push(Reply::Text("the only copy".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "hello");
    let tried = client.expect("TRY ");
    let id = tried.split(' ').nth(1).unwrap().to_owned();
    assert_eq!(client.expect("OUT c1"), "OUT c1 the only copy");
    // Shown, never acknowledged: the kernel dies waiting for the acknowledgement.
    kill_gateway_and_its_channel(&env, &mut gateway);
    drop(client);

    edit_loopback(&env, |loopback| {
        loopback.remove("stallAcks");
    });
    env.llm.push(Reply::Text("the second answer".into()));
    let _gateway = env.start_with("loopback");
    let resent = || std::fs::read_to_string(&seen_file).unwrap_or_default().lines().filter(|l| *l == id).count() == 2;
    assert!(
        wait_until(Duration::from_secs(15), resent),
        "the reply was not resent under its id {id} after the restart: seen {:?}\n{}",
        std::fs::read_to_string(&seen_file),
        env.log()
    );
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "again");
    assert_eq!(client.expect("OUT c1"), "OUT c1 the second answer", "the first reply was not shown twice");
    let settled_line = format!("{{\"settled\":{id}}}");
    let settled = || std::fs::read_to_string(env.data_dir().join(OUTBOX)).unwrap_or_default().contains(&settled_line);
    assert!(wait_until(Duration::from_secs(10), settled), "the resent reply is still pending once acknowledged");
}

// Issue 26 (durable outbox): a reply still pending at a kernel restart was forgotten, so when
// it could never be delivered nobody — not the model — learnt of it.
#[test]
fn a_reply_that_fails_for_good_after_a_restart_is_told_to_the_model_on_the_next_turn() {
    let (env, port) = loopback_env(json!({"holdWithoutClient": true}));
    env.edit_config(|config| config["channels"]["deliveryRetryHours"] = json!(0.0005));
    let mut gateway = env.start_with("loopback");
    env.llm.push(Reply::Text("Your flight leaves at nine.".into()));
    {
        let mut client = Loopback::connect(port);
        client.say("alice", "c1", "when is my flight?");
        client.expect("ACCEPTED");
    } // the client leaves: the plugin holds the reply without acknowledging it
    let pending = || std::fs::read_to_string(env.data_dir().join(OUTBOX)).unwrap_or_default().contains("nine");
    assert!(wait_until(Duration::from_secs(15), pending), "the reply was never recorded as pending: {}", env.log());
    kill_gateway_and_its_channel(&env, &mut gateway);

    // The channel now refuses every delivery, and the retry window (1.8 s) has passed.
    std::thread::sleep(Duration::from_secs(2));
    edit_loopback(&env, |loopback| {
        loopback.remove("holdWithoutClient");
        loopback.insert("failFirst".into(), json!(1000));
    });
    env.llm.push(Reply::Text("Sorry about that.".into()));
    let _gateway = env.start_with_env("loopback", &[(WAITS, "50")]);
    let given_up = || env.session_file("loopback:c1").lines().next().unwrap_or_default().contains("nine");
    assert!(wait_until(Duration::from_secs(15), given_up), "the failure was never recorded: {}", env.log());
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "hello?");
    client.expect("ACCEPTED");
    let asked = || env.llm.requests().len() == 2;
    assert!(wait_until(Duration::from_secs(15), asked), "no second turn: {}", env.log());
    let told = env.llm.requests()[1]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(
        told.contains("Not delivered") && told.contains("Your flight leaves at nine."),
        "the next turn tells the model what never arrived: {told}"
    );
}

// Issue 26 (durable outbox): a corrupt outbox file is moved aside and reported, never written
// over; the gateway starts with an empty outbox.
#[test]
fn a_corrupt_outbox_file_is_moved_aside_and_reported_and_replies_still_flow() {
    let (env, port) = loopback_env(json!({}));
    let garbage = "this is not an outbox\n{\"pending\": 1}\n";
    std::fs::write(env.data_dir().join(OUTBOX), garbage).unwrap();
    let _gateway = env.start_with("loopback");
    env.llm.push(Reply::Text("still answering".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "hi");
    assert_eq!(client.expect("OUT c1"), "OUT c1 still answering");
    let copies: Vec<_> = std::fs::read_dir(env.data_dir())
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("outbox.jsonl.corrupt-"))
        .collect();
    assert_eq!(copies.len(), 1, "moved aside once: {}", env.log());
    assert_eq!(std::fs::read_to_string(copies[0].path()).unwrap(), garbage, "kept as it was");
    let log = env.log();
    assert!(log.contains("outbox.jsonl") && log.contains("moved to"), "reported: {log}");
}
