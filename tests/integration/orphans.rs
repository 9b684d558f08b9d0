//! No plugin process — nor a command a plugin started, nor a child a plugin put in a session of
//! its own — outlives the kernel, even when the kernel is killed with SIGKILL and runs no
//! cleanup.

use std::process::{Child, Command, Stdio};

use oxibot_tests::procs::{pids_with_cmdline, sigkill, wait_until};
use oxibot_tests::wait::DEADLINE;
use oxibot_tests::{TempDir, bin};

fn unique(label: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{label}-{}-{nanos}", std::process::id())
}

fn spawn_kernel(home: &TempDir, ws: &TempDir, args: &[&str]) -> Child {
    Command::new(bin("oxibot"))
        .args(args)
        .current_dir(ws.path())
        .env("OXIBOT_HOME", home.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn plugins_die_with_a_kernel_killed_by_sigkill() {
    let home = TempDir::new("orphan-home");
    let ws = TempDir::new("orphan-ws");
    let marker = unique("stress-marker");
    let config = serde_json::json!({"plugins": [{"name": "stress", "command": bin("oxibot-stress-plugin"), "args": [marker], "env": {"OXIBOT_STRESS_TIMEOUT_SECS": "600"}}]});
    home.write("config.json", &config.to_string());
    let ws_arg = ws.path().display().to_string();
    let mut kernel = spawn_kernel(
        &home,
        &ws,
        &["tools", "call", "misbehave", "--workspace", &ws_arg, "--args", r#"{"action":"hang"}"#],
    );
    assert!(wait_until(DEADLINE, || !pids_with_cmdline(&marker).is_empty()), "the stress plugin never started");
    sigkill(kernel.id());
    kernel.wait().unwrap();
    assert!(
        wait_until(DEADLINE, || pids_with_cmdline(&marker).is_empty()),
        "plugin outlived the kernel: {:?}",
        pids_with_cmdline(&marker)
    );
}

#[test]
fn commands_started_by_exec_die_with_a_kernel_killed_by_sigkill() {
    let home = TempDir::new("orphan-home");
    let ws = TempDir::new("orphan-ws");
    // A distinctive sleep duration identifies this test's command among all processes.
    let seconds = 4000 + (std::process::id() % 5000);
    let command = format!("sleep {seconds}.5");
    let args = serde_json::json!({"command": command, "timeout": 600}).to_string();
    let mut kernel = spawn_kernel(&home, &ws, &["tools", "call", "exec", "--args", &args]);
    let needle = format!("sleep {seconds}.5 ");
    assert!(wait_until(DEADLINE, || !pids_with_cmdline(&needle).is_empty()), "the command never started");
    sigkill(kernel.id());
    kernel.wait().unwrap();
    assert!(wait_until(DEADLINE, || pids_with_cmdline(&needle).is_empty()), "exec's command outlived the kernel");
}

// Issue 23, finding 6: 200 of 200 `setsid` children of a plugin outlived the kernel.
#[test]
fn a_plugins_setsid_child_dies_with_a_kernel_killed_by_sigkill() {
    for restrict in [false, true] {
        let home = TempDir::new("orphan-home");
        let ws = TempDir::new("orphan-ws");
        // A distinctive sleep duration identifies this test's child among all processes.
        let seconds = 5000 + (std::process::id() % 4000);
        let needle = format!("sleep {seconds}.{} ", u8::from(restrict) + 1);
        let script = format!("setsid {}& exec sleep 1000", needle);
        let config = serde_json::json!({
            "agents": {"defaults": {"workspace": ws.path()}},
            "tools": {"restrictToWorkspace": restrict},
            "plugins": [{"name": "spawner", "command": "/bin/sh", "args": ["-c", script]}],
        });
        home.write("config.json", &config.to_string());
        let mut kernel = spawn_kernel(&home, &ws, &["tools", "list"]);
        assert!(wait_until(DEADLINE, || !pids_with_cmdline(&needle).is_empty()), "the plugin never started its child");
        sigkill(kernel.id());
        kernel.wait().unwrap();
        let gone = wait_until(DEADLINE, || pids_with_cmdline(&needle).is_empty());
        let survivors = pids_with_cmdline(&needle);
        for pid in &survivors {
            sigkill(*pid);
        }
        assert!(gone, "restrict={restrict}: the plugin's setsid child outlived the kernel: {survivors:?}");
    }
}
