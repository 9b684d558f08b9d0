//! Durable turns through the real `oxibot gateway` (issue 26): the gateway is SIGKILLed in the
//! middle of a turn and started again, and every message it accepted is answered once, in
//! order; a tool call that was sent and may have acted is reported to the model, not run a
//! second time; a read-only one runs again; a reply already written is sent without another
//! turn.

use std::time::Duration;

use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use serde_json::{Value, json};

use super::automation::Loopback;
use super::gateway::GatewayEnv;

/// A gateway environment with the loopback channel open to everyone; returns its port too.
fn loopback_env() -> (GatewayEnv, u16) {
    let port = oxibot_tests::channels::free_port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "port": port, "allowFrom": "*"}}));
    env.allow_every_call();
    (env, port)
}

/// The tool messages of the model's last request.
fn tool_results_of_last_request(env: &GatewayEnv) -> Vec<Value> {
    let requests = env.llm.requests();
    let last = requests.last().expect("the model was asked");
    last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").cloned().collect()
}

// Issue 26: a message that arrived while an earlier turn of its session ran waited, unstored,
// in the session's mailbox; and a turn killed after its first step was never taken up again.
#[test]
fn a_message_accepted_while_a_turn_ran_is_answered_after_a_kill_and_restart() {
    let (env, port) = loopback_env();
    let mut gateway = env.start_with("loopback");
    env.llm.push(Reply::SlowFirstToken { delay_ms: 60_000, text: "too late".into() });
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "first question");
    client.expect("ACCEPTED");
    assert!(wait_until(Duration::from_secs(15), || env.llm.requests().len() == 1), "the first turn never asked");
    client.say("alice", "c1", "second question");
    client.expect("ACCEPTED");
    gateway.kill();

    env.llm.push(Reply::Text("answer one".into()));
    env.llm.push(Reply::Text("answer two".into()));
    let _gateway = env.start_with("loopback");
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 answer one");
    assert_eq!(client.expect("OUT c1"), "OUT c1 answer two");
    let second = env.llm.requests().last().unwrap().to_string();
    assert!(second.contains("second question"), "the second message was asked about last");
}

// Issue 26: an interrupted turn answered again could run a side effect a second time.
#[test]
fn a_started_call_that_may_have_acted_is_reported_to_the_model_and_not_run_again() {
    let (env, port) = loopback_env();
    let mut gateway = env.start_with("loopback");
    let runs = env.workspace().join("runs.txt");
    let command = "echo x >> runs.txt; sleep 60";
    env.llm.push(Reply::ToolCalls(vec![("exec".into(), json!({"command": command}).to_string())]));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "append a line");
    client.expect("ACCEPTED");
    let ran_once = || std::fs::read_to_string(&runs).is_ok_and(|text| text.lines().count() == 1);
    assert!(wait_until(Duration::from_secs(20), ran_once), "the command never ran");
    gateway.kill();

    env.llm.push(Reply::Text("I will check first".into()));
    let _gateway = env.start_with("loopback");
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 I will check first");
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1, "the command ran once only");
    let results = tool_results_of_last_request(&env);
    let told = results.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(told.contains("interrupted by a restart") && told.contains("outcome is unknown"), "{told}");
    assert!(told.contains("echo x >> runs.txt"), "the model sees what the call asked for: {told}");
}

/// A session file as a gateway killed while turn `t1` waited for call `call_r` (of `tool`
/// with `arguments`) leaves it: the call's `started` record written, no result.
fn killed_mid_call(tool: &str, arguments: &Value) -> String {
    let lines = [
        json!({"_type": "metadata", "key": "loopback:c1", "created_at": "2026-11-27T10:00:00.000000",
            "updated_at": "2026-11-27T10:00:01.000000", "metadata": {"inbox_open": true}, "last_consolidated": 0}),
        json!({"_type": "inbox", "id": "t1", "state": "accepted", "text": "what do my notes say?",
            "inbound_id": "loopback-old-1", "channel_metadata": {}}),
        json!({"role": "user", "content": "what do my notes say?", "inbox_id": "t1", "inbound_id": "loopback-old-1"}),
        json!({"_type": "inbox", "id": "t1", "state": "in_turn"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_r", "type": "function",
            "function": {"name": tool, "arguments": arguments.to_string()}}]}),
        json!({"_type": "call", "key": "t1.1.0", "turn": "t1", "tool_call_id": "call_r", "state": "started"}),
    ];
    lines.iter().map(|line| format!("{line}\n")).collect()
}

// Issue 26: a read-only call a restart interrupted may simply run again.
#[test]
fn an_interrupted_read_file_is_run_again_after_a_restart() {
    let (env, port) = loopback_env();
    std::fs::create_dir_all(env.workspace()).unwrap();
    std::fs::write(env.workspace().join("notes.md"), "the answer is 42\n").unwrap();
    env.write_session_file("loopback:c1", &killed_mid_call("read_file", &json!({"path": "notes.md"})));
    env.llm.push(Reply::Text("your notes say 42".into()));
    let _gateway = env.start_with("loopback");
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 your notes say 42");
    let results = tool_results_of_last_request(&env);
    let read = results.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(read.contains("the answer is 42"), "read_file ran again: {read}");
}

// Issue 26: a reply written to the session just before a kill was never sent, and asking the
// model again would answer the message twice.
#[test]
fn a_reply_written_before_a_kill_is_sent_after_the_restart_without_asking_the_model_again() {
    let (env, port) = loopback_env();
    let mut text = killed_mid_call("read_file", &json!({"path": "notes.md"}));
    for line in [
        json!({"role": "tool", "tool_call_id": "call_r", "name": "read_file", "content": "the answer is 42", "call_key": "t1.1.0"}),
        json!({"role": "assistant", "content": "your notes say 42"}),
    ] {
        text.push_str(&format!("{line}\n"));
    }
    env.write_session_file("loopback:c1", &text);
    let _gateway = env.start_with("loopback");
    let mut client = Loopback::connect(port);
    assert_eq!(client.expect("OUT c1"), "OUT c1 your notes say 42");
    std::thread::sleep(Duration::from_millis(500));
    assert!(env.llm.requests().is_empty(), "the model was asked again: {:?}", env.llm.requests());
    let file = env.session_file("loopback:c1");
    assert!(!file.contains("inbox_open"), "nothing is left to answer: {file}");
}
