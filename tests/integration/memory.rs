//! Memory end to end through the real `oxibot` binary and the scripted LLM: consolidation
//! into `memory/history.jsonl`, `/new`, Dream's two phases and its git commits, restore, and
//! kills in the middle of it all.

use std::process::{Command, Stdio};
use std::time::Duration;

use oxibot_kernel::memory::tokens::exact_tokens;
use oxibot_tests::llm::{Reply, system_prompt};
use oxibot_tests::procs::{sigkill, wait_until};
use oxibot_tests::{stderr, stdout};
use serde_json::{Value, json};

use super::agent::AgentEnv;

/// Words of the summariser's system prompt (templates/agent/consolidate.md).
const SUMMARISER: &str = "keep the archive";
/// Words of Dream's analysis prompt (templates/agent/dream_phase1.md).
const DREAM_PHASE1: &str = "maintain the long-term memory";
/// Words of Dream's editing prompt (templates/agent/dream_phase2.md).
const DREAM_PHASE2: &str = "apply a list of findings";

fn history(env: &AgentEnv) -> Vec<Value> {
    let text = std::fs::read_to_string(env.workspace.join("memory/history.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("unparsable history line {l:?}: {e}")))
        .collect()
}

fn read(env: &AgentEnv, relative: &str) -> String {
    std::fs::read_to_string(env.workspace.join(relative)).unwrap_or_default()
}

fn git(env: &AgentEnv, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(&env.workspace).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Requests whose system prompt contains `marker`.
fn requests_for(env: &AgentEnv, marker: &str) -> Vec<Value> {
    env.llm.requests().into_iter().filter(|r| system_prompt(r).contains(marker)).collect()
}

/// Requests of ordinary turns (not the summariser, not Dream).
fn turn_requests(env: &AgentEnv) -> Vec<Value> {
    let markers = [SUMMARISER, DREAM_PHASE1, DREAM_PHASE2];
    env.llm.requests().into_iter().filter(|r| !markers.iter().any(|m| system_prompt(r).contains(m))).collect()
}

/// Exact tokens of a request's messages and tool definitions.
fn prompt_tokens(request: &Value) -> usize {
    let messages: usize =
        request["messages"].as_array().unwrap().iter().map(|m| exact_tokens(&m["content"].to_string()) + 4).sum();
    messages + exact_tokens(&request["tools"].to_string())
}

fn long_message(turn: usize) -> String {
    format!("turn {turn}: {}", "Our garden plan puts tomatoes by the south wall and basil beside them. ".repeat(40))
}

#[test]
fn a_long_conversation_is_archived_and_every_prompt_fits_the_window() {
    let env = AgentEnv::with_defaults(json!({"contextWindowTokens": 9000, "maxTokens": 500}));
    for n in 0..30 {
        env.llm.route(SUMMARISER, Reply::Text(format!("- fact number {n}")));
    }
    for turn in 0..10 {
        env.llm.push(Reply::Text(format!("noted {turn}")));
        let out = env.agent(&long_message(turn));
        assert!(out.status.success(), "turn {turn}: {}", stderr(&out));
    }
    for request in turn_requests(&env) {
        assert!(prompt_tokens(&request) <= 9000 - 500, "a prompt of {} tokens", prompt_tokens(&request));
    }
    let entries = history(&env);
    assert!(!entries.is_empty(), "nothing was archived");
    let cursors: Vec<u64> = entries.iter().map(|e| e["cursor"].as_u64().unwrap()).collect();
    assert_eq!(cursors, (1..=entries.len() as u64).collect::<Vec<_>>(), "cursors count up from 1");
    assert_eq!(read(&env, "memory/.cursor").trim(), entries.len().to_string());
    let lines = env.session_lines();
    let last_consolidated = lines[0]["last_consolidated"].as_u64().unwrap();
    assert_eq!(Some(last_consolidated), entries.last().unwrap()["through"].as_u64());
    assert_eq!(lines[(last_consolidated + 1) as usize]["role"], "user", "the archive ends at a user turn");
    assert_eq!(lines.len() - 1, 20, "the session file keeps every message");
    let last = turn_requests(&env).pop().unwrap();
    let sent = last["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(sent.contains("# Recent History") && sent.contains("- fact number"), "summaries reach the prompt");
}

#[test]
fn slash_new_archives_the_whole_conversation_before_starting_afresh() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Hi Sam".into()));
    assert!(env.agent("my name is Sam").status.success());
    env.llm.route(SUMMARISER, Reply::Text("- user is called Sam".into()));
    let out = env.agent("/new");
    assert!(stdout(&out).contains("Started a new conversation"), "{}", stdout(&out));
    let entries = history(&env);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["content"], "- user is called Sam");
    let summariser = requests_for(&env, SUMMARISER);
    assert!(summariser[0]["messages"][1]["content"].as_str().unwrap().contains("USER: my name is Sam"));
    assert!(
        summariser[0].get("tools").is_none_or(|t| t.as_array().is_none_or(Vec::is_empty)),
        "a plain call, no tools"
    );
    assert_eq!(env.session_lines()[0]["last_consolidated"], 2);

    env.llm.push(Reply::Text("Hello again".into()));
    assert!(env.agent("what's my name?").status.success());
    let request = turn_requests(&env).pop().unwrap();
    assert_eq!(request["messages"].as_array().unwrap().len(), 2, "only the system prompt and the new message");
    assert!(request["messages"][1]["content"].as_str().unwrap().contains("- user is called Sam"));
}

#[test]
fn a_failed_summary_is_archived_raw_and_no_message_is_lost() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Noted, the code is 4417".into()));
    assert!(env.agent("remember the door code 4417").status.success());
    for _ in 0..4 {
        env.llm.route(SUMMARISER, Reply::Status { code: 500, retry_after: None, body: "boom".into() });
    }
    assert!(env.agent("/new").status.success());
    let entries = history(&env);
    assert_eq!(entries.len(), 1);
    let content = entries[0]["content"].as_str().unwrap();
    assert!(content.starts_with("[RAW] 2 messages"), "{content}");
    assert!(
        content.contains("USER: remember the door code 4417") && content.contains("ASSISTANT: Noted, the code is 4417")
    );
}

/// A workspace with a hand-written USER.md and two history entries Dream has not seen.
fn dream_env() -> AgentEnv {
    let env = AgentEnv::new();
    env.write("USER.md", "# User\n\n- Name: Sam\n");
    env.write("SOUL.md", "# Soul\n\nBe brief.\n");
    env.write("memory/MEMORY.md", "# Memory\n");
    let entries = [
        json!({"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "- Sam moved to Lyon"}),
        json!({"cursor": 2, "timestamp": "2026-04-04 09:30", "content": "- Sam asked for the weather in Lyon"}),
    ];
    env.write("memory/history.jsonl", &entries.iter().map(|e| format!("{e}\n")).collect::<String>());
    env
}

fn edit_call(path: &str, old: &str, new: &str) -> (String, String) {
    ("edit_file".to_owned(), json!({"path": path, "old_text": old, "new_text": new}).to_string())
}

#[test]
fn dream_edits_the_memory_files_commits_and_restore_undoes_it() {
    let env = dream_env();
    env.llm.route(DREAM_PHASE1, Reply::Text("[USER] lives in Lyon".into()));
    env.llm.route(
        DREAM_PHASE2,
        Reply::ToolCalls(vec![edit_call("USER.md", "- Name: Sam\n", "- Name: Sam\n- Lives in Lyon\n")]),
    );
    env.llm.route(DREAM_PHASE2, Reply::Text("Added the location.".into()));
    let out = env.agent("/dream");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("2 history entries and changed 1 memory file(s)"), "{}", stdout(&out));
    assert_eq!(read(&env, "USER.md"), "# User\n\n- Name: Sam\n- Lives in Lyon\n");
    assert_eq!(read(&env, "memory/.dream_cursor").trim(), "2");

    let phase1 = &requests_for(&env, DREAM_PHASE1)[0];
    let input = phase1["messages"][1]["content"].as_str().unwrap();
    assert!(input.contains("[2026-04-03 10:00] - Sam moved to Lyon") && input.contains("## Current USER.md"));
    let phase2 = &requests_for(&env, DREAM_PHASE2)[0];
    let offered: Vec<&str> =
        phase2["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(offered.len(), 3, "{offered:?}");
    assert!(["read_file", "edit_file", "write_file"].iter().all(|t| offered.contains(t)));

    let log = git(&env, &["log", "--format=%s"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects[0], "dream: 2026-04-04 09:30, 1 change(s)", "{log}");
    let sha = git(&env, &["rev-parse", "--short", "HEAD"]).trim().to_owned();

    let shown = stdout(&env.agent("/dream-log"));
    assert!(shown.contains("+- Lives in Lyon") && shown.contains("dream: 2026-04-04"), "{shown}");
    let listed = stdout(&env.agent("/dream-restore"));
    assert!(listed.contains(&sha), "{listed}");
    let restored = stdout(&env.agent(&format!("/dream-restore {sha}")));
    assert!(restored.contains("Restored"), "{restored}");
    assert_eq!(read(&env, "USER.md"), "# User\n\n- Name: Sam\n");
    assert!(git(&env, &["log", "-1", "--format=%s"]).starts_with("restore:"));
    assert_eq!(git(&env, &["status", "--porcelain"]), "", "the restore is committed and nothing else shows");
}

/// Runs `/dream` with a scripted Dream that adds "Answer in French." to SOUL.md.
fn dream_that_soul_answers_in_french(env: &AgentEnv) {
    env.llm.route(DREAM_PHASE1, Reply::Text("[SOUL] answer in French".into()));
    env.llm.route(
        DREAM_PHASE2,
        Reply::ToolCalls(vec![edit_call("SOUL.md", "Be brief.\n", "Be brief.\nAnswer in French.\n")]),
    );
    env.llm.route(DREAM_PHASE2, Reply::Text("done".into()));
    assert!(env.agent("/dream").status.success());
}

#[test]
fn the_memory_command_shows_and_restores_dream_changes() {
    let env = dream_env();
    dream_that_soul_answers_in_french(&env);
    let log = env.command(&["memory", "log"]).output().unwrap();
    assert!(log.status.success(), "{}", stderr(&log));
    let first = stdout(&log).lines().next().unwrap_or_default().to_owned();
    assert!(first.contains("dream: 2026-04-04 09:30, 1 change(s)"), "{}", stdout(&log));
    let sha = first.split_whitespace().next().unwrap().to_owned();
    let show = stdout(&env.command(&["memory", "show", &sha]).output().unwrap());
    assert!(show.contains("+Answer in French."), "{show}");
    let restore = env.command(&["memory", "restore", &sha]).output().unwrap();
    assert!(restore.status.success(), "{}", stderr(&restore));
    assert_eq!(read(&env, "SOUL.md"), "# Soul\n\nBe brief.\n");
    let bad = env.command(&["memory", "show", "zzzz"]).output().unwrap();
    assert!(!bad.status.success() && stderr(&bad).contains("zzzz"), "{}", stderr(&bad));
}

// Issue 23, finding 9: an injected `rm -rf ./* ./.git` deleted the memory files and their git
// history, which was their only backup.
#[test]
fn the_memory_files_and_their_history_come_back_after_the_whole_workspace_is_deleted() {
    let env = dream_env();
    dream_that_soul_answers_in_french(&env);
    let history = git(&env, &["log", "--format=%H %s"]);
    assert!(history.lines().next().unwrap().contains(" dream: "), "{history}");
    let tracked = ["SOUL.md", "USER.md", "memory/MEMORY.md"];
    let before: Vec<String> = tracked.iter().map(|file| read(&env, file)).collect();
    assert!(before[0].contains("Answer in French."));

    // What `rm -rf ./* ./.git` run in the workspace leaves.
    for entry in std::fs::read_dir(&env.workspace).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { std::fs::remove_dir_all(&path).unwrap() } else { std::fs::remove_file(&path).unwrap() }
    }

    let log = env.command(&["memory", "log"]).output().unwrap();
    assert!(log.status.success(), "{}", stderr(&log));
    assert!(stdout(&log).contains("dream: 2026-04-04 09:30, 1 change(s)"), "{}", stdout(&log));
    assert!(stderr(&log).contains("re-created it from the copy in") && stderr(&log).contains("oxibot memory restore"));
    let restore = env.command(&["memory", "restore"]).output().unwrap();
    assert!(restore.status.success(), "{}", stderr(&restore));
    assert!(stdout(&restore).contains("Put back SOUL.md, USER.md, memory/MEMORY.md"), "{}", stdout(&restore));
    let after: Vec<String> = tracked.iter().map(|file| read(&env, file)).collect();
    assert_eq!(after, before);
    assert_eq!(git(&env, &["log", "--format=%H %s"]), history, "the whole history is back");
    assert_eq!(git(&env, &["status", "--porcelain"]), "");
    let mirrors = std::fs::read_dir(env.home.path().join("memory-mirror")).unwrap().count();
    assert_eq!(mirrors, 1, "one bare copy in the data dir");
}

#[test]
fn dream_refuses_edits_outside_its_files_and_still_advances_its_cursor() {
    let env = dream_env();
    env.write("AGENTS.md", "# Agents\n");
    env.llm.route(DREAM_PHASE1, Reply::Text("[MEMORY] garden plan".into()));
    env.llm.route(
        DREAM_PHASE2,
        Reply::ToolCalls(vec![
            edit_call("AGENTS.md", "# Agents\n", "# Hijacked\n"),
            ("write_file".into(), json!({"path": "notes.txt", "content": "x"}).to_string()),
            ("exec".into(), json!({"command": "touch pwned"}).to_string()),
        ]),
    );
    env.llm.route(DREAM_PHASE2, Reply::Text("Could not apply.".into()));
    let out = env.agent("/dream");
    assert!(stdout(&out).contains("changed 0 memory file(s)"), "{}", stdout(&out));
    assert_eq!(read(&env, "AGENTS.md"), "# Agents\n");
    assert!(!env.workspace.join("notes.txt").exists() && !env.workspace.join("pwned").exists());
    let second = &requests_for(&env, DREAM_PHASE2)[1];
    let results: Vec<String> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        results[0].contains("may only edit")
            && results[1].contains("may only create a skill")
            && results[2].contains("not available to Dream"),
        "{results:?}"
    );
    assert_eq!(read(&env, "memory/.dream_cursor").trim(), "2");
    assert_eq!(git(&env, &["log", "--format=%s"]).lines().count(), 1, "only the init commit");
}

#[test]
fn a_kernel_killed_while_summarising_loses_nothing_and_archives_once_after_restart() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("ok".into()));
    assert!(env.agent("the spare key is under the blue pot").status.success());
    env.llm.route(SUMMARISER, Reply::SlowFirstToken { delay_ms: 20_000, text: "- never arrives".into() });
    let mut kernel = env.command(&["agent", "-m", "/new"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(15), || !requests_for(&env, SUMMARISER).is_empty()),
        "the summariser was never called"
    );
    sigkill(kernel.id());
    kernel.wait().unwrap();
    assert!(history(&env).is_empty());
    assert_eq!(env.session_lines()[0]["last_consolidated"], 0);

    env.llm.route(SUMMARISER, Reply::Text("- spare key under the blue pot".into()));
    assert!(env.agent("/new").status.success());
    let entries = history(&env);
    assert_eq!(entries.len(), 1, "archived exactly once: {entries:?}");
    assert!(entries[0]["content"].as_str().unwrap().contains("blue pot"));
    assert_eq!(env.session_lines()[0]["last_consolidated"], 2);
    assert_eq!(env.session_lines().len(), 3, "both messages are still in the session file");
}

#[test]
fn a_kernel_killed_during_dream_leaves_loadable_files_and_the_batch_for_the_next_run() {
    let env = dream_env();
    env.llm.route(DREAM_PHASE1, Reply::SlowFirstToken { delay_ms: 20_000, text: "[SKIP]".into() });
    let mut kernel =
        env.command(&["agent", "-m", "/dream"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(15), || !requests_for(&env, DREAM_PHASE1).is_empty()),
        "Dream never started"
    );
    sigkill(kernel.id());
    kernel.wait().unwrap();
    assert_eq!(read(&env, "memory/.dream_cursor").trim(), "", "the batch is not marked processed");
    assert_eq!(history(&env).len(), 2, "history intact");

    env.llm.route(DREAM_PHASE1, Reply::Text("[USER] lives in Lyon".into()));
    env.llm.route(
        DREAM_PHASE2,
        Reply::ToolCalls(vec![edit_call("USER.md", "- Name: Sam\n", "- Name: Sam\n- Lives in Lyon\n")]),
    );
    env.llm.route(DREAM_PHASE2, Reply::Text("done".into()));
    let out = env.agent("/dream");
    assert!(stdout(&out).contains("changed 1 memory file(s)"), "{}", stdout(&out));
    assert_eq!(read(&env, "memory/.dream_cursor").trim(), "2");
    assert_eq!(git(&env, &["log", "--format=%s"]).lines().filter(|l| l.starts_with("dream:")).count(), 1);
}

/// Issue 29: the loop guard's stop came back as "memory" and a weak model answered with it.
#[test]
fn a_loop_guard_stop_is_marked_in_the_session_and_left_out_of_the_summary() {
    let env = AgentEnv::with_defaults(json!({"maxToolIterations": 10}));
    env.write("notes.md", "the note\n");
    env.llm.push(Reply::Text("A fine name for a dog.".into()));
    assert!(env.agent("my dog is called Pixel").status.success());
    for _ in 0..3 {
        env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    }
    let out = env.agent("read my notes");
    assert!(stdout(&out).starts_with("I stopped"), "{}", stdout(&out));
    let lines = env.session_lines();
    let stop = lines.iter().rev().find(|l| l["role"] == "assistant").unwrap();
    assert_eq!(stop["_kernel_text"], true, "{stop}");

    env.llm.route(SUMMARISER, Reply::Text("- user's dog is called Pixel".into()));
    assert!(env.agent("/new").status.success());
    let input = requests_for(&env, SUMMARISER)[0]["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(input.contains("USER: my dog is called Pixel"), "{input}");
    assert!(!input.contains("I stopped") && !input.contains("not run again"), "{input}");
}

/// Issue 29: "(nothing notable)" and the summariser's instructions parroted back were
/// archived and indexed as memory.
#[test]
fn a_summary_of_nothing_or_of_its_own_instructions_is_not_archived() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Hi!".into()));
    assert!(env.agent("hello").status.success());
    env.llm.route(SUMMARISER, Reply::Text("- (nothing notable)".into()));
    assert!(env.agent("/new").status.success());
    assert!(history(&env).is_empty(), "{:?}", history(&env));
    assert_eq!(env.session_lines()[0]["last_consolidated"], 2, "the slice is done with all the same");

    env.llm.push(Reply::Text("Noted.".into()));
    assert!(env.agent("the door code is 4417").status.success());
    let parroted = "- what the user said about themselves: name, location, work, habits, preferences, plans;\n\
                    - Answer with the bullet list only.";
    env.llm.route(SUMMARISER, Reply::Text(parroted.into()));
    assert!(env.agent("/new").status.success());
    let entries = history(&env);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let content = entries[0]["content"].as_str().unwrap();
    assert!(content.starts_with("[RAW]") && content.contains("4417") && !content.contains("bullet"), "{content}");
}

/// Issue 29: Dream's phase 1 "found" its prompt's own example fact.
#[test]
fn dream_drops_a_finding_that_repeats_its_prompts_example() {
    let env = dream_env();
    env.llm.route(DREAM_PHASE1, Reply::Text("[USER] lives in <new city> (not <old city>)".into()));
    let out = env.agent("/dream");
    assert!(out.status.success(), "{}", stderr(&out));
    let phase1 = system_prompt(&requests_for(&env, DREAM_PHASE1)[0]);
    for real in ["Tokyo", "Osaka", "Luna"] {
        assert!(!phase1.contains(real), "an example a real user could have: {real}");
    }
    assert!(requests_for(&env, DREAM_PHASE2).is_empty(), "nothing left to apply");
    assert_eq!(read(&env, "USER.md"), "# User\n\n- Name: Sam\n");
    assert_eq!(read(&env, "memory/.dream_cursor").trim(), "2");
}

/// Issue 29: Dream wrote `skills/memory/MEMORY.md` and said "made 2 change(s)" while the
/// memory history recorded none.
#[test]
fn dream_creates_a_skill_only_as_a_skill_file_and_reports_what_git_recorded() {
    let env = dream_env();
    env.llm.route(DREAM_PHASE1, Reply::Text("[SKILL] weekly-digest: sum up the weekly reports".into()));
    let skill = "---\nname: weekly-digest\ndescription: Sum up the weekly reports\n---\n1. Read them.\n";
    env.llm.route(
        DREAM_PHASE2,
        Reply::ToolCalls(vec![
            ("write_file".into(), json!({"path": "skills/memory/MEMORY.md", "content": "- Sam"}).to_string()),
            ("write_file".into(), json!({"path": "skills/weekly-digest/SKILL.md", "content": skill}).to_string()),
        ]),
    );
    env.llm.route(DREAM_PHASE2, Reply::Text("Created the skill.".into()));
    let out = env.agent("/dream");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!env.workspace.join("skills/memory").exists());
    assert_eq!(read(&env, "skills/weekly-digest/SKILL.md"), skill);
    assert!(stdout(&out).contains("changed 0 memory file(s) and created 1 skill(s)."), "{}", stdout(&out));
    assert_eq!(git(&env, &["log", "--format=%s"]).lines().count(), 1, "only the init commit");
}
