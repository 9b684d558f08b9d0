//! The assistant acting on its own, through the real `oxibot gateway`, its channel plugins
//! and the scripted LLM: the `message` tool sending to another channel's chat.

use oxibot_tests::wait::block_on;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

use futures_util::{SinkExt, StreamExt};
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use oxibot_tests::wait::DEADLINE;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::gateway::GatewayEnv;

/// A client of the loopback channel: `sender:chat:text` lines in, `OUT chat text` lines out.
pub(crate) struct Loopback {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Loopback {
    pub(crate) fn connect(port: u16) -> Loopback {
        let mut stream = None;
        assert!(
            wait_until(DEADLINE, || {
                stream = TcpStream::connect(("127.0.0.1", port)).ok();
                stream.is_some()
            }),
            "the loopback channel never listened"
        );
        let stream = stream.unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        Loopback { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    pub(crate) fn say(&mut self, sender: &str, chat: &str, text: &str) {
        writeln!(self.writer, "{sender}:{chat}:{text}").unwrap();
    }

    /// The next line starting with `prefix` (others are skipped).
    pub(crate) fn expect(&mut self, prefix: &str) -> String {
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).unwrap_or_else(|e| panic!("waiting for {prefix:?}: {e}"));
            assert!(n > 0, "the channel closed while waiting for {prefix:?}");
            if line.starts_with(prefix) {
                return line.trim_end().to_owned();
            }
        }
    }
}

/// The next `message` frame a WebSocket client receives.
async fn next_message<S>(socket: &mut S) -> Value
where
    S: StreamExt<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout(DEADLINE, socket.next()).await.expect("a frame in time").unwrap().unwrap();
        let WsMessage::Text(text) = frame else { continue };
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["type"] == "message" {
            return frame;
        }
    }
}

#[test]
fn the_message_tool_delivers_to_another_channels_chat_and_records_it_there() {
    let (loopback_port, ws_port) = (free_port(), free_port());
    let env = GatewayEnv::with_channels(json!({
        "loopback": {"enabled": true, "port": loopback_port, "allowFrom": "*"},
        "websocket": {"enabled": true, "port": ws_port, "allowFrom": "*"}
    }));
    env.allow_every_call();
    let _gateway = env.start_with("websocket");
    env.wait_running("loopback");
    block_on(async {
        let (mut room, _) = tokio_tungstenite::connect_async(env.ws_url(ws_port, "room7")).await.unwrap();
        // Say something first, so the websocket chat exists for the gateway.
        env.llm.push(Reply::Text("welcome".into()));
        room.send(WsMessage::text(json!({"type": "message", "text": "hello"}).to_string())).await.unwrap();
        assert_eq!(next_message(&mut room).await["text"], "welcome");

        let arguments = json!({"content": "The build is green.", "channel": "websocket", "chat_id": "room7"});
        env.llm.push(Reply::ToolCalls(vec![("message".into(), arguments.to_string())]));
        env.llm.push(Reply::Text("Told them.".into()));
        let mut terminal = Loopback::connect(loopback_port);
        terminal.say("alice", "desk", "tell room7 the build is green");
        assert_eq!(next_message(&mut room).await["text"], "The build is green.");
        assert_eq!(terminal.expect("OUT desk"), "OUT desk Told them.");
    });
    let tool_result = env.llm.requests()[2]["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(tool_result.as_str().unwrap().contains("Message sent to websocket:room7"), "{tool_result}");
    let recorded = || env.session_file("websocket:room7").contains("The build is green.");
    assert!(wait_until(DEADLINE, recorded), "the sent text is in the target session");
    assert!(env.session_file("websocket:room7").contains("welcome"));
}

#[test]
fn a_message_to_a_channel_that_does_not_run_is_an_error_the_model_reads() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "port": port, "allowFrom": "*"}}));
    env.allow_every_call();
    let _gateway = env.start_with("loopback");
    let arguments = json!({"content": "hi", "channel": "slack", "chat_id": "C1"});
    env.llm.push(Reply::ToolCalls(vec![("message".into(), arguments.to_string())]));
    env.llm.push(Reply::Text("Slack is not connected.".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "ping slack");
    assert_eq!(client.expect("OUT c1"), "OUT c1 Slack is not connected.");
    let result = env.llm.requests()[1]["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(result.as_str().unwrap().contains("no channel named 'slack'"), "{result}");
}

#[test]
fn a_message_the_turn_sends_to_its_own_chat_is_not_followed_by_a_second_reply() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let _gateway = env.start_with("loopback");
    env.llm.push(Reply::ToolCalls(vec![("message".into(), json!({"content": "Here it is."}).to_string())]));
    env.llm.push(Reply::Text("I sent it.".into()));
    env.llm.push(Reply::Text("next answer".into()));
    let mut client = Loopback::connect(port);
    client.say("alice", "c1", "send it to me");
    assert_eq!(client.expect("OUT c1"), "OUT c1 Here it is.");
    client.say("alice", "c1", "and now?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 next answer", "the turn's own reply was not sent after the message");
}

/// Marks requests made by a helper's turn (its system prompt), for `ScriptedLlm::route`.
const HELPER: &str = "The main assistant started you for one task";

/// A gateway with the loopback channel, open to everyone, and a client connected to it.
fn loopback_gateway() -> (GatewayEnv, super::gateway::Gateway, Loopback) {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let gateway = env.start_with("loopback");
    let client = Loopback::connect(port);
    (env, gateway, client)
}

/// The requests a helper's turn made.
fn helper_requests(env: &GatewayEnv) -> Vec<Value> {
    env.llm.requests().into_iter().filter(|r| oxibot_tests::llm::system_prompt(r).contains(HELPER)).collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_background_helpers_report_comes_back_into_the_session_and_gets_a_follow_up_reply() {
    let (env, _gateway, mut client) = loopback_gateway();
    let spawn = json!({"task": "Count the notes in the workspace", "label": "count notes"});
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn.to_string())]));
    env.llm.push(Reply::Text("I asked a helper to count them.".into()));
    env.llm.route(HELPER, Reply::Text("There are 3 notes.".into()));
    env.llm.push(Reply::Text("The helper counted 3 notes.".into()));
    client.say("alice", "c1", "how many notes do I have?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 I asked a helper to count them.");
    assert_eq!(client.expect("OUT c1"), "OUT c1 The helper counted 3 notes.");

    let helper = &helper_requests(&env)[0];
    let task = helper["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(task.contains("Count the notes in the workspace"), "{task}");
    let follow_up = env.llm.requests().last().unwrap().clone();
    let notice = follow_up["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(notice.contains("There are 3 notes.") && notice.contains("count notes"), "{notice}");
    let session = env.session_file("loopback:c1");
    assert!(session.contains(r#""source":"system""#), "the report is stored as a kernel-written message: {session}");
}

#[test]
fn a_helper_with_wait_returns_its_report_as_the_tool_result() {
    let (env, _gateway, mut client) = loopback_gateway();
    let spawn = json!({"task": "What is six times seven?", "wait": true});
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn.to_string())]));
    env.llm.route(HELPER, Reply::Text("42".into()));
    env.llm.push(Reply::Text("It is 42.".into()));
    client.say("alice", "c1", "six times seven?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 It is 42.");
    let requests = env.llm.requests();
    let last = requests.last().unwrap()["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("tool"), Some("42")));
}

#[test]
fn a_helper_is_offered_neither_spawn_nor_message_and_calling_them_fails() {
    let (env, _gateway, mut client) = loopback_gateway();
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), json!({"task": "Try to escape", "wait": true}).to_string())]));
    let escape = vec![
        ("spawn".into(), json!({"task": "again"}).to_string()),
        ("message".into(), json!({"content": "hi", "channel": "loopback", "chat_id": "c1"}).to_string()),
    ];
    env.llm.route(HELPER, Reply::ToolCalls(escape));
    env.llm.route(HELPER, Reply::Text("I could not.".into()));
    env.llm.push(Reply::Text("The helper could not.".into()));
    client.say("alice", "c1", "go");
    assert_eq!(client.expect("OUT c1"), "OUT c1 The helper could not.");

    let helper = helper_requests(&env);
    let offered = tool_names(&helper[0]);
    assert!(!offered.iter().any(|t| ["spawn", "message", "cron"].contains(&t.as_str())), "{offered:?}");
    assert!(tool_names(&env.llm.requests()[0]).contains(&"spawn".to_owned()), "the session itself has spawn");
    let results: Vec<Value> =
        helper[1]["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").cloned().collect();
    assert_eq!(results.len(), 2);
    for result in results {
        assert!(result["content"].as_str().unwrap().starts_with("Error: unknown tool"), "{result}");
    }
}

#[test]
fn stop_ends_the_sessions_helpers_and_no_report_follows() {
    let (env, _gateway, mut client) = loopback_gateway();
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), json!({"task": "Think for a long time"}).to_string())]));
    env.llm.push(Reply::Text("Started.".into()));
    env.llm.route(HELPER, Reply::SlowFirstToken { delay_ms: 20_000, text: "too late".into() });
    client.say("alice", "c1", "think");
    assert_eq!(client.expect("OUT c1"), "OUT c1 Started.");
    let helper_asked = || !helper_requests(&env).is_empty();
    assert!(wait_until(DEADLINE, helper_asked), "the helper's turn reached the model");
    client.say("alice", "c1", "/stop");
    assert_eq!(client.expect("OUT c1"), "OUT c1 Stopping, and one helper.");
    env.llm.push(Reply::Text("still here".into()));
    client.say("alice", "c1", "anything else?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 still here", "no report of the stopped helper came first");
}

#[test]
fn stop_also_ends_a_message_waiting_behind_the_turn_and_it_is_never_answered() {
    let (env, _gateway, mut client) = loopback_gateway();
    env.llm.push(Reply::SlowFirstToken { delay_ms: 20_000, text: "too late".into() });
    client.say("alice", "c1", "first");
    assert!(wait_until(DEADLINE, || env.llm.requests().len() == 1), "the first turn reached the model");
    client.say("alice", "c1", "second");
    let accepted = || env.session_file("loopback:c1").contains("second");
    assert!(wait_until(DEADLINE, accepted), "the second message was accepted while the first turn ran");
    client.say("alice", "c1", "/stop");
    let mut replies: Vec<String> = (0..3).map(|_| client.expect("OUT c1")).collect();
    replies.sort();
    assert_eq!(replies, ["OUT c1 (stopped)", "OUT c1 (stopped)", "OUT c1 Stopping, and one waiting message."]);

    env.llm.push(Reply::Text("fresh".into()));
    client.say("alice", "c1", "third");
    assert_eq!(client.expect("OUT c1"), "OUT c1 fresh");
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 2, "the stopped message never reached the model");
    let replayed = requests[1]["messages"].to_string();
    assert!(!replayed.contains("second"), "the stopped message is not in the history: {replayed}");
}

/// Marks the heartbeat's notify-or-not decision (its system prompt).
const NOTIFY_DECISION: &str = "You decide whether the result of a scheduled background check";

/// A loopback gateway whose heartbeat comes every second.
fn gateway_with_a_fast_heartbeat() -> (GatewayEnv, super::gateway::Gateway, Loopback) {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "port": port, "allowFrom": "*"}}));
    env.edit_config(|config| config["gateway"]["heartbeat"] = json!({"intervalS": 1}));
    let gateway = env.start_with("loopback");
    (env, gateway, Loopback::connect(port))
}

#[test]
fn a_heartbeat_file_without_tasks_costs_no_model_call_over_several_beats() {
    let (env, _gateway, _client) = gateway_with_a_fast_heartbeat();
    let heartbeat = std::fs::read_to_string(env.workspace().join("HEARTBEAT.md")).unwrap();
    assert!(heartbeat.contains("## Tasks"), "the workspace has the onboarding template");
    std::thread::sleep(std::time::Duration::from_millis(3_500));
    assert!(env.llm.requests().is_empty(), "three beats passed without a request to the model");
}

#[test]
fn a_heartbeat_task_runs_and_its_notification_reaches_the_last_active_chat() {
    let (env, _gateway, mut client) = gateway_with_a_fast_heartbeat();
    env.llm.push(Reply::Text("hi".into()));
    client.say("alice", "c1", "hello");
    assert_eq!(client.expect("OUT c1"), "OUT c1 hi");

    env.llm.push(Reply::Text("The disk is 95% full.".into()));
    let notify = json!({"notify": true, "message": "Your disk is 95% full."});
    env.llm.route(NOTIFY_DECISION, Reply::ToolCalls(vec![("notify".into(), notify.to_string())]));
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "# Heartbeat\n\n## Tasks\n\n- Check the disk usage\n")
        .unwrap();
    assert_eq!(client.expect("OUT c1"), "OUT c1 Your disk is 95% full.");
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "## Tasks\n").unwrap();

    let turn = &env.llm.requests()[1];
    let task = turn["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(task.contains("[Heartbeat]") && task.contains("- Check the disk usage"), "{task}");
    let session = env.session_file("heartbeat:direct");
    assert!(session.contains(r#""source":"heartbeat""#) && session.contains("95% full"), "{session}");
}

#[test]
fn a_one_shot_agent_waits_for_its_helper_and_offers_no_message_tool() {
    let env = super::agent::AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), json!({"task": "Add 2 and 2"}).to_string())]));
    env.llm.route(HELPER, Reply::Text("4".into()));
    env.llm.push(Reply::Text("The helper says 4.".into()));
    let out = env.agent("what is 2 + 2?");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("The helper says 4."));
    let requests = env.llm.requests();
    let offered = tool_names(&requests[0]);
    assert!(offered.contains(&"spawn".to_owned()) && !offered.contains(&"message".to_owned()), "{offered:?}");
    let result = requests.last().unwrap()["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(result["content"], "4", "the helper's report came back as the tool result, not later");
}

#[test]
fn in_the_interactive_agent_a_background_helpers_report_is_answered_and_printed() {
    use std::io::Read;
    use std::process::Stdio;
    let env = super::agent::AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), json!({"task": "Find the answer"}).to_string())]));
    env.llm.push(Reply::Text("A helper is on it.".into()));
    env.llm.route(HELPER, Reply::Text("The answer is 42.".into()));
    env.llm.push(Reply::Text("Your helper found it: 42.".into()));
    let mut child =
        env.command(&["agent"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"find the answer\n").unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let collected = out.clone();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buffer) {
            collected.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    let printed = || out.lock().unwrap().contains("[cli:direct] Your helper found it: 42.");
    assert!(wait_until(DEADLINE, printed), "the follow-up answer is printed: {}", out.lock().unwrap());
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    let out = out.lock().unwrap().clone();
    assert!(out.contains("A helper is on it.") && out.contains("[cli:direct] Your helper found it: 42."), "{out}");
}

/// A gateway whose websocket channel serves everyone, and its port.
fn websocket_gateway() -> (GatewayEnv, u16) {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port}}));
    env.allow_every_call();
    (env, port)
}

/// A WebSocket client of the gateway's websocket channel on `port`, in `chat`.
async fn join(
    env: &GatewayEnv,
    port: u16,
    chat: &str,
) -> impl StreamExt<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>>
+ SinkExt<WsMessage, Error = tokio_tungstenite::tungstenite::Error>
+ Unpin {
    let (socket, _) = tokio_tungstenite::connect_async(env.ws_url(port, chat)).await.unwrap();
    socket
}

fn jobs(env: &GatewayEnv) -> Vec<Value> {
    let text = std::fs::read_to_string(env.workspace().join("cron/jobs.json")).unwrap_or_default();
    serde_json::from_str::<Value>(&text).ok().and_then(|v| v["jobs"].as_array().cloned()).unwrap_or_default()
}

#[test]
fn a_job_added_in_chat_fires_into_its_session_repeats_and_stops_when_removed_from_the_cli() {
    let (env, port) = websocket_gateway();
    let _gateway = env.start_with("websocket");
    let add = json!({"action": "add", "message": "Tell me to stretch", "every_seconds": 1, "name": "stretch"});
    env.llm.push(Reply::ToolCalls(vec![("cron".into(), add.to_string())]));
    env.llm.push(Reply::Text("Scheduled.".into()));
    env.llm.push(Reply::Text("Time to stretch!".into()));
    env.llm.push(Reply::Text("Stretch again!".into()));
    block_on(async {
        let mut room = join(&env, port, "room1").await;
        room.send(WsMessage::text(json!({"type": "message", "text": "remind me to stretch every second"}).to_string()))
            .await
            .unwrap();
        assert_eq!(next_message(&mut room).await["text"], "Scheduled.");
        assert_eq!(next_message(&mut room).await["text"], "Time to stretch!");
        assert_eq!(next_message(&mut room).await["text"], "Stretch again!");
    });
    let listed = env.command(&["cron", "list"]).output().unwrap();
    let listing = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listing.contains("stretch"), "oxibot cron list shows the job made in chat: {listing}");
    let id = jobs(&env)[0]["id"].as_str().unwrap().to_owned();
    let removed = env.command(&["cron", "remove", &id]).output().unwrap();
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    let settled = env.llm.requests().len();
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let after = env.llm.requests().len();
    assert!(
        after <= settled + 1,
        "a job removed from the CLI stops firing in the running gateway ({settled} → {after})"
    );

    let cron_turn = &env.llm.requests()[2];
    let message = cron_turn["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(message.contains("Tell me to stretch"), "{message}");
    let session = env.session_file("websocket:room1");
    assert!(session.contains(r#""source":"cron""#) && session.contains("Time to stretch!"), "{session}");
}

#[test]
fn a_one_shot_job_missed_while_the_gateway_was_down_fires_once_after_start() {
    let (env, port) = websocket_gateway();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let due = now_ms - 60_000;
    let file = json!({"version": 1, "jobs": [{
        "id": "a1b2c3d4", "name": "dentist", "enabled": true,
        "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": "Remind me to call the dentist", "sessionKey": "websocket:room9"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true
    }]});
    std::fs::create_dir_all(env.workspace().join("cron")).unwrap();
    std::fs::write(env.workspace().join("cron/jobs.json"), file.to_string()).unwrap();
    env.llm.push(Reply::Text("Call the dentist!".into()));
    block_on(async {
        let gateway = env.start_with("websocket");
        let mut room = join(&env, port, "room9").await;
        let wait_for_reply = async {
            loop {
                let reply = next_message(&mut room).await;
                if reply["text"] == "Call the dentist!" {
                    break;
                }
            }
        };
        // The firing may come before the client joined: then the reply waits in the session.
        if tokio::time::timeout(std::time::Duration::from_secs(5), wait_for_reply).await.is_err() {
            let stored = || env.session_file("websocket:room9").contains("Call the dentist!");
            assert!(wait_until(DEADLINE, stored), "the missed job ran once after start");
        }
        assert!(
            wait_until(DEADLINE, || jobs(&env).is_empty()),
            "a one-shot job made to be deleted after its run is gone"
        );
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        assert_eq!(env.llm.requests().len(), 1, "the missed one-shot job ran exactly once");
        drop(gateway);
    });
}

#[test]
fn jobs_survive_a_killed_gateway_and_fire_after_the_restart() {
    let (env, port) = websocket_gateway();
    let mut gateway = env.start_with("websocket");
    let add = json!({"action": "add", "message": "Check the oven", "every_seconds": 3600, "name": "oven"});
    env.llm.push(Reply::ToolCalls(vec![("cron".into(), add.to_string())]));
    env.llm.push(Reply::Text("Will do.".into()));
    block_on(async {
        let mut room = join(&env, port, "kitchen").await;
        room.send(WsMessage::text(json!({"type": "message", "text": "remind me hourly"}).to_string())).await.unwrap();
        assert_eq!(next_message(&mut room).await["text"], "Will do.");
    });
    gateway.kill();
    let id = jobs(&env)[0]["id"].as_str().unwrap().to_owned();
    let listed = env.command(&["cron", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("oven"), "the job is still there after SIGKILL");

    let _gateway = env.start_with("websocket");
    env.llm.push(Reply::Text("The oven!".into()));
    let ran = env.command(&["cron", "run", &id]).output().unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(env.session_file("websocket:kitchen").contains("The oven!"), "the job's run is in its session");
}

#[test]
fn a_one_shot_agent_offers_cron_only_while_a_gateway_runs_the_jobs() {
    let (env, _port) = websocket_gateway();
    let offered = |env: &GatewayEnv| {
        let before = env.llm.requests().len();
        env.llm.push(Reply::Text("ok".into()));
        let out = env.command(&["agent", "-m", "hello"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        tool_names(&env.llm.requests()[before]).contains(&"cron".to_owned())
    };
    assert!(!offered(&env), "no scheduler runs: a job added now would never fire");
    let _gateway = env.start_with("websocket");
    assert!(offered(&env), "the gateway runs the jobs");
}

/// Issue 29: the `cron` tool refused `tz` with `at` although its description offers it, so a
/// small model (which always sent `tz`) never scheduled a reminder; "in 2 minutes" had no form.
#[test]
fn the_cron_tool_takes_a_time_with_its_timezone_and_a_delay_from_now() {
    let (env, port) = websocket_gateway();
    let _gateway = env.start_with("websocket");
    let at = json!({"action": "add", "message": "Call the plumber", "at": "2030-01-02T09:00", "tz": "Asia/Tokyo"});
    let delay = json!({"action": "add", "message": "Take the cake out", "in": "2m", "tz": "Europe/Berlin"});
    env.llm.push(Reply::ToolCalls(vec![("cron".into(), at.to_string()), ("cron".into(), delay.to_string())]));
    env.llm.push(Reply::Text("Both set.".into()));
    let before_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    block_on(async {
        let mut room = join(&env, port, "kitchen").await;
        room.send(WsMessage::text(json!({"type": "message", "text": "remind me"}).to_string())).await.unwrap();
        assert_eq!(next_message(&mut room).await["text"], "Both set.");
    });
    let results: Vec<String> = env.llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(results.iter().all(|r| r.starts_with("Created job")), "{results:?}");
    let jobs = jobs(&env);
    assert_eq!(jobs[0]["schedule"]["atMs"], 1_893_542_400_000_i64, "09:00 in Tokyo is midnight UTC");
    let soon = jobs[1]["schedule"]["atMs"].as_i64().unwrap() - before_ms;
    assert!((110_000..=150_000).contains(&soon), "two minutes from now, got {soon} ms");
    assert_eq!(jobs[1]["deleteAfterRun"], true, "a delay is a one-shot job");
}
