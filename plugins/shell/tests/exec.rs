//! Process-level tests of the `exec` tool and its guardian, run against the built binary.

mod support;
use support::guardian;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oxibot_plugin::{CallContext, ToolOutput};
use oxibot_tool_shell::exec::execute;
use oxibot_tool_shell::guard::GUARD_ARG;
use serde_json::{Value, json};

/// A fresh, empty workspace directory for one test.
fn workspace(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oxibot-shell-exec-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).expect("cannot create the test workspace");
    dir.canonicalize().expect("cannot find the test workspace")
}

fn context(ws: &Path, restrict: bool) -> CallContext {
    CallContext { workspace: ws.display().to_string(), restrict_to_workspace: restrict, ..CallContext::default() }
}

/// Runs `exec` with `args` in a restricted workspace.
async fn exec_in(ws: &Path, args: Value) -> ToolOutput {
    execute(guardian(), context(ws, true), args).await
}

/// How long a test waits for something that should happen before it fails: generous, so a
/// busy machine does not fail a correct test; a passing test never waits it out.
const DEADLINE: Duration = Duration::from_secs(30);

/// Waits (up to [`DEADLINE`]) for a file written by a command, and returns its first number.
fn wait_for_number(path: &Path) -> i32 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(number) = std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse().ok()) {
            return number;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fields after the command name in `/proc/PID/stat`: state, ppid, pgrp, …
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

/// The process group of a running process.
fn group_of(pid: i32) -> i32 {
    stat_fields(&pid.to_string()).and_then(|fields| fields.get(2)?.parse().ok()).expect("process is gone")
}

/// The pids of processes in `group` that are still alive (zombies do not count).
fn live_members(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("cannot list /proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else { continue };
        let Some(fields) = stat_fields(&name) else { continue };
        let alive = !matches!(fields[0].as_str(), "Z" | "X");
        if alive && fields[2].parse() == Ok(group) {
            members.push(pid);
        }
    }
    members
}

/// Asserts that every process of `group` is gone (within [`DEADLINE`]).
fn assert_group_dies(group: i32) {
    let deadline = Instant::now() + DEADLINE;
    while !live_members(group).is_empty() {
        assert!(Instant::now() < deadline, "processes of group {group} survived: {:?}", live_members(group));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A command that records its shell's pid in `shell.pid` and leaves two sleepers in its group.
const SLEEPERS: &str = "echo $$ > shell.pid; sleep 300 & sleep 300";

#[tokio::test]
async fn echo_output_is_returned() {
    let ws = workspace("echo");
    assert_eq!(exec_in(&ws, json!({"command": "echo hello"})).await.unwrap(), "hello");
}

#[tokio::test]
async fn a_non_zero_exit_code_is_reported() {
    let ws = workspace("exit");
    assert_eq!(exec_in(&ws, json!({"command": "echo nope; exit 3"})).await.unwrap(), "nope\n[exit code 3]");
}

#[tokio::test]
async fn a_shell_killed_by_a_signal_reports_128_plus_the_signal() {
    let ws = workspace("signal");
    assert_eq!(exec_in(&ws, json!({"command": "kill -TERM $$"})).await.unwrap(), "(no output)\n[exit code 143]");
}

#[tokio::test]
async fn stderr_is_included_after_stdout() {
    let ws = workspace("stderr");
    let output = exec_in(&ws, json!({"command": "echo out; echo err >&2; echo more"})).await.unwrap();
    assert_eq!(output, "out\nmore\n[stderr]\nerr");
}

#[tokio::test]
async fn a_silent_command_reads_as_no_output() {
    let ws = workspace("silent");
    assert_eq!(exec_in(&ws, json!({"command": "true"})).await.unwrap(), "(no output)");
}

#[tokio::test]
async fn long_output_is_cut_in_the_middle_with_a_marker() {
    let ws = workspace("long");
    let output = exec_in(&ws, json!({"command": "head -c 30000 /dev/zero | tr '\\0' a"})).await.unwrap();
    assert!(output.contains("[... 20000 characters cut from the middle ...]"), "{}", &output[..200]);
    assert!(output.starts_with(&"a".repeat(5_000)) && output.ends_with(&"a".repeat(5_000)));
}

#[tokio::test]
async fn huge_output_on_both_streams_neither_deadlocks_nor_loses_count() {
    let ws = workspace("huge");
    let command = "head -c 2000000 /dev/zero | tr '\\0' a >&2; head -c 1000000 /dev/zero | tr '\\0' b";
    let output = exec_in(&ws, json!({"command": command, "timeout": 30})).await.unwrap();
    // 3,000,000 characters of output plus the 9-character "\n[stderr]\n" heading.
    let cut = 3_000_000 + "\n[stderr]\n".len() - 10_000;
    assert!(output.contains(&format!("[... {cut} characters cut")), "{}", &output[4_990..5_100]);
    assert!(output.starts_with('b') && output.ends_with('a'));
}

#[tokio::test]
async fn invalid_utf8_output_is_decoded_lossily() {
    let ws = workspace("utf8");
    let output = exec_in(&ws, json!({"command": "printf 'a\\377b'"})).await.unwrap();
    assert_eq!(output, "a\u{fffd}b");
}

#[tokio::test]
async fn commands_run_in_the_workspace_or_in_working_dir_inside_it() {
    let ws = workspace("cwd");
    assert_eq!(exec_in(&ws, json!({"command": "pwd"})).await.unwrap(), ws.display().to_string());
    let sub = exec_in(&ws, json!({"command": "pwd", "working_dir": "sub"})).await.unwrap();
    assert_eq!(sub, ws.join("sub").display().to_string());
}

#[tokio::test]
async fn a_working_dir_outside_a_restricted_workspace_is_refused() {
    let ws = workspace("cwd-outside");
    let error = exec_in(&ws, json!({"command": "pwd", "working_dir": "/etc"})).await.unwrap_err();
    assert!(error.message().contains("outside the workspace"), "{error}");
}

#[tokio::test]
async fn the_deny_list_blocks_rm_rf_root_even_without_the_restriction() {
    let ws = workspace("deny");
    let error = execute(guardian(), context(&ws, false), json!({"command": "rm -rf /"})).await.unwrap_err();
    assert!(error.to_string().starts_with("Error: command refused by the safety guard"), "{error}");
}

#[tokio::test]
async fn the_restriction_blocks_parent_steps_and_absolute_paths_outside() {
    let ws = workspace("restrict");
    let dotdot = exec_in(&ws, json!({"command": "cat ../x"})).await.unwrap_err();
    assert!(dotdot.message().contains("'..'"), "{dotdot}");
    let passwd = exec_in(&ws, json!({"command": "cat /etc/passwd"})).await.unwrap_err();
    assert!(passwd.message().contains("'/etc/passwd' is outside the workspace"), "{passwd}");
}

#[tokio::test]
async fn without_the_restriction_outside_paths_are_allowed() {
    let ws = workspace("free");
    let output =
        execute(guardian(), context(&ws, false), json!({"command": "cd .. && ls / >/dev/null && echo ok"})).await;
    assert_eq!(output.unwrap(), "ok");
}

#[tokio::test]
async fn an_empty_command_is_refused() {
    let ws = workspace("empty");
    assert!(exec_in(&ws, json!({"command": "  "})).await.unwrap_err().message().starts_with("command is empty"));
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_tree() {
    let ws = workspace("timeout");
    let call = tokio::spawn(execute(guardian(), context(&ws, true), json!({"command": SLEEPERS, "timeout": 1})));
    let pid_file = ws.join("shell.pid");
    let group = tokio::task::spawn_blocking(move || group_of(wait_for_number(&pid_file))).await.unwrap();
    // The sleepers run for five minutes: a call that waited for them instead of killing them
    // at its 1 s timeout would miss the deadline.
    let call = tokio::time::timeout(DEADLINE, call).await.expect("the call did not end at its timeout");
    let error = call.unwrap().unwrap_err();
    assert!(error.message().starts_with("command timed out after 1 second;"), "{error}");
    assert_group_dies(group);
}

#[tokio::test]
async fn output_printed_before_a_timeout_is_kept() {
    let ws = workspace("timeout-output");
    let error = exec_in(&ws, json!({"command": "echo started; sleep 30", "timeout": 1})).await.unwrap_err();
    assert!(error.message().ends_with("output before the timeout:\nstarted"), "{error}");
}

#[tokio::test]
async fn dropping_the_call_cancels_it_and_kills_the_whole_process_tree() {
    let ws = workspace("cancel");
    let call = tokio::spawn(execute(guardian(), context(&ws, true), json!({"command": SLEEPERS, "timeout": 60})));
    let pid_file = ws.join("shell.pid");
    let group = tokio::task::spawn_blocking(move || group_of(wait_for_number(&pid_file))).await.unwrap();
    // The guardian, the shell and both sleepers.
    assert!(live_members(group).len() >= 3, "{:?}", live_members(group));
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert_group_dies(group);
}

#[tokio::test]
async fn a_background_process_with_redirected_output_outlives_a_finished_command() {
    let ws = workspace("background");
    let output = exec_in(&ws, json!({"command": "sleep 30 >/dev/null 2>&1 & echo $! > bg.pid"})).await.unwrap();
    assert_eq!(output, "(no output)");
    let pid = wait_for_number(&ws.join("bg.pid"));
    let group = group_of(pid);
    assert_eq!(live_members(group), vec![pid]);
    rustix::process::kill_process_group(rustix::process::Pid::from_raw(group).unwrap(), rustix::process::Signal::KILL)
        .unwrap();
    assert_group_dies(group);
}

#[test]
fn the_guardian_exits_with_the_command_status() {
    let mut guardian =
        Command::new(guardian()).args([GUARD_ARG, "--", "sh", "-c", "exit 7"]).stdin(Stdio::piped()).spawn().unwrap();
    // Hold stdin open: closing it would make the guardian kill the command.
    let _lifeline = guardian.stdin.take();
    assert_eq!(guardian.wait().unwrap().code(), Some(7));
}

#[test]
fn the_guardian_kills_its_group_when_its_stdin_closes_as_when_the_plugin_dies() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    // The plugin holds the only writer of the guardian's stdin; any death of the plugin,
    // SIGKILL included, closes it exactly like this.
    let mut guardian = Command::new(guardian())
        .args([GUARD_ARG, "--", "sh", "-c", "sleep 30 & sleep 30"])
        .process_group(0)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let group = i32::try_from(guardian.id()).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while live_members(group).len() < 4 {
        assert!(Instant::now() < deadline, "the command never started: {:?}", live_members(group));
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(guardian.stdin.take());
    let status = guardian.wait().unwrap();
    assert_eq!(status.signal(), Some(9));
    assert_group_dies(group);
}

#[test]
fn the_guardian_explains_bad_arguments() {
    let output = Command::new(guardian()).args([GUARD_ARG, "sh"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage"));
}
