//! `oxibot acp` driven by the official ACP client library (PyPI `agent-client-protocol`,
//! `tests/fixtures/acp_client.py`) against the scripted LLM: a streamed reply, tool calls with
//! their status and files, a cancelled slow turn, a loaded session going on, a permission
//! request answered in the editor; and raw JSON-RPC lines that get clear errors.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use oxibot_tests::TempDir;
use oxibot_tests::llm::Reply;
use serde_json::{Value, json};

use super::agent::AgentEnv;

/// An oxibot data dir and config (scripted LLM), and an editor's project directory.
struct Editor {
    env: AgentEnv,
    project: TempDir,
}

impl Editor {
    fn new() -> Editor {
        Editor { env: AgentEnv::new(), project: TempDir::new("acp-project") }
    }

    /// Like `new`, with `tools.approval` set to `approval`.
    fn with_approval(approval: Value) -> Editor {
        let editor = Editor::new();
        let path = editor.env.home.path().join("config.json");
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["tools"] = json!({"approval": approval});
        editor.env.write_config(&config);
        editor
    }

    fn project(&self) -> &Path {
        self.project.path()
    }

    /// Runs a scenario of the client script in the project; returns what the client saw.
    fn client(&self, args: &[&str]) -> Value {
        oxibot_tests::needs::python_module("acp", "agent-client-protocol");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/acp_client.py");
        let out = std::process::Command::new("python3")
            .arg(script)
            .arg(oxibot_tests::bin("oxibot"))
            .arg(self.project())
            .args(args)
            .env("OXIBOT_HOME", self.env.home.path())
            .env("OXIBOT_PROVIDER_RETRY_DELAYS_MS", "20,40,80")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the ACP client failed: {stderr}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
    }
}

/// The updates of one kind.
fn of_kind<'a>(got: &'a Value, kind: &str) -> Vec<&'a Value> {
    got["updates"].as_array().unwrap().iter().filter(|u| u["sessionUpdate"] == kind).collect()
}

/// The text of the agent's message chunks, joined.
fn reply_text(updates: &[&Value]) -> String {
    updates.iter().map(|u| u["content"]["text"].as_str().unwrap()).collect()
}

/// The statuses a tool call went through, its start included.
fn statuses(got: &Value, id: &Value) -> Vec<String> {
    let updates = got["updates"].as_array().unwrap();
    let ours = updates.iter().filter(|u| &u["toolCallId"] == id && u.get("status").is_some());
    ours.map(|u| u["status"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_prompt_streams_its_reply_in_chunks_and_the_session_lives_in_the_editors_project() {
    let editor = Editor::new();
    editor.env.llm.push(Reply::Text("Hello from oxibot, streamed in pieces".into()));
    let got = editor.client(&["prompt", "hello"]);
    assert_eq!(got["initialize"]["protocolVersion"], 1, "{got:#}");
    assert_eq!(got["initialize"]["agentCapabilities"]["loadSession"], true, "{got:#}");
    let chunks = of_kind(&got, "agent_message_chunk");
    assert!(chunks.len() > 1, "the reply came whole: {chunks:?}");
    assert_eq!(reply_text(&chunks), "Hello from oxibot, streamed in pieces");
    assert_eq!(got["stop_reason"], "end_turn");
    let session = got["session"].as_str().unwrap();
    assert!(session.starts_with("acp:"), "{session}");
    let file = oxibot_tests::session_path(editor.env.home.path(), editor.project(), session);
    let stored = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("no session of the project {file:?}: {e}"));
    assert!(stored.contains("Hello from oxibot"), "{stored}");
}

#[test]
fn tool_calls_show_up_with_their_kind_file_and_status_as_they_run() {
    let editor = Editor::new();
    std::fs::write(editor.project().join("notes.txt"), "hi there").unwrap();
    let calls = vec![
        ("read_file".to_owned(), r#"{"path": "notes.txt"}"#.to_owned()),
        ("read_file".to_owned(), r#"{"path": "missing.txt"}"#.to_owned()),
    ];
    editor.env.llm.push(Reply::ToolCalls(calls));
    editor.env.llm.push(Reply::Text("It says hi there".into()));
    let got = editor.client(&["prompt", "what do my notes say?"]);
    let started = of_kind(&got, "tool_call");
    assert_eq!(started.len(), 2, "{got:#}");
    let (found, missing) = (started[0], started[1]);
    assert_eq!(found["kind"], "read");
    assert_eq!(found["title"], "read_file: notes.txt");
    let expected = editor.project().join("notes.txt").display().to_string();
    assert_eq!(found["locations"], json!([{"path": expected}]));
    assert_eq!(statuses(&got, &found["toolCallId"]), ["pending", "in_progress", "completed"]);
    assert_eq!(statuses(&got, &missing["toolCallId"]), ["pending", "in_progress", "failed"]);
    assert_eq!(reply_text(&of_kind(&got, "agent_message_chunk")), "It says hi there");
    assert_eq!(got["stop_reason"], "end_turn");
}

#[test]
fn cancel_stops_a_slow_turn_and_the_prompt_ends_cancelled() {
    let editor = Editor::new();
    editor.env.llm.push(Reply::SlowFirstToken { delay_ms: 30_000, text: "far too late".into() });
    let got = editor.client(&["cancel", "take your time"]);
    assert_eq!(got["stop_reason"], "cancelled", "{got:#}");
    assert!(got["seconds"].as_f64().unwrap() < 10.0, "the cancel took {} s", got["seconds"]);
    assert!(!got.to_string().contains("far too late"));
}

#[test]
fn a_loaded_session_replays_its_history_and_the_conversation_goes_on() {
    let editor = Editor::new();
    editor.env.llm.push(Reply::Text("Nice to meet you, Ada".into()));
    let first = editor.client(&["prompt", "my name is Ada"]);
    let session = first["session"].as_str().unwrap();

    editor.env.llm.push(Reply::Text("You are Ada".into()));
    let got = editor.client(&["load", session, "what is my name?"]);
    let replayed = got["replayed"].as_array().unwrap();
    let kinds: Vec<_> = replayed.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user_message_chunk", "agent_message_chunk"], "{replayed:#?}");
    assert!(replayed[0]["content"]["text"].as_str().unwrap().contains("my name is Ada"));
    assert_eq!(replayed[1]["content"]["text"], "Nice to meet you, Ada");
    assert_eq!(reply_text(&of_kind(&got, "agent_message_chunk")), "You are Ada");
    let last = editor.env.llm.requests().last().unwrap().to_string();
    assert!(last.contains("my name is Ada") && last.contains("Nice to meet you, Ada"), "{last}");
}

#[test]
fn a_conversation_of_oxibot_agent_in_the_project_goes_on_in_the_editor() {
    let editor = Editor::new();
    editor.env.llm.push(Reply::Text("Noted: the number is 42".into()));
    let project = editor.project().display().to_string();
    let out = editor.env.command(&["agent", "-m", "remember the number 42", "--workspace", &project]).output().unwrap();
    assert!(out.status.success(), "{}", oxibot_tests::stderr(&out));

    editor.env.llm.push(Reply::Text("It is 42".into()));
    let got = editor.client(&["load", "cli:direct", "which number?"]);
    let replayed = got["replayed"].to_string();
    assert!(replayed.contains("remember the number 42") && replayed.contains("Noted: the number is 42"), "{replayed}");
    assert_eq!(reply_text(&of_kind(&got, "agent_message_chunk")), "It is 42");
    let stored =
        std::fs::read_to_string(oxibot_tests::session_path(editor.env.home.path(), editor.project(), "cli:direct"));
    assert!(stored.unwrap().contains("It is 42"), "the editor's turn went into the same session");
}

#[test]
fn a_permission_request_goes_to_the_editor_and_its_answer_decides_the_call() {
    let editor = Editor::with_approval(json!({"write_file": "ask"}));
    let call = ("write_file".to_owned(), r#"{"path": "note.txt", "content": "hello"}"#.to_owned());
    editor.env.llm.push(Reply::ToolCalls(vec![call.clone()]));
    editor.env.llm.push(Reply::Text("Not written.".into()));
    let refused = editor.client(&["permission", "reject_once"]);
    assert!(!editor.project().join("note.txt").exists(), "a refused call ran");
    let asked = &refused["permissions"][0];
    let id = &of_kind(&refused, "tool_call")[0]["toolCallId"];
    assert_eq!(&asked["tool_call"]["toolCallId"], id, "{refused:#}");
    assert!(asked["tool_call"].to_string().contains("note.txt"), "the person is shown the call: {asked}");
    let kinds: Vec<_> = asked["options"].as_array().unwrap().iter().map(|o| o["kind"].clone()).collect();
    assert_eq!(kinds, [json!("allow_once"), json!("allow_always"), json!("reject_once")]);
    assert_eq!(statuses(&refused, id).last().unwrap(), "failed");

    editor.env.llm.push(Reply::ToolCalls(vec![call]));
    editor.env.llm.push(Reply::Text("Written.".into()));
    let allowed = editor.client(&["permission", "allow_once"]);
    assert_eq!(allowed["permissions"].as_array().unwrap().len(), 1, "{allowed:#}");
    assert_eq!(std::fs::read_to_string(editor.project().join("note.txt")).unwrap(), "hello");
    let id = &of_kind(&allowed, "tool_call")[0]["toolCallId"];
    assert_eq!(statuses(&allowed, id).last().unwrap(), "completed");
    assert_eq!(allowed["stop_reason"], "end_turn");
}

#[test]
fn a_prompt_to_a_session_never_opened_gets_a_json_rpc_error_naming_it() {
    let editor = Editor::new();
    let got = editor.client(&["unknown"]);
    assert_eq!(got["error"]["code"], -32602, "{got:#}");
    assert!(got["error"]["message"].as_str().unwrap().contains("unknown session id \"acp:never-opened\""), "{got:#}");
}

#[test]
fn malformed_lines_unknown_methods_and_bad_parameters_get_clear_json_rpc_errors() {
    let editor = Editor::new();
    let mut agent = oxibot_tests::kernel_command(editor.env.home.path(), &["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let project = editor.project().display().to_string();
    let lines = [
        "{this is not json".to_owned(),
        json!({"jsonrpc": "2.0", "id": 1, "result": 5, "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/fly"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": "relative/dir"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/load", "params": {"cwd": project, "sessionId": "acp:nope"}})
            .to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"prompt": []}}).to_string(),
    ];
    let mut stdin = agent.stdin.take().unwrap();
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let answers: Vec<Value> = BufReader::new(agent.stdout.take().unwrap())
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).expect("stdout carries only JSON-RPC"))
        .collect();
    assert!(agent.wait().unwrap().success());
    let error_of = |id: Value| {
        let answer =
            answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer to {id}: {answers:#?}"));
        (answer["error"]["code"].as_i64().unwrap(), answer["error"]["message"].as_str().unwrap().to_owned())
    };
    let (code, message) = error_of(Value::Null);
    assert_eq!(code, -32700, "{message}");
    assert!(message.contains("not JSON"), "{message}");
    assert_eq!(error_of(json!(2)).0, -32601);
    let (code, message) = error_of(json!(3));
    assert_eq!(code, -32602);
    assert!(message.contains("absolute"), "{message}");
    let (code, message) = error_of(json!(4));
    assert_eq!(code, -32602);
    assert!(message.contains("unknown session id \"acp:nope\""), "{message}");
    let (code, message) = error_of(json!(5));
    assert_eq!(code, -32602);
    assert!(message.contains("sessionId"), "{message}");
    assert_eq!(answers.len(), 5, "a response of the client's is never answered: {answers:#?}");
}

#[test]
fn closing_stdin_stops_the_running_turn_and_the_agent_exits_at_once() {
    let editor = Editor::new();
    editor.env.llm.push(Reply::SlowFirstToken { delay_ms: 30_000, text: "nobody reads this".into() });
    let mut agent = oxibot_tests::kernel_command(editor.env.home.path(), &["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    let mut answers = BufReader::new(agent.stdout.take().unwrap()).lines();
    let project = editor.project().display().to_string();
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": project, "mcpServers": []}});
    writeln!(stdin, "{new}").unwrap();
    let created: Value = serde_json::from_str(&answers.next().unwrap().unwrap()).unwrap();
    let session = created["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "take your time"}]}});
    writeln!(stdin, "{prompt}").unwrap();
    assert!(oxibot_tests::procs::wait_until(std::time::Duration::from_secs(20), || !editor
        .env
        .llm
        .requests()
        .is_empty()));
    let closed = std::time::Instant::now();
    drop(stdin);
    let rest: Vec<Value> = answers.map(|line| serde_json::from_str(&line.unwrap()).unwrap()).collect();
    assert!(agent.wait().unwrap().success());
    assert!(closed.elapsed().as_secs() < 10, "the agent waited {:?} for a turn nobody reads", closed.elapsed());
    let answer = rest.iter().find(|a| a["id"] == 2).unwrap_or_else(|| panic!("the prompt was not answered: {rest:#?}"));
    assert_eq!(answer["result"]["stopReason"], "cancelled");
}
