//! Tool plugins that announce `static_manifest` start on their first call once the kernel
//! remembers their tools: a plain answer spawns no plugin, the same tools are still offered,
//! and the first call starts the plugin and gets its answer.

use std::process::Output;

use oxibot_tests::llm::Reply;
use oxibot_tests::{stderr, stdout};
use serde_json::{Value, json};

use crate::agent::AgentEnv;

/// Runs `oxibot agent -m message` with the info log of the kernel and its plugin host on stderr.
fn agent_logged(env: &AgentEnv, message: &str) -> Output {
    let output =
        env.command(&["agent", "-m", message]).env("RUST_LOG", "oxibot_kernel=info,oxibot_host=info").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

/// The plugins whose process started during a run, from the kernel's "plugin ready" lines.
fn started_plugins(output: &Output) -> Vec<String> {
    let log = strip_colours(&stderr(output));
    log.lines()
        .filter(|line| line.contains("plugin ready"))
        .filter_map(|line| line.split_whitespace().find_map(|word| word.strip_prefix("plugin=")))
        .map(str::to_owned)
        .collect()
}

fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}

fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_remembered_plugin_is_started_only_when_one_of_its_tools_is_called() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("first".into()));
    let first = agent_logged(&env, "hello");
    assert!(started_plugins(&first).contains(&"fs".to_owned()), "nothing is remembered yet: {}", stderr(&first));
    let offered = offered_tools(env.llm.requests().last().unwrap());
    assert!(offered.contains(&"read_file".to_owned()), "{offered:?}");

    env.llm.push(Reply::Text("second".into()));
    let second = agent_logged(&env, "hello again");
    assert_eq!(started_plugins(&second), Vec::<String>::new(), "a plain answer starts no plugin");
    assert_eq!(offered_tools(env.llm.requests().last().unwrap()), offered, "the remembered tools are offered the same");
    let listed = env.command(&["tools", "list"]).output().unwrap();
    let fs_line = stdout(&listed).lines().find(|line| line.starts_with("fs ")).map(str::to_owned).unwrap_or_default();
    assert!(fs_line.contains("idle") && fs_line.contains("read_file"), "{}", stdout(&listed));

    env.write("notes.txt", "a remembered plugin still reads files");
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), json!({"path": "notes.txt"}).to_string())]));
    env.llm.push(Reply::Text("read it".into()));
    let third = agent_logged(&env, "read my notes");
    assert_eq!(started_plugins(&third), ["fs"], "the first call starts its plugin, and only that one");
    let last = env.llm.requests().last().unwrap().to_string();
    assert!(last.contains("a remembered plugin still reads files"), "the call got its answer: {last}");
    assert!(stdout(&third).contains("read it"));
}
