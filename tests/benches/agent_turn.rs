//! Agent benchmarks: the kernel's own cost per turn against a scripted LLM that answers at
//! once (plain turn, one-tool turn, and both on a session already holding 10,000 messages),
//! cold `oxibot agent -m` wall time and peak RSS, and the idle RSS of a running kernel.
//!
//! Run: `cargo build --release --workspace && cargo bench -p oxibot-tests --bench agent_turn`
//!
//! Each measured turn starts after `/new` (nothing deleted; the replayed history restarts), so
//! every turn sends the same request: the figures compare the kernel's own work on a new
//! session and on one whose file already holds 10,000 messages.
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oxibot_kernel::agent::SessionManager;
use oxibot_kernel::config::Config;
use oxibot_kernel::message::{ChatMessage, Role, shared};
use oxibot_kernel::provider::{ChatRequest, Provider};
use oxibot_kernel::services::Services;
use oxibot_kernel::session::SessionStore;
use oxibot_tests::bench::sized;
use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::{TempDir, bin};
use serde_json::json;

const TURNS: usize = sized(400, 10);
const RUNS: usize = sized(5, 1);

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot agent benchmarks (figures: median over {RUNS} runs with min–max, unless noted)\n");
    let llm = ScriptedLlm::start();
    let home = TempDir::new("agent-bench");
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let config = json!({
        "agents": {"defaults": {"workspace": workspace, "model": "bench-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": llm.base_url()}}
    });
    home.write("config.json", &config.to_string());
    let config = Config::parse(&config.to_string(), Path::new("bench.json")).unwrap();
    std::fs::write(workspace.join("notes.md"), "a short file\n").unwrap();
    seed_long_session(&workspace, home.path(), "bench:long", sized(10_000, 300));

    actix::System::new().block_on(async {
        let provider = Provider::from_config(&config.llm()).unwrap();
        let host = oxibot_tests::start_host(vec![oxibot_tests::tool_spec("fs")]).await;
        let services = Arc::new(Services::new(config.clone(), workspace.clone(), home.path(), provider, host, true));
        let manager = SessionManager::new(services.clone());
        let llm_alone = llm_round_trip(&llm, &config).await;
        report("LLM round trip alone (same HTTP client, same scripted server, no kernel)", &llm_alone);
        let llm_p50 = median(&llm_alone);
        for (label, key) in [("new session", "bench:short"), ("session holding 10,000 messages", "bench:long")] {
            let plain = turns(&manager, &llm, key, false).await;
            report_overhead(&format!("plain turn, {label}"), &plain, llm_p50, 1);
            let tool = turns(&manager, &llm, key, true).await;
            report_overhead(&format!("one-tool turn (read_file), {label}"), &tool, llm_p50, 2);
        }
        services.host().shutdown().await;
    });
    cold_start(&home, &llm);
    idle_rss(&home);
}

/// Writes a session of `count` messages whose history is consolidated up to the last 10,
/// as the Consolidator keeps long sessions.
fn seed_long_session(workspace: &Path, home: &Path, key: &str, count: usize) {
    let store = SessionStore::for_workspace(workspace, home);
    let mut session = store.load(key).unwrap().session;
    let messages: Vec<ChatMessage> = (0..count)
        .map(|i| {
            ChatMessage::text(
                if i % 2 == 0 { Role::User } else { Role::Assistant },
                format!("message number {i} with some ordinary text in it"),
            )
        })
        .collect();
    store.append(&mut session, messages).unwrap();
    session.last_consolidated = count - 10;
    store.save_metadata(&mut session).unwrap();
}

async fn llm_round_trip(llm: &ScriptedLlm, config: &Config) -> Vec<Duration> {
    let provider = Provider::from_config(&config.llm()).unwrap();
    let request = ChatRequest {
        model: "bench-model".into(),
        messages: shared([ChatMessage::text(Role::System, "s".repeat(6000)), ChatMessage::text(Role::User, "hi")]),
        tools: Default::default(),
        max_tokens: 100,
        temperature: None,
        reasoning_effort: None,
    };
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut samples = Vec::new();
        for _ in 0..TURNS {
            llm.push(Reply::Text("ok".into()));
            let start = Instant::now();
            provider.chat(&request, true, &mut |_| {}).await.unwrap();
            samples.push(start.elapsed());
        }
        runs.push(p50(samples));
    }
    runs
}

async fn turns(manager: &SessionManager, llm: &ScriptedLlm, key: &str, with_tool: bool) -> Vec<(Duration, Duration)> {
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut samples = Vec::new();
        for _ in 0..TURNS {
            if with_tool {
                llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
            }
            llm.push(Reply::Text("ok".into()));
            // `/new` archives the previous turn through the summariser first.
            llm.route("keep the archive", Reply::Text("- said hello".into()));
            let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
            // Start each measured turn from an empty replayed history (as consolidation keeps
            // it small), so every turn sends the same request and only the kernel's own cost
            // and the session file's length differ between the two sessions. The turn itself
            // includes the memory bookkeeping (archive check and token estimate).
            manager.send(key, "/new", events.clone()).await.unwrap();
            let start = Instant::now();
            manager.send(key, "hello there", events).await.unwrap();
            samples.push(start.elapsed());
        }
        samples.sort();
        runs.push((samples[samples.len() / 2], samples[samples.len() * 99 / 100]));
    }
    runs
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn median(runs: &[Duration]) -> Duration {
    let mut sorted = runs.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(label: &str, runs: &[Duration]) {
    let mut sorted = runs.to_vec();
    sorted.sort();
    println!(
        "{label}\n    p50 {:.3} ms (min {:.3}, max {:.3})\n",
        ms(median(runs)),
        ms(sorted[0]),
        ms(sorted[sorted.len() - 1])
    );
}

fn report_overhead(label: &str, runs: &[(Duration, Duration)], llm_p50: Duration, model_calls: u32) {
    let p50s: Vec<Duration> = runs.iter().map(|r| r.0).collect();
    let p99s: Vec<Duration> = runs.iter().map(|r| r.1).collect();
    let mut sorted = p50s.clone();
    sorted.sort();
    let overhead = median(&p50s).saturating_sub(llm_p50 * model_calls);
    println!(
        "{label}\n    turn p50 {:.3} ms (min {:.3}, max {:.3}), p99 {:.3} ms; kernel overhead p50 ≈ {:.3} ms (turn minus {model_calls} LLM round trip{})\n",
        ms(median(&p50s)),
        ms(sorted[0]),
        ms(sorted[sorted.len() - 1]),
        ms(median(&p99s)),
        ms(overhead),
        if model_calls == 1 { "" } else { "s" }
    );
}

fn cold_start(home: &TempDir, llm: &ScriptedLlm) {
    let mut walls = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..15 {
        llm.push(Reply::Text("hello".into()));
        let start = Instant::now();
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(bin("oxibot"))
            .args(["agent", "-m", "hi", "-s", "bench:cold"])
            .env("OXIBOT_HOME", home.path())
            .output()
            .unwrap();
        walls.push(start.elapsed());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stderr);
        rss.push(text.lines().last().and_then(|l| l.trim().parse::<u64>().ok()).unwrap_or(0));
    }
    walls.sort();
    rss.sort();
    println!(
        "cold `oxibot agent -m hi` (start kernel + fs/shell plugins, one turn, shut down), 15 runs\n    wall p50 {:.2} ms (min {:.2}, max {:.2}); kernel peak RSS p50 {:.1} MB (min {:.1}, max {:.1})\n",
        ms(walls[walls.len() / 2]),
        ms(walls[0]),
        ms(walls[walls.len() - 1]),
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[0] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0
    );
}

fn idle_rss(home: &TempDir) {
    let mut kernel = Command::new(bin("oxibot"))
        .args(["agent", "-s", "bench:idle"])
        .env("OXIBOT_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let kernel_kb = rss_kb(kernel.id());
    let plugins: Vec<u32> = oxibot_tests::procs::children_of(kernel.id());
    let plugin_kb: u64 = plugins.iter().map(|p| rss_kb(*p)).sum();
    drop(kernel.stdin.take());
    let _ = kernel.wait();
    println!(
        "idle interactive kernel after 1.5 s\n    kernel RSS {:.1} MB; {} plugin processes {:.1} MB together; whole stack {:.1} MB\n",
        kernel_kb as f64 / 1024.0,
        plugins.len(),
        plugin_kb as f64 / 1024.0,
        (kernel_kb + plugin_kb) as f64 / 1024.0
    );
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
