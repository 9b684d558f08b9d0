//! Tool calls a model wrote as text because the server did not parse them (issue 29, item 6):
//! through `oxibot agent` and the scripted LLM as the `custom` provider, Qwen/Hermes markers and
//! Llama's python tag become calls, a reply that is one fenced JSON call of an offered tool
//! becomes a call, and JSON shown among other text stays an answer.

use oxibot_tests::llm::Reply;
use oxibot_tests::{stderr, stdout};
use serde_json::{Value, json};

use crate::agent::AgentEnv;

/// The tool results the session stored, in order.
fn tool_results(env: &AgentEnv) -> Vec<String> {
    let lines: Vec<Value> = env.session_lines();
    lines.iter().filter(|l| l["role"] == "tool").map(|l| l["content"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_call_in_qwen_markers_runs_and_never_reaches_the_user() {
    for stream in [false, true] {
        let env = AgentEnv::with_defaults(json!({"stream": stream}));
        env.write("notes.md", "buy oat milk\n");
        env.llm.push(Reply::Text(
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>".into(),
        ));
        env.llm.push(Reply::Text("Your note says: buy oat milk.".into()));
        let out = env.agent("what does my note say?");
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "Your note says: buy oat milk.", "stream {stream}");
        let results = tool_results(&env);
        assert!(results.len() == 1 && results[0].contains("buy oat milk"), "{results:?}");
        let second = &env.llm.requests()[1];
        let assistant = &second["messages"].as_array().unwrap()[2];
        assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file", "{assistant}");
    }
}

#[test]
fn a_llama_python_tag_call_runs() {
    let env = AgentEnv::new();
    env.write("notes.md", "water the ferns\n");
    env.llm.push(Reply::Text(
        "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"notes.md\"}}<|eom_id|>".into(),
    ));
    env.llm.push(Reply::Text("Water the ferns.".into()));
    let out = env.agent("what does my note say?");
    assert_eq!(stdout(&out).trim(), "Water the ferns.", "{}", stderr(&out));
    assert!(tool_results(&env)[0].contains("water the ferns"));
}

#[test]
fn a_fenced_json_call_runs_only_when_it_is_the_whole_reply() {
    let env = AgentEnv::new();
    env.write("notes.md", "call the vet\n");
    let fenced = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n```";
    env.llm.push(Reply::Text(fenced.into()));
    env.llm.push(Reply::Text("Call the vet.".into()));
    let out = env.agent("what does my note say?");
    assert_eq!(stdout(&out).trim(), "Call the vet.", "{}", stderr(&out));

    let shown = format!("A call to read a file looks like this:\n\n{fenced}");
    env.llm.push(Reply::Text(shown.clone()));
    let out = env.agent("how do tool calls look?");
    assert_eq!(stdout(&out).trim(), shown, "JSON among other text is an answer");
    assert_eq!(tool_results(&env).len(), 1);
}

#[test]
fn text_calls_can_be_turned_off_for_the_custom_provider() {
    let env = AgentEnv::new();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("config.json")).unwrap()).unwrap();
    config["providers"]["custom"]["textToolCalls"] = json!(false);
    env.write_config(&config);
    let text = "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}</tool_call>";
    env.llm.push(Reply::Text(text.into()));
    let out = env.agent("show me a call");
    assert_eq!(stdout(&out).trim(), text, "{}", stderr(&out));
}

/// Issue 29: a tool's description is what a small model goes by. Every tool `oxibot agent`
/// offers is called with the arguments its description shows, and none may refuse them; a
/// new tool fails this test until it has its row here.
#[test]
fn every_offered_tool_accepts_the_arguments_its_description_shows() {
    let env = AgentEnv::with_defaults(json!({"maxToolIterations": 3}));
    env.write("notes.md", "one\ntwo\nthree\n");
    env.llm.push(Reply::Text("hi".into()));
    assert!(env.agent("hello").status.success());
    let offered: Vec<(String, String)> = env.llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            (f["name"].as_str().unwrap().to_owned(), f["description"].as_str().unwrap().to_owned())
        })
        .collect();
    // (tool, arguments as its description shows them, words of the description they follow)
    let rows: Vec<(&str, Value, &str)> = vec![
        ("read_file", json!({"path": "notes.md", "offset": 2, "limit": 1}), "(offset, limit)"),
        ("write_file", json!({"path": "new.md", "content": "hello"}), "Create or overwrite a whole file"),
        ("edit_file", json!({"path": "notes.md", "old_text": "two", "new_text": "2"}), "Replace old_text"),
        ("edit_file", json!({"path": "made.md", "old_text": "", "new_text": "x"}), "Empty old_text creates"),
        ("list_dir", json!({"path": "."}), "List a directory"),
        ("glob", json!({"pattern": "*.md"}), "'*.py'"),
        ("grep", json!({"pattern": "thr+ee", "output_mode": "content"}), "output_mode: files_with_matches"),
        ("exec", json!({"command": "echo hi"}), "Run `sh -c`"),
        ("memory", json!({"action": "store", "content": "likes tea", "category": "core"}), "store content"),
        ("memory", json!({"action": "recall", "query": "tea"}), "recall query"),
        ("memory", json!({"action": "list"}), "list"),
        ("memory", json!({"action": "count"}), "count"),
    ];
    // Tools that reach the internet cannot succeed here, and a helper runs a model turn of its
    // own (see `automation`): they are not called.
    let network = ["web_fetch", "web_search", "spawn"];
    for (name, description) in &offered {
        let shown = rows.iter().filter(|(tool, _, _)| tool == name).collect::<Vec<_>>();
        assert!(!shown.is_empty() || network.contains(&name.as_str()), "no row for {name}: {description}");
        for (_, _, words) in shown {
            assert!(description.contains(words), "{name}'s description no longer says {words:?}: {description}");
        }
    }
    let calls: Vec<(String, String)> =
        rows.iter().map(|(tool, args, _)| (tool.to_string(), args.to_string())).collect();
    env.llm.push(Reply::ToolCalls(calls));
    env.llm.push(Reply::Text("done".into()));
    let out = env.agent("use every tool");
    assert!(out.status.success(), "{}", stderr(&out));
    let results = tool_results(&env);
    for ((tool, args, _), result) in rows.iter().zip(&results) {
        assert!(!result.contains("[The tool call failed"), "{tool} {args} was refused: {result}");
    }
}
