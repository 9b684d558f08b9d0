//! Memory recall end to end through the real `oxibot` binary, real SQLite index files and the
//! scripted LLM: auto-recall across sessions, the `memory` tool, edits made in an editor,
//! `oxibot memory search|reindex`, the overflow guard, daily logs and session flushes.

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use oxibot_tests::llm::{Reply, system_prompt};
use oxibot_tests::procs::wait_until;
use oxibot_tests::{stderr, stdout};
use serde_json::{Value, json};

use super::agent::AgentEnv;

/// Words of the summariser's system prompt (templates/agent/consolidate.md).
const SUMMARISER: &str = "keep the archive";
/// Words of the silent flush turn's prompt (templates/agent/memory_flush.md).
const FLUSH: &str = "look after a personal assistant's long-term memory";

/// An agent environment whose config has this top-level `memory` section.
fn env_with_memory(memory: Value, defaults: Value) -> AgentEnv {
    let env = AgentEnv::with_defaults(defaults.clone());
    let mut agent_defaults =
        json!({"workspace": env.workspace, "model": "test-model", "provider": "custom", "maxToolIterations": 5});
    for (key, value) in defaults.as_object().into_iter().flatten() {
        agent_defaults[key] = value.clone();
    }
    env.write_config(&json!({
        "agents": {"defaults": agent_defaults},
        "providers": {"custom": {"apiKey": "test-key", "apiBase": env.llm.base_url()}},
        "memory": memory,
    }));
    env
}

fn memory_call(arguments: Value) -> Reply {
    Reply::ToolCalls(vec![("memory".to_owned(), arguments.to_string())])
}

/// The text of the last user message of a request.
fn last_user_message(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap_or_default().to_owned()
}

/// Tool results of a request, in order.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Today in UTC as `YYYY-MM-DD`, from the `date` command (the test crate has no clock crate).
fn today() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn read(env: &AgentEnv, relative: &str) -> String {
    std::fs::read_to_string(env.workspace.join(relative)).unwrap_or_default()
}

#[test]
fn a_fact_stored_in_one_session_is_recalled_automatically_in_a_new_session() {
    let env = env_with_memory(json!({"embedding": "test-embedding"}), json!({}));
    env.llm.push(memory_call(
        json!({"action": "store", "content": "The spare key is under the blue flowerpot", "category": "daily"}),
    ));
    env.llm.push(Reply::Text("Noted.".into()));
    let out = env.agent("remember: the spare key is under the blue flowerpot");
    assert!(out.status.success(), "{}", stderr(&out));
    let stored = &tool_results(&env.llm.requests()[1])[0];
    assert!(stored.starts_with(&format!("Stored in memory/{}.md", today())), "{stored}");

    env.llm.push(Reply::Text("Under the blue flowerpot.".into()));
    let out = env.command(&["agent", "-s", "cli:other", "-m", "where did I leave the spare key?"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = last_user_message(env.llm.requests().last().unwrap());
    assert!(sent.contains("Recalled Memory"), "{sent}");
    assert!(
        sent.contains(&format!("[memory/{}.md:3, {}]", today(), today())) && sent.contains("blue flowerpot"),
        "{sent}"
    );
    assert!(sent.ends_with("where did I leave the spare key?"), "the runtime block comes first: {sent}");
    let session =
        std::fs::read_to_string(oxibot_tests::session_path(env.home.path(), &env.workspace, "cli:other")).unwrap();
    let stored_user: Value = session
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["role"] == "user")
        .expect("the user's message is stored");
    assert_eq!(stored_user["content"], "where did I leave the spare key?", "recalled memory is not stored");
    assert!(!env.llm.embedding_requests().is_empty(), "hybrid search embedded the memory and the query");
}

#[test]
fn trivial_messages_and_memory_already_in_the_prompt_bring_no_recall() {
    let env = AgentEnv::new();
    env.write("memory/MEMORY.md", "# Memory\n\n- The spare key is under the blue flowerpot\n");
    env.llm.push(Reply::Text("It is under the blue flowerpot.".into()));
    env.llm.push(Reply::Text("You're welcome.".into()));
    assert!(env.agent("where is the spare key?").status.success());
    assert!(env.agent("thanks").status.success());
    for request in env.llm.requests() {
        assert!(!last_user_message(&request).contains("Recalled Memory"), "{}", last_user_message(&request));
    }
}

#[test]
fn an_edit_to_memory_md_in_an_editor_is_searchable_without_a_restart() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Hello.".into()));
    env.llm.push(memory_call(json!({"action": "recall", "query": "favourite colour"})));
    env.llm.push(Reply::Text("Teal.".into()));
    let mut agent =
        env.command(&["agent"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = agent.stdin.take().unwrap();
    input.write_all(b"hello\n").unwrap();
    assert!(wait_until(Duration::from_secs(20), || env.llm.requests().len() == 1), "the first turn never ran");
    assert!(wait_until(Duration::from_secs(20), || env.workspace.join("memory/MEMORY.md").exists()));
    // What an editor does: write the file in place while the kernel runs.
    env.write("memory/MEMORY.md", "# Memory\n\n- Favourite colour: teal\n");
    input.write_all(b"what is my favourite colour?\nexit\n").unwrap();
    let out = agent.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let results = tool_results(&env.llm.requests()[2]);
    assert!(results[0].contains("memory/MEMORY.md:3") && results[0].contains("Favourite colour: teal"), "{results:?}");
}

#[test]
fn forget_removes_a_fact_from_search_and_from_the_file() {
    let env = AgentEnv::new();
    env.write("memory/MEMORY.md", "# Memory\n\n- The door code is 4417\n- Sam likes green tea\n");
    env.llm.push(memory_call(json!({"action": "forget", "query": "door code"})));
    env.llm.push(memory_call(json!({"action": "recall", "query": "door code"})));
    env.llm.push(Reply::Text("Forgotten.".into()));
    let out = env.agent("forget the door code");
    assert!(out.status.success(), "{}", stderr(&out));
    let results = tool_results(&env.llm.requests()[2]);
    assert!(
        results[0].starts_with("Removed 1 piece(s)") && results[0].contains("The door code is 4417"),
        "{results:?}"
    );
    assert_eq!(results[1], "Nothing in memory matches \"door code\".");
    assert_eq!(read(&env, "memory/MEMORY.md"), "# Memory\n\n- Sam likes green tea\n");
    let search = env.command(&["memory", "search", "door code"]).output().unwrap();
    assert!(search.status.success() && stdout(&search).is_empty(), "{}", stdout(&search));
    assert!(stderr(&search).contains("Nothing in memory matches"), "{}", stderr(&search));
}

#[test]
fn deleting_the_index_file_and_running_reindex_gives_the_same_results() {
    let env = AgentEnv::new();
    env.write(
        "memory/MEMORY.md",
        "# Memory\n\n## Garden\n- Tomatoes grow by the south wall\n- Basil beside the tomatoes\n",
    );
    env.write("memory/2026-04-16.md", "# 2026-04-16\n\n- 09:00 watered the tomatoes\n");
    let entries = [
        json!({"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "- Sam planted tomatoes and basil"}),
        json!({"cursor": 2, "timestamp": "2026-04-04 09:30", "content": "- Sam asked about the weather in Lyon"}),
    ];
    env.write("memory/history.jsonl", &entries.iter().map(|e| format!("{e}\n")).collect::<String>());
    let search = |query: &str| {
        let out = env.command(&["memory", "search", query, "-n", "3"]).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let before: Vec<String> = ["tomatoes", "weather lyon", "basil"].iter().map(|q| search(q)).collect();
    assert!(
        before[0].contains("memory/MEMORY.md:4") && before[1].contains("memory/history.jsonl:2 (cursor 2)"),
        "{before:?}"
    );
    let index_dir = env.home.path().join("memory-index");
    let files: Vec<_> = std::fs::read_dir(&index_dir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "sqlite")), "{files:?}");
    for file in files {
        std::fs::remove_file(file).unwrap();
    }
    let reindex = env.command(&["memory", "reindex"]).output().unwrap();
    assert!(reindex.status.success(), "{}", stderr(&reindex));
    assert!(stdout(&reindex).starts_with("Indexed 5 chunk(s) of 3 file(s)"), "{}", stdout(&reindex));
    let after: Vec<String> = ["tomatoes", "weather lyon", "basil"].iter().map(|q| search(q)).collect();
    assert_eq!(after, before);
}

#[test]
fn status_says_plainly_which_search_runs() {
    let env = AgentEnv::new();
    let out = env.command(&["status"]).output().unwrap();
    assert!(stdout(&out).contains("memory:    keyword search (BM25) only"), "{}", stdout(&out));
    let env = env_with_memory(json!({"embedding": "test-embedding", "autoRecall": false}), json!({}));
    let out = env.command(&["status"]).output().unwrap();
    assert!(
        stdout(&out)
            .contains("hybrid search: BM25 keywords (0.30) + embeddings from 'test-embedding' (0.70); auto-recall off"),
        "{}",
        stdout(&out)
    );
    let env = env_with_memory(json!({"vectorWeight": "high"}), json!({}));
    let out = env.command(&["memory", "search", "x"]).output().unwrap();
    assert!(!out.status.success() && stderr(&out).contains("memory.vectorWeight"), "{}", stderr(&out));
}

fn overflow() -> Reply {
    Reply::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#.into(),
    }
}

#[test]
fn an_overflow_error_from_the_provider_is_survived_by_cutting_long_tool_results() {
    let env = AgentEnv::new();
    let notes = format!("NOTES START {}", "the quick brown fox jumps over the lazy dog\n".repeat(200));
    env.write("notes.md", &notes);
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    env.llm.push(overflow());
    env.llm.push(Reply::Text("The notes are about a fox.".into()));
    let out = env.agent("summarise notes.md");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "The notes are about a fox.");
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 3);
    let full = &tool_results(&requests[1])[0];
    let cut = &tool_results(&requests[2])[0];
    assert!(full.len() > 8000 && cut.len() < 2500, "{} then {} bytes", full.len(), cut.len());
    assert!(cut.ends_with("the whole result is kept in the session]"), "{cut}");
    let stored = env.session_lines().iter().find(|l| l["role"] == "tool").unwrap()["content"].as_str().unwrap().len();
    assert_eq!(stored, full.len(), "the session file keeps the whole result");
}

/// Three earlier turns, so there is history to compact.
fn env_with_history() -> AgentEnv {
    let env = AgentEnv::new();
    for (n, topic) in ["the garden", "the bakery", "the bicycle"].iter().enumerate() {
        env.llm.push(Reply::Text(format!("Noted about {topic}.")));
        let out = env.agent(&format!("turn {n}: let me tell you about {topic}"));
        assert!(out.status.success(), "{}", stderr(&out));
    }
    env
}

#[test]
fn a_larger_overflow_is_survived_by_compacting_the_history() {
    let env = env_with_history();
    env.llm.route(FLUSH, Reply::Text("NO_REPLY".into()));
    env.llm.route(SUMMARISER, Reply::Text("- talked about the garden, the bakery and the bicycle".into()));
    env.llm.push(overflow());
    env.llm.push(Reply::Text("Here is the answer.".into()));
    let out = env.agent("and now the question");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Here is the answer.");
    let history = read(&env, "memory/history.jsonl");
    assert!(history.contains("talked about the garden"), "{history}");
    let lines = env.session_lines();
    assert!(lines[0]["last_consolidated"].as_u64().unwrap() >= 2, "{}", lines[0]);
    let last = env.llm.requests().pop().unwrap();
    assert!(
        last_user_message(&last).contains("talked about the garden"),
        "the summary is in the continued turn's prompt"
    );
    assert!(last_user_message(&last).ends_with("and now the question"));
    assert_eq!(lines.len() - 1, 8, "no message was lost: 3 earlier turns, the question and its answer");
}

#[test]
fn an_overflow_that_compaction_cannot_fix_fails_with_a_clear_message() {
    let env = env_with_history();
    env.llm.route(FLUSH, Reply::Text("NO_REPLY".into()));
    env.llm.route(SUMMARISER, Reply::Text("- earlier turns".into()));
    env.llm.push(overflow());
    env.llm.push(overflow());
    let out = env.agent("and now the question");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no longer fits the model's context window") && stderr(&out).contains("/new"),
        "{}",
        stderr(&out)
    );
    let lines = env.session_lines();
    let answer = lines.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(answer.starts_with("Error: the conversation no longer fits"), "{answer}");
}

fn long_message(turn: usize) -> String {
    format!("turn {turn}: {}", "Our garden plan puts tomatoes by the south wall and basil beside them. ".repeat(40))
}

#[test]
fn before_a_slice_is_archived_a_silent_turn_writes_the_days_notes() {
    let env = AgentEnv::with_defaults(json!({"contextWindowTokens": 9000, "maxTokens": 500}));
    env.llm.route(FLUSH, memory_call(json!({"action": "store", "content": "garden plan agreed: tomatoes by the south wall", "category": "daily"})));
    for _ in 0..30 {
        env.llm.route(FLUSH, Reply::Text("NO_REPLY".into()));
        env.llm.route(SUMMARISER, Reply::Text("- garden plan".into()));
    }
    for turn in 0..10 {
        env.llm.push(Reply::Text(format!("noted {turn}")));
        let out = env.agent(&long_message(turn));
        assert!(out.status.success(), "turn {turn}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), format!("noted {turn}"), "the flush is invisible to the user");
    }
    let log = read(&env, &format!("memory/{}.md", today()));
    assert!(log.starts_with(&format!("# {}\n\n- ", today())), "{log}");
    assert!(log.trim_end().ends_with("garden plan agreed: tomatoes by the south wall"), "{log}");
    let flush = env.llm.requests().into_iter().find(|r| system_prompt(r).contains(FLUSH)).unwrap();
    let offered: Vec<&str> =
        flush["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(offered, ["memory"]);
    assert!(flush["messages"][1]["content"].as_str().unwrap().contains("USER: turn 0: Our garden plan"));
    assert!(!read(&env, "memory/history.jsonl").is_empty(), "the slice was archived after the flush");
}

#[test]
fn slash_new_saves_the_conversation_to_a_dated_memory_file_before_archiving_it() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Tomatoes by the south wall, basil beside them.".into()));
    assert!(env.agent("plan the garden for spring").status.success());
    env.llm.route(SUMMARISER, Reply::Text("- garden planned".into()));
    let out = env.agent("/new");
    assert!(stdout(&out).contains("Started a new conversation"), "{}", stdout(&out));
    let name = format!("memory/{}-plan-garden-spring.md", today());
    let saved = read(&env, &name);
    assert!(saved.starts_with("# Conversation cli:direct, archived "), "{name}: {saved}");
    assert!(saved.contains("\n- user (") && saved.contains("): plan the garden for spring\n"), "{saved}");
    assert!(saved.ends_with("): Tomatoes by the south wall, basil beside them.\n"), "{saved}");
    let search =
        env.command(&["memory", "search", "basil spring garden", "--category", "conversation"]).output().unwrap();
    assert!(stdout(&search).contains(&name), "{}", stdout(&search));
}

#[test]
fn a_turn_the_estimate_says_will_not_fit_has_older_turns_archived_before_anything_is_left_out() {
    // A 7,300-token window with 1,024 for the answer: the earlier turns fit before this turn
    // starts, and no longer once the file it reads is in the request (the system prompt and
    // tool schemas take ~1,500 tokens, the file's tool result ~4,000).
    let env = AgentEnv::with_defaults(json!({"contextWindowTokens": 7300, "maxTokens": 1024}));
    for (n, topic) in ["the garden", "the bakery"].iter().enumerate() {
        env.llm.push(Reply::Text(format!("Noted about {topic}.")));
        let told = format!("turn {n}: about {topic}. {}", long_message(n).repeat(4));
        assert!(env.agent(&told).status.success());
        assert!(!read(&env, "memory/history.jsonl").contains("- "), "nothing is archived before the big turn");
    }
    env.write("notes.md", &"Sow the beans in May, water them twice a week.\n".repeat(300));
    env.llm.route(FLUSH, Reply::Text("NO_REPLY".into()));
    env.llm.route(SUMMARISER, Reply::Text("- told about the garden and the bakery".into()));
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    env.llm.push(Reply::Text("Beans in May.".into()));
    let out = env.agent("when do I sow the beans? read notes.md");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Beans in May.");

    let history = read(&env, "memory/history.jsonl");
    assert!(history.contains("told about the garden and the bakery"), "older turns were archived: {history}");
    let last = env.llm.requests().pop().unwrap();
    assert!(last_user_message(&last).contains("told about the garden and the bakery"), "the summary is in the prompt");
    assert!(tool_results(&last).iter().any(|r| r.contains("Sow the beans")), "the turn went on with its tool result");
    let lines = env.session_lines();
    assert!(
        lines.iter().any(|l| l["content"].as_str().is_some_and(|c| c.contains("about the garden"))),
        "nothing left the file"
    );
}

/// Issue 29: the loop guard's "I stopped: …" lines, archived by an older version, came back
/// under "Recalled Memory" and a weak model answered with them word for word.
#[test]
fn a_loop_guard_stop_in_an_old_archive_is_never_recalled() {
    let env = AgentEnv::new();
    let stop = "I stopped: I kept repeating the same tool call (read_file) without getting anything new. Tell me \
                how to go on, or rephrase the task.";
    let entries = [
        json!({"cursor": 1, "timestamp": "2026-04-03 10:00",
               "content": format!("[RAW] 2 messages\nUSER: where is the spare key?\nASSISTANT: {stop}")}),
        json!({"cursor": 2, "timestamp": "2026-04-04 09:30",
               "content": "- the spare key is under the blue flowerpot"}),
    ];
    env.write("memory/history.jsonl", &entries.iter().map(|e| format!("{e}\n")).collect::<String>());
    // Dream has seen both entries: they reach the model only through recall.
    env.write("memory/.dream_cursor", "2");
    env.llm.push(Reply::Text("Under the blue flowerpot.".into()));
    let out = env.agent("where is the spare key kept?");
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = last_user_message(&env.llm.requests()[0]);
    assert!(sent.contains("Recalled Memory") && sent.contains("blue flowerpot"), "{sent}\n{}", stderr(&out));
    assert!(!sent.contains("I stopped"), "{sent}");
}
