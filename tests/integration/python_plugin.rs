//! The Python example plugin (stdlib + msgpack, written from the protocol docs alone) is a
//! first-class tool plugin: callable through `oxibot tools call`.

use std::path::PathBuf;

use oxibot_tests::{TempDir, oxibot, stderr, stdout};

fn example() -> PathBuf {
    oxibot_tests::needs::python_module("msgpack", "msgpack");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/examples/word_count.py").canonicalize().unwrap()
}

#[test]
fn the_python_example_plugin_is_callable_through_oxibot_tools_call() {
    let home = TempDir::new("py-home");
    let ws = TempDir::new("py-ws");
    let config = serde_json::json!({
        "agents": {"defaults": {"workspace": ws.path()}},
        "plugins": [{"name": "pywords", "command": "python3", "args": [example()]}]
    });
    home.write("config.json", &config.to_string());
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "word_count", "--args", r#"{"text":"hello brave new world\nbye"}"#],
    );
    assert!(out.status.success(), "is the msgpack package installed (pip install msgpack)? stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "2 lines, 5 words, 25 characters");
}

#[test]
fn a_python_plugin_dropped_into_the_plugins_directory_is_discovered() {
    let home = TempDir::new("py-home");
    let ws = TempDir::new("py-ws");
    let target = home.path().join("plugins/oxibot-tool-pywords");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(example(), &target).unwrap();
    let out = oxibot(home.path(), ws.path(), &["tools", "call", "py_reverse", "--args", r#"{"text":"abc"}"#]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "cba");
}

#[test]
fn tools_list_names_an_unnamed_interpreted_plugin_by_what_it_announces() {
    let home = TempDir::new("py-home");
    let ws = TempDir::new("py-ws");
    let config = serde_json::json!({"plugins": [{"command": "python3", "args": [example()]}]});
    home.write("config.json", &config.to_string());
    let ws_arg = ws.path().display().to_string();
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--workspace", &ws_arg]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let line = text.lines().find(|l| l.contains("word_count")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with("pywords (python3)"), "{line}");
}
