//! The loop guard through `oxibot agent` and the scripted LLM (issue 29, item 1): an exact
//! call runs once per turn (a read replayed, a write refused), a cycle of calls ends the turn,
//! the notes carry no id the model could copy, and a turn without progress ends within
//! `MAX_STALLED_STEPS` (2) model calls of its last new call.

use oxibot_tests::llm::Reply;
use oxibot_tests::stderr;
use serde_json::{Value, json};

use crate::agent::AgentEnv;

fn calls(name: &str, arguments: &str) -> Reply {
    Reply::ToolCalls(vec![(name.into(), arguments.into())])
}

/// The tool results the turn stored, in order.
fn tool_results(env: &AgentEnv) -> Vec<String> {
    let lines: Vec<Value> = env.session_lines();
    lines.iter().filter(|l| l["role"] == "tool").map(|l| l["content"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_read_asked_again_is_replayed_and_the_turn_ends_two_model_calls_after_its_last_new_call() {
    let env = AgentEnv::with_defaults(json!({"maxToolIterations": 20}));
    env.write("notes.md", "the note\n");
    for _ in 0..8 {
        env.llm.push(calls("read_file", r#"{"path": "notes.md"}"#));
    }
    let out = env.agent("read my notes");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(out.stdout.starts_with(b"I stopped: I kept repeating"), "{}", String::from_utf8_lossy(&out.stdout));
    let results = tool_results(&env);
    assert_eq!(results.len(), 3, "one run, then two steps without a new call: {results:?}");
    assert!(results.iter().all(|r| r.contains("the note")), "the read's result is replayed: {results:?}");
    assert!(results[1].contains("not run again"), "{results:?}");
    assert_eq!(env.llm.requests().len(), 3, "no model call after the turn gave up");
}

#[test]
fn a_command_asked_twice_runs_once_and_the_note_names_no_call_id() {
    let env = AgentEnv::new();
    let command = r#"{"command": "echo ran >> log.txt"}"#;
    env.llm.push(calls("exec", command));
    env.llm.push(calls("exec", command));
    env.llm.push(Reply::Text("done".into()));
    let out = env.agent("log it once");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(std::fs::read_to_string(env.workspace.join("log.txt")).unwrap(), "ran\n", "the command ran once");
    let note = &tool_results(&env)[1];
    assert!(note.starts_with("Not run again: exec"), "{note}");
    assert!(!note.contains("call_"), "no call id the model could copy into arguments: {note}");
}

#[test]
fn a_cycle_of_reads_ends_the_turn_when_it_comes_round_again() {
    let env = AgentEnv::with_defaults(json!({"maxToolIterations": 20}));
    env.write("a.md", "alpha\n");
    env.write("b.md", "beta\n");
    for _ in 0..6 {
        env.llm.push(calls("read_file", r#"{"path": "a.md"}"#));
        env.llm.push(calls("read_file", r#"{"path": "b.md"}"#));
    }
    let out = env.agent("read both");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(out.stdout.starts_with(b"I stopped"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(env.llm.requests().len(), 4, "a, b, a again, b again: the cycle is seen");
}

#[test]
fn a_cycle_of_writes_ends_the_turn_although_each_write_changes_the_file() {
    let env = AgentEnv::with_defaults(json!({"maxToolIterations": 20}));
    for _ in 0..6 {
        env.llm.push(calls("write_file", r#"{"path": "x.txt", "content": "one"}"#));
        env.llm.push(calls("write_file", r#"{"path": "x.txt", "content": "two"}"#));
    }
    let out = env.agent("write it");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(out.stdout.starts_with(b"I stopped"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(env.llm.requests().len(), 4, "the window one, two came round twice");
    let results = tool_results(&env);
    assert!(results[3].starts_with("Not run: this write_file call repeats a cycle"), "{results:?}");
}

#[test]
fn a_read_after_a_write_runs_again_and_sees_the_change() {
    let env = AgentEnv::new();
    env.write("a.md", "old\n");
    env.llm.push(calls("read_file", r#"{"path": "a.md"}"#));
    env.llm.push(calls("write_file", r#"{"path": "a.md", "content": "new\n"}"#));
    env.llm.push(calls("read_file", r#"{"path": "a.md"}"#));
    env.llm.push(Reply::Text("done".into()));
    let out = env.agent("change a");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let results = tool_results(&env);
    assert!(results[2].contains("new") && !results[2].contains("not run again"), "{results:?}");
}
