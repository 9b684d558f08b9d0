//! `oxibot tools list` and `oxibot tools call`, run as a user runs them.

use oxibot_tests::{TempDir, bin, oxibot, stderr, stdout};

/// `--workspace` pointing at `ws`.
fn ws_arg(ws: &TempDir) -> String {
    ws.path().display().to_string()
}

// Issue 24, item 13: without a config, `tools call` worked in the current directory while
// `status`, `cron` and `memory` used `$OXIBOT_HOME/workspace`, and `status` wrote templates there.
#[test]
fn without_a_config_every_command_uses_the_home_workspace_and_status_writes_nothing() {
    let home = TempDir::new("cli-home");
    let cwd = TempDir::new("cli-cwd");
    let workspace = home.path().join("workspace");
    let status = oxibot(home.path(), cwd.path(), &["status"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let report = stdout(&status);
    let line = report.lines().find(|line| line.starts_with("workspace:")).unwrap_or_default().to_owned();
    assert!(line.contains(&workspace.display().to_string()) && line.contains("missing"), "{report}");
    assert!(!workspace.exists(), "status created the workspace: {report}");
    let args = r#"{"path":"note.txt","content":"written by tools call"}"#;
    let call = oxibot(home.path(), cwd.path(), &["tools", "call", "write_file", "--args", args]);
    assert!(call.status.success(), "{}", stderr(&call));
    assert!(!cwd.path().join("note.txt").exists(), "tools call wrote into the current directory");
    assert_eq!(std::fs::read_to_string(workspace.join("note.txt")).unwrap(), "written by tools call");
    let memory = oxibot(home.path(), cwd.path(), &["memory", "log"]);
    assert!(memory.status.success(), "{}", stderr(&memory));
    let again = stdout(&oxibot(home.path(), cwd.path(), &["status"]));
    assert!(again.contains(&format!("workspace: {}\n", workspace.display())), "{again}");
}

#[test]
fn tools_call_read_file_prints_the_file_from_the_workspace() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    ws.write("README.md", "# hello\nthis is the readme\n");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "read_file", "--workspace", &ws_arg(&ws), "--args", r#"{"path":"README.md"}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains("this is the readme"), "{}", stdout(&out));
}

#[test]
fn tools_call_exec_prints_the_command_output() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "exec", "--workspace", &ws_arg(&ws), "--args", r#"{"command":"echo hi"}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "hi");
}

#[test]
fn tools_call_with_a_tool_error_exits_1_and_prints_the_error() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "read_file", "--workspace", &ws_arg(&ws), "--args", r#"{"path":"missing.md"}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Error"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
}

#[test]
fn paths_outside_the_workspace_are_refused_by_default() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "read_file", "--workspace", &ws_arg(&ws), "--args", r#"{"path":"../../etc/passwd"}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("outside the workspace"), "{}", stderr(&out));
}

#[test]
fn workspace_flag_chooses_where_relative_paths_resolve() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    ws.write("only-here.txt", "found me\n");
    let elsewhere = TempDir::new("cli-cwd");
    let ws_arg = ws.path().display().to_string();
    let out = oxibot(
        home.path(),
        elsewhere.path(),
        &["tools", "call", "read_file", "--workspace", &ws_arg, "--args", r#"{"path":"only-here.txt"}"#],
    );
    assert!(stdout(&out).contains("found me"), "{}", stderr(&out));
}

#[test]
fn invalid_json_arguments_are_rejected_before_any_plugin_starts() {
    let home = TempDir::new("cli-home");
    let out = oxibot(home.path(), home.path(), &["tools", "call", "read_file", "--args", "{path: x}"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--args is not valid JSON"), "{}", stderr(&out));
}

#[test]
fn tools_list_shows_each_plugin_with_state_pid_tools_and_failure_reason() {
    let home = TempDir::new("cli-home");
    let config = serde_json::json!({"plugins": [{"name": "broken", "command": bin("oxibot-stress-plugin"), "env": {"OXIBOT_STRESS_STARTUP": "wrong_version"}}]});
    home.write("config.json", &config.to_string());
    let ws = TempDir::new("cli-ws");
    let ws_arg = ws.path().display().to_string();
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--workspace", &ws_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |name: &str| {
        text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} line in:\n{text}")).to_owned()
    };
    assert!(line("fs ").contains("running") && line("fs ").contains("read_file, write_file"), "{text}");
    assert!(line("shell ").contains("running") && line("shell ").contains("exec"), "{text}");
    let pid: u32 = line("fs ").split_whitespace().nth(2).unwrap().parse().expect("fs line must show a pid");
    assert!(pid > 1);
    assert!(line("broken ").contains("failed"), "{text}");
    assert!(text.contains("reason: restarted 5 times") && text.contains("protocol version 999"), "{text}");
}

/// Issue 27, finding 7: one plugin that could not start cost every command its restarts
/// (seconds) and a dozen warning lines.
#[test]
fn a_plugin_that_failed_to_start_is_not_tried_again_by_the_next_commands_until_its_config_changes() {
    let home = TempDir::new("cli-home");
    let write_config = |env: serde_json::Value| {
        let plugin = serde_json::json!({"name": "broken", "command": bin("oxibot-stress-plugin"), "env": env});
        home.write("config.json", &serde_json::json!({"plugins": [plugin]}).to_string());
    };
    write_config(serde_json::json!({"OXIBOT_STRESS_STARTUP": "wrong_version"}));
    let ws = TempDir::new("cli-ws");
    let list = || {
        let out = oxibot(home.path(), ws.path(), &["tools", "list", "--workspace", &ws.path().display().to_string()]);
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let first = stdout(&list());
    assert!(first.contains("reason: restarted 5 times"), "{first}");

    let again = list();
    let (text, warnings) = (stdout(&again), stderr(&again));
    let line = text.lines().find(|line| line.starts_with("broken ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("failed"), "{text}");
    assert!(text.contains("not started: it failed to start") && text.contains("protocol version 999"), "{text}");
    let about_it: Vec<&str> = warnings.lines().filter(|line| line.contains("broken")).collect();
    assert_eq!(about_it.len(), 1, "{warnings}");
    assert!(about_it[0].contains("not started"), "{warnings}");

    write_config(serde_json::json!({"OXIBOT_STRESS_STARTUP": "wrong_version", "CHANGED": "1"}));
    let changed = stdout(&list());
    assert!(changed.contains("reason: restarted 5 times"), "a changed config was not tried again: {changed}");
}

#[test]
fn malformed_config_is_reported_with_the_file_and_the_key() {
    let home = TempDir::new("cli-home");
    let path = home.write("config.json", r#"{"tools": {"restrictToWorkspace": "yes please"}}"#);
    let out = oxibot(home.path(), home.path(), &["tools", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&path.display().to_string()) && err.contains("tools.restrictToWorkspace"), "{err}");
}

#[test]
fn a_plugin_started_by_hand_explains_that_the_kernel_starts_it() {
    let out = std::process::Command::new(bin("oxibot"))
        .args(["__plugin", "fs"])
        .env_remove("OXIBOT_PLUGIN_SOCKET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("started by the oxibot kernel"), "{}", stderr(&out));
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let home = TempDir::new("cli-home");
    let mut child = oxibot_tests::kernel_command(home.path(), &["status"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the first line is written, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    assert!(out.status.success(), "{:?}", out.status);
}

#[test]
fn logs_written_to_a_pipe_or_file_carry_no_colour_codes() {
    let home = TempDir::new("cli-home");
    let ws = TempDir::new("cli-ws");
    let out = std::process::Command::new(bin("oxibot"))
        .args(["tools", "call", "exec", "--workspace", &ws_arg(&ws), "--args", r#"{"command":"echo hi"}"#])
        .current_dir(ws.path())
        .env("OXIBOT_HOME", home.path())
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(log.contains("DEBUG") || log.contains("INFO"), "no log lines to check: {log}");
    assert!(!log.contains('\u{1b}'), "escape sequences in a piped log: {log:?}");
}

// Issue 24, item 10: a plugin file without the executable bit was skipped silently.
#[test]
fn a_plugin_file_that_is_not_executable_is_named_with_the_chmod_line() {
    let home = TempDir::new("cli-home");
    let plugins = home.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let file = plugins.join("my-tool");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let chmod = format!("chmod +x {}", file.display());
    let list = oxibot(home.path(), home.path(), &["tools", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stderr(&list).contains(&chmod), "{}", stderr(&list));
    let status = oxibot(home.path(), home.path(), &["status"]);
    let report = stdout(&status);
    assert!(report.lines().any(|line| line.starts_with("warning:") && line.contains(&chmod)), "{report}");
}
