//! Which tool names a plugin may take (issue 23, finding 8): a configured plugin offering
//! `exec` no longer takes it from the bundled, sandboxed shell plugin unless its entry says
//! `"replaces"`, and a tool whose description is too big is refused alone.

use oxibot_kernel::plugin::BUNDLED_TOOLS;
use oxibot_tests::{TempDir, bin, oxibot, stderr, stdout};
use serde_json::{Value, json};

/// A data dir whose config has one `plugins` entry: the stress plugin (tools `noop`, `echo`,
/// `misbehave`) offering one more tool named `extra`, with the entry's other keys `entry`.
fn home_with_plugin(extra: &str, entry: Value, env: Value) -> TempDir {
    let home = TempDir::new("claims-home");
    let mut env = env;
    env["OXIBOT_STRESS_EXTRA_TOOL"] = json!(extra);
    let mut plugin = json!({"name": "hostile", "command": bin("oxibot-stress-plugin"), "env": env});
    for (key, value) in entry.as_object().into_iter().flatten() {
        plugin[key] = value.clone();
    }
    home.write("config.json", &json!({"plugins": [plugin]}).to_string());
    home
}

/// `oxibot tools list --json` in `ws`, by plugin name.
fn tools_list(home: &TempDir, ws: &TempDir) -> Vec<Value> {
    let ws_arg = ws.path().display().to_string();
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--json", "--workspace", &ws_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out)).unwrap().as_array().unwrap().clone()
}

fn plugin<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no plugin {name} in {list:?}"))
}

fn has_tool(plugin: &Value, tool: &str) -> bool {
    plugin["tools"].as_array().unwrap().iter().any(|t| t == tool)
}

/// `oxibot tools call exec` printing `echo bundled` as the real shell would.
fn exec_output(home: &TempDir, ws: &TempDir) -> String {
    let ws_arg = ws.path().display().to_string();
    let args = r#"{"command":"echo bundled"}"#;
    let out = oxibot(home.path(), ws.path(), &["tools", "call", "exec", "--workspace", &ws_arg, "--args", args]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn a_configured_plugin_offering_exec_is_refused_that_tool_and_the_bundled_shell_keeps_it() {
    let home = home_with_plugin("exec", json!({}), json!({}));
    let ws = TempDir::new("claims-ws");
    let list = tools_list(&home, &ws);
    let shell = plugin(&list, "shell");
    assert!(shell["state"] == "running" && has_tool(shell, "exec"), "{shell}");
    let hostile = plugin(&list, "hostile");
    assert_eq!(hostile["state"], "running", "its other tools stay: {hostile}");
    assert!(!has_tool(hostile, "exec") && has_tool(hostile, "echo"), "{hostile}");
    let refused = hostile["refused"].to_string();
    assert!(refused.contains("bundled plugin 'shell'") && refused.contains(r#"\"replaces\": [\"exec\"]"#), "{refused}");
    assert_eq!(exec_output(&home, &ws).trim(), "bundled", "the call reaches the bundled shell plugin");
}

#[test]
fn a_plugin_dropped_into_the_plugins_directory_cannot_take_read_file() {
    let home = TempDir::new("claims-home");
    // Unconfined, so the script may start the stress plugin from the build directory.
    home.write("config.json", r#"{"tools": {"restrictToWorkspace": false}}"#);
    let script =
        format!("#!/bin/sh\nOXIBOT_STRESS_EXTRA_TOOL=read_file exec {}\n", bin("oxibot-stress-plugin").display());
    let path = home.write("plugins/dropped", &script);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ws = TempDir::new("claims-ws");
    let list = tools_list(&home, &ws);
    assert!(has_tool(plugin(&list, "fs"), "read_file"), "{list:?}");
    let dropped = plugin(&list, "dropped");
    assert!(!has_tool(dropped, "read_file"), "{dropped}");
    assert!(dropped["refused"].to_string().contains("bundled plugin 'fs'"), "{dropped}");
}

#[test]
fn a_configured_plugin_whose_entry_says_replaces_takes_the_bundled_tool() {
    let home = home_with_plugin("exec", json!({"replaces": ["exec"]}), json!({}));
    let ws = TempDir::new("claims-ws");
    let list = tools_list(&home, &ws);
    let hostile = plugin(&list, "hostile");
    assert!(has_tool(hostile, "exec") && hostile["refused"] == json!([]), "{hostile}");
    let shell = plugin(&list, "shell");
    assert_eq!(shell["state"], "failed", "the shell plugin has nothing left to offer: {shell}");
    assert!(shell["reason"].as_str().unwrap().contains("'hostile'"), "{shell}");
    assert_eq!(exec_output(&home, &ws).trim(), "", "the stress plugin's extra tool answers, not the shell");
}

#[test]
fn a_built_in_tool_name_is_refused_to_a_plugin() {
    let home = home_with_plugin("cron", json!({"replaces": ["cron"]}), json!({}));
    let ws = TempDir::new("claims-ws");
    let hostile = plugin(&tools_list(&home, &ws), "hostile").clone();
    assert!(!has_tool(&hostile, "cron"), "{hostile}");
    assert!(hostile["refused"].to_string().contains("built-in tool of the kernel"), "{hostile}");
}

#[test]
fn a_tool_with_a_200_kb_description_is_refused_and_the_plugins_other_tools_work() {
    let home = home_with_plugin("wordy", json!({}), json!({"OXIBOT_STRESS_EXTRA_DESCRIPTION_BYTES": "200000"}));
    let ws = TempDir::new("claims-ws");
    let hostile = plugin(&tools_list(&home, &ws), "hostile").clone();
    assert_eq!(hostile["state"], "running", "{hostile}");
    assert!(!has_tool(&hostile, "wordy") && has_tool(&hostile, "echo"), "{hostile}");
    let refused = hostile["refused"].to_string();
    assert!(refused.contains("'wordy' has a description of 200000 bytes") && refused.contains("4096"), "{refused}");
}

#[test]
fn the_reserved_list_names_every_tool_the_bundled_plugins_offer() {
    let home = TempDir::new("claims-home");
    let ws = TempDir::new("claims-ws");
    let list = tools_list(&home, &ws);
    for (name, tools) in BUNDLED_TOOLS {
        let mut offered: Vec<String> =
            plugin(&list, name)["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect();
        offered.sort();
        let mut listed: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
        listed.sort();
        assert_eq!(offered, listed, "plugin {name}");
    }
    let bundled: Vec<&str> =
        list.iter().filter(|p| p["origin"] == "bundled").map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(bundled.len(), BUNDLED_TOOLS.len(), "every bundled tool plugin is in BUNDLED_TOOLS: {bundled:?}");
}
