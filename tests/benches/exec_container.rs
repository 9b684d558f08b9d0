//! What the container costs per `exec`: the shell plugin's guardian runs `sh -c true` with
//! the same policy three ways, interleaved so each round measures all three under the same
//! load: unconfined (no plan), Landlock + seccomp + limits (the fallback without user
//! namespaces), and the container (namespaces, the root, `/proc`, then the same three).
//! Prints the median and the 10th–90th percentile spread of each, and the median of the paired
//! differences.
//!
//! Run: `cargo build --release -p oxibot-kernel && cargo bench --profile bench-dev -p oxibot-tests
//! --bench exec_container` with `OXIBOT_BENCH_GUARDIAN=target/release/oxibot`
//! (without it the guardian comes from the bench's own profile directory).
//! `OXIBOT_BENCH_ROUNDS` sets the rounds (default 200; 5 in the short run of `cargo test --benches`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oxibot_sandbox::Policy;
use oxibot_sandbox::limits::Limits;
use oxibot_sandbox::mounts::CONTAINER_TMP;
use oxibot_sandbox::namespaces::Ids;
use oxibot_tests::bench::sized;
use oxibot_tests::{TempDir, bin};
use oxibot_tool_shell::plan::{Container, Plan};

/// One way of running the command.
struct Mode {
    name: &'static str,
    plan: Option<Plan>,
    times: Vec<Duration>,
}

fn main() {
    oxibot_tests::bench::announce_short_run();
    let rounds: usize = std::env::var("OXIBOT_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(sized(200, 5));
    let guardian = std::env::var_os("OXIBOT_BENCH_GUARDIAN").map(PathBuf::from).unwrap_or_else(|| bin("oxibot"));
    let ws = TempDir::new("bench-exec-ws");
    let scratch = TempDir::new("bench-exec-scratch");
    let tmp = TempDir::new("bench-exec-tmp");
    let mut modes = [
        Mode { name: "unconfined", plan: None, times: Vec::new() },
        Mode { name: "landlock + seccomp + rlimits", plan: Some(fallback(ws.path(), tmp.path())), times: Vec::new() },
        Mode { name: "container + the same", plan: Some(container(ws.path(), scratch.path())), times: Vec::new() },
    ];
    println!("exec cost of `sh -c true` through {} ({rounds} rounds, interleaved)\n", guardian.display());
    for round in 0..rounds + 5 {
        for mode in &mut modes {
            if round == 0 {
                check(&guardian, ws.path(), mode.plan.as_ref(), mode.name);
            }
            let took = run(&guardian, ws.path(), mode.plan.as_ref());
            // The first rounds warm the page cache and are not counted.
            if round >= 5 {
                mode.times.push(took);
            }
        }
    }
    println!("| mode | median | p10–p90 |");
    println!("|---|---|---|");
    for mode in &modes {
        let (median, low, high) = spread(&mode.times);
        println!("| {} | {} | {}–{} |", mode.name, ms(median), ms(low), ms(high));
    }
    println!();
    for (from, to) in [(0, 2), (1, 2)] {
        let differences: Vec<f64> = modes[to]
            .times
            .iter()
            .zip(&modes[from].times)
            .map(|(to, from)| to.as_secs_f64() * 1e3 - from.as_secs_f64() * 1e3)
            .collect();
        let (median, low, high) = spread_f64(&differences);
        println!(
            "container vs {}: {median:+.2} ms per exec (paired median; p10–p90 {low:+.2} to {high:+.2} ms)",
            modes[from].name
        );
    }
}

/// The system baseline, the workspace and `tmp`, network off: what `exec` grants.
fn policy(ws: &Path, tmp: &Path) -> Policy {
    let mut policy = Policy::system();
    policy.allow_read_write(ws).allow_read_write(tmp).deny_network();
    policy
}

fn fallback(ws: &Path, tmp: &Path) -> Plan {
    Plan { container: None, limits: Some(Limits::DEFAULT), policy: Some(policy(ws, tmp)) }
}

fn container(ws: &Path, scratch: &Path) -> Plan {
    for dir in ["root", "tmp"] {
        std::fs::create_dir_all(scratch.join(dir)).unwrap();
    }
    let protected: Vec<PathBuf> = [".git", "memory", "SOUL.md"].iter().map(|entry| ws.join(entry)).collect();
    let container = Container { scratch: scratch.to_path_buf(), ids: Ids::current(), protected };
    Plan {
        container: Some(container),
        limits: Some(Limits::DEFAULT),
        policy: Some(policy(ws, Path::new(CONTAINER_TMP))),
    }
}

/// The guardian's arguments for `plan` and `sh -c COMMAND`.
fn arguments(plan: Option<&Plan>, command: &str) -> Vec<OsString> {
    let mut args = vec![OsString::from("__guard")];
    args.extend(plan.map(Plan::to_args).unwrap_or_default());
    args.extend(["--", "sh", "-c", command].map(OsString::from));
    args
}

/// Runs `sh -c true` once under the guardian and returns how long it took.
fn run(guardian: &Path, ws: &Path, plan: Option<&Plan>) -> Duration {
    let started = Instant::now();
    let mut child = Command::new(guardian)
        .args(arguments(plan, "true"))
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The open stdin is the guardian's lifeline (`wait` would close it first): held until the
    // command is done.
    let lifeline = child.stdin.take();
    let status = child.wait().unwrap();
    let took = started.elapsed();
    drop(lifeline);
    assert!(status.success(), "the command failed: {status}");
    took
}

/// Fails early, with what the command printed, when a mode does not work on this machine.
fn check(guardian: &Path, ws: &Path, plan: Option<&Plan>, name: &str) {
    let mut child = Command::new(guardian)
        .args(arguments(plan, "echo ok"))
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), "ok", "{name} does not work here: {text}");
}

fn spread(times: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

fn spread_f64(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}
