//! The `exec` sandbox and process-tree clean-up, run against the built binary with this test
//! process as the plugin: what a restricted command can reach, and what survives a timeout.

mod support;
use support::guardian;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oxibot_plugin::{CallContext, ToolOutput};
use oxibot_sandbox::{Support, detect};
use oxibot_tool_shell::exec::execute;
use serde_json::json;

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oxibot-shell-sandbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create a test directory");
    dir.canonicalize().expect("cannot find a test directory")
}

async fn exec(ws: &Path, restrict: bool, command: &str, timeout: u64) -> ToolOutput {
    let ctx =
        CallContext { workspace: ws.display().to_string(), restrict_to_workspace: restrict, ..Default::default() };
    execute(guardian(), ctx, json!({"command": command, "timeout": timeout})).await
}

/// The text of a result, error or not.
fn text(output: ToolOutput) -> String {
    output.unwrap_or_else(|error| error.to_string())
}

/// `path` with every `/` written as `\057`, for a `printf` that rebuilds it at run time.
fn octal(path: &Path) -> String {
    path.display().to_string().replace('/', "\\057")
}

/// Whether `pid` is alive (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// The number in `path`, waiting up to five seconds for it to appear.
fn read_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that `pid` is gone within ten seconds.
fn assert_dies(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "pid {pid} survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_restricted_command_cannot_read_a_file_outside_through_a_path_built_at_run_time() {
    let ws = scratch("read-ws");
    let secret = scratch("read-secret").join("key");
    std::fs::write(&secret, "hunter2").unwrap();
    let command = format!("cat \"$(printf '{}')\"", octal(&secret));
    let restricted = text(exec(&ws, true, &command, 10).await);
    assert!(!restricted.contains("hunter2") && restricted.contains("Permission denied"), "{restricted}");
    assert_eq!(text(exec(&ws, false, &command, 10).await), "hunter2");
}

#[tokio::test]
async fn a_restricted_command_writes_the_workspace_and_its_private_tmpdir_which_is_removed_afterwards() {
    let ws = scratch("tmpdir");
    let output =
        text(exec(&ws, true, "echo a > made.txt; echo b > \"$TMPDIR/t\"; cat \"$TMPDIR/t\"; echo $TMPDIR", 10).await);
    let mut lines = output.lines();
    assert_eq!(lines.next(), Some("b"), "{output}");
    let tmp = PathBuf::from(lines.next().unwrap_or_default());
    assert!(tmp.file_name().is_some_and(|name| name.to_string_lossy().starts_with("oxibot-exec-")), "{output}");
    assert!(!tmp.exists(), "the private tmp outlived the command");
    assert!(ws.join("made.txt").exists());
}

#[tokio::test]
async fn setsid_and_double_forked_children_die_at_the_timeout_while_the_plugin_lives_on() {
    let ws = scratch("setsid");
    let command = "setsid sh -c 'echo $$ > s.pid; exec sleep 1000' & (sleep 1000 & echo $! > d.pid); sleep 1000";
    let error = text(exec(&ws, true, command, 1).await);
    assert!(error.contains("timed out"), "{error}");
    assert_dies(read_pid(&ws.join("s.pid")));
    assert_dies(read_pid(&ws.join("d.pid")));
}

#[tokio::test]
async fn an_unrestricted_setsid_child_dies_at_the_timeout_too() {
    let ws = scratch("setsid-free");
    let error = text(exec(&ws, false, "setsid sh -c 'echo $$ > s.pid; exec sleep 1000' & sleep 1000", 1).await);
    assert!(error.contains("timed out"), "{error}");
    assert_dies(read_pid(&ws.join("s.pid")));
}

#[tokio::test]
async fn a_confined_command_cannot_kill_its_guardian_to_escape_the_clean_up() {
    if !matches!(detect(), Support::Landlock { abi } if abi >= 6) {
        return;
    }
    let ws = scratch("scoped");
    let output = text(exec(&ws, true, "kill -KILL $PPID; echo still here", 10).await);
    assert!(output.contains("still here"), "{output}");
    assert!(output.contains("Operation not permitted") || output.contains("not permitted"), "{output}");
}

#[tokio::test]
async fn a_confined_command_keeps_no_capabilities() {
    let ws = scratch("caps");
    let output = text(exec(&ws, true, "grep CapEff \"$(printf '\\057proc\\057self\\057status')\"", 10).await);
    assert!(output.contains("0000000000000000"), "{output}");
}
