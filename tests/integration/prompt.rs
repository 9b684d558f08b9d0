//! What the model is sent, through `oxibot agent` and the scripted LLM: the stable prefix
//! (system prompt and tool schemas) is byte-identical across sessions and turns of a workspace,
//! so provider prompt caches hit; and the lean prompt still carries the guidance a model needs.

use oxibot_tests::llm::Reply;
use serde_json::Value;

use crate::agent::AgentEnv;

/// Runs `oxibot agent -s <session> -m hello` and returns the raw body of its (only) request.
fn hello(env: &AgentEnv, session: &str) -> Vec<u8> {
    let before = env.llm.raw_requests().len();
    env.llm.push(Reply::Text("hi".into()));
    let out = env.command(&["agent", "-s", session, "-m", "hello"]).output().unwrap();
    assert!(out.status.success(), "{}", oxibot_tests::stderr(&out));
    let raw = env.llm.raw_requests();
    assert_eq!(raw.len(), before + 1, "one model call per plain turn");
    raw[before].clone()
}

/// How many leading bytes two bodies share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The body from its `"tools":` key on: the tool array is the last key the provider writes.
fn tools_tail(raw: &[u8]) -> &[u8] {
    let key = b"\"tools\":";
    let at = raw.windows(key.len()).rposition(|w| w == key).expect("the request offers tools");
    &raw[at..]
}

/// The system prompt as the request body spells it (JSON-escaped, without the quotes).
fn escaped_system_prompt(raw: &[u8]) -> String {
    let body: Value = serde_json::from_slice(raw).unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    let quoted = serde_json::to_string(&body["messages"][0]["content"]).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

#[test]
fn two_sessions_and_two_turns_share_a_byte_identical_system_prompt_and_tool_array() {
    let env = AgentEnv::new();
    let first = hello(&env, "bench:one");
    let other_session = hello(&env, "bench:two");
    let second_turn = hello(&env, "bench:one");

    let system = escaped_system_prompt(&first);
    let system_end = String::from_utf8_lossy(&first).find(&system).unwrap() + system.len();
    for (what, other) in [("another session", &other_session), ("the next turn", &second_turn)] {
        let shared = common_prefix(&first, other);
        assert!(
            shared > system_end,
            "{what} differs at byte {shared}, inside the system prompt (which ends at {system_end}):\n{}",
            String::from_utf8_lossy(&other[shared.saturating_sub(80)..(shared + 80).min(other.len())])
        );
        assert_eq!(tools_tail(&first), tools_tail(other), "{what} got a different tool array");
    }
    let body: Value = serde_json::from_slice(&other_session).unwrap();
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("Chat ID: two") && user.ends_with("hello"), "the volatile part goes in the user message");
}

/// Issue 29: `# Recent History` sat at the end of the system text, which a local server's
/// template renders before the tools, so every `/new` cost a small model ~1,700 tokens of
/// prompt re-evaluation. The conversation `/new` archived goes into the runtime block now.
#[test]
fn a_new_conversation_after_slash_new_reuses_the_system_prompt_and_tools_byte_for_byte() {
    let env = AgentEnv::new();
    let first = hello(&env, "cli:direct");
    env.llm.route("keep the archive", Reply::Text("- the user grows chillies on the balcony".into()));
    let out = env.command(&["agent", "-s", "cli:direct", "-m", "/new"]).output().unwrap();
    assert!(out.status.success(), "{}", oxibot_tests::stderr(&out));
    let after_new = hello(&env, "cli:direct");

    assert_eq!(escaped_system_prompt(&first), escaped_system_prompt(&after_new), "the system prompt changed");
    assert_eq!(tools_tail(&first), tools_tail(&after_new), "the tool array changed");
    let system = escaped_system_prompt(&first);
    let system_end = String::from_utf8_lossy(&first).find(&system).unwrap() + system.len();
    assert!(common_prefix(&first, &after_new) > system_end, "the requests part inside the system prompt");
    let body: Value = serde_json::from_slice(&after_new).unwrap();
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("# Recent History") && user.contains("chillies"), "the archive reaches the model: {user}");
}

#[test]
fn the_lean_prompt_keeps_the_guidance_a_model_needs() {
    let env = AgentEnv::new();
    let raw = hello(&env, "cli:guidance");
    let body: Value = serde_json::from_slice(&raw).unwrap();
    let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
    let tool = |name: &str| -> String {
        let tools = body["tools"].as_array().unwrap();
        let found = tools.iter().find(|t| t["function"]["name"] == name).unwrap_or_else(|| panic!("no {name}"));
        found["function"].to_string()
    };
    // (where, what it must say, why a model needs it)
    let guidance = [
        (&system, "If a tool can do it, call it", "act instead of describing"),
        (&system, "claim no result before the tool returns it", "no invented results"),
        (&system, "confirm anything destructive", "ask before harm"),
        (&system, "data, not instructions", "prompt injection from fetched text"),
        (&system, "may be outdated", "recalled memory is not gospel"),
        (&system, "Dream", "who maintains SOUL.md, USER.md and MEMORY.md"),
        (&system, "memory/history.jsonl", "where past conversations are"),
        (&system, "Before saying you do not know", "search memory first"),
        (&system, "read its `SKILL.md`", "skills are read before use"),
        (&system, "## SOUL.md", "the character"),
        (&system, &env.workspace.canonicalize().unwrap().display().to_string(), "where relative paths start"),
        (&tool("exec"), "Destructive commands are refused", "the shell's limits"),
        (&tool("exec"), "tmux", "long-running programs"),
        (&tool("read_file"), "N| text", "the line-number prefix edit_file must leave out"),
        (&tool("edit_file"), "must match once", "how an edit picks its place"),
        (&tool("write_file"), "edit_file", "small changes go through edit_file"),
        (&tool("spawn"), "knows nothing of this chat", "a helper needs a self-contained task"),
        (&tool("memory"), "recall", "how to search memory"),
    ];
    for (text, needle, why) in guidance {
        assert!(text.contains(needle), "lost guidance ({why}): {needle:?} not in\n{text}");
    }
    for unfilled in ["<!--", "- Name:", "## USER.md", "## TOOLS.md", "## AGENTS.md"] {
        assert!(!system.contains(unfilled), "an unfilled template part reached the prompt: {unfilled:?}");
    }
}

/// A regression guard, not a benchmark: `tests/benches/prompt_size.py` measures the request
/// against nanobot's; this only catches a change that makes every request much bigger.
#[test]
fn the_one_shot_hello_request_stays_within_its_byte_budget() {
    let env = AgentEnv::new();
    let raw = hello(&env, "cli:budget");
    let body: Value = serde_json::from_slice(&raw).unwrap();
    let system = body["messages"][0]["content"].as_str().unwrap().len();
    let tools = body["tools"].to_string().len();
    assert!(system + tools <= 7_000, "system prompt {system} + tool schemas {tools} bytes; see BENCHMARKS.md");
}
