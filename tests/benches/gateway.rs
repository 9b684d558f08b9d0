//! Gateway benchmark: 1,000 concurrent sessions over the `api` channel (OpenAI-compatible
//! HTTP) against the scripted LLM answering after 100 ms — turns per second, added latency,
//! and RSS of the kernel and its plugins — then a steady open-loop arrival of 1,000 turns a
//! second over 1,000 sessions (added latency measured from each turn's scheduled start), then
//! the idle RSS of a gateway with the local channels enabled.
//!
//! Run: `cargo build --release --workspace && cargo bench -p oxibot-tests --bench gateway`
#![allow(clippy::unwrap_used, missing_docs)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oxibot_tests::bench::sized;
use oxibot_tests::channels::free_port;
use oxibot_tests::http::gateway_health;
use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::procs::wait_until;
use oxibot_tests::{TempDir, bin};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SESSIONS: usize = sized(1_000, 20);
const TURNS_PER_SESSION: usize = 3;
const LLM_DELAY_MS: u64 = 100;
/// Turns a second of the steady phase, and how long it lasts.
const STEADY_RATE: u64 = sized(1_000, 20) as u64;
const STEADY_SECONDS: u64 = sized(5, 1) as u64;
/// The api channel's key, set in the config so the load needs no secrets file.
const API_KEY: &str = "bench-key";

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot gateway benchmark\n");
    let llm = ScriptedLlm::start();
    let home = TempDir::new("gateway-bench");
    let api_port = free_port();
    let health_port = free_port();
    let config = json!({
        "agents": {"defaults": {"workspace": home.path().join("workspace"), "model": "bench-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": llm.base_url()}},
        "channels": {"api": {"enabled": true, "port": api_port, "apiKey": API_KEY, "allowFrom": "*", "timeoutSecs": 120, "maxConnections": 4096}},
        "gateway": {"port": health_port}
    });
    home.write("config.json", &config.to_string());
    let mut gateway = start(&home, health_port);
    for _ in 0..SESSIONS * TURNS_PER_SESSION + (STEADY_RATE * STEADY_SECONDS) as usize {
        llm.push(Reply::SlowFirstToken { delay_ms: LLM_DELAY_MS, text: "ok".into() });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (latencies, wall) = runtime.block_on(load(api_port));
    let rss = stack_rss(health_port);
    report_load(&latencies, wall, &rss);
    std::thread::sleep(Duration::from_secs(1));
    let steady = runtime.block_on(open_loop(api_port));
    report_steady(&steady);
    stop(&mut gateway);
    idle(&llm);
}

fn start(home: &TempDir, health_port: u16) -> Child {
    let child = Command::new(bin("oxibot"))
        .arg("gateway")
        .env("OXIBOT_HOME", home.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = || {
        gateway_health(health_port).is_some_and(|h| {
            h["plugins"]
                .as_array()
                .is_some_and(|p| p.iter().filter(|p| p["kind"] == "channel").all(|p| p["state"] == "running"))
        })
    };
    assert!(wait_until(Duration::from_secs(20), ready), "the gateway did not start");
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn stop(child: &mut Child) {
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    );
    let _ = child.wait();
}

/// Every session runs its turns one after another; all sessions at once.
async fn load(port: u16) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|session| {
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for turn in 0..TURNS_PER_SESSION {
                    let start = Instant::now();
                    let reply = complete(port, &format!("bench-{session}"), &format!("turn {turn}")).await;
                    assert!(reply.contains("\"ok\""), "unexpected reply: {reply}");
                    latencies.push(start.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    (all, started.elapsed())
}

/// Turns arriving at [`STEADY_RATE`] a second for [`STEADY_SECONDS`], round-robin over the
/// sessions, each on its own schedule whether or not earlier ones are done; each latency is
/// taken from the turn's scheduled start, so a late start counts.
async fn open_loop(port: u16) -> Vec<Duration> {
    let total = STEADY_RATE * STEADY_SECONDS;
    let gap = Duration::from_secs(1) / STEADY_RATE as u32;
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::with_capacity(total as usize);
    for turn in 0..total {
        let at = start + gap * turn as u32;
        tokio::time::sleep_until(at).await;
        tasks.push(tokio::spawn(async move {
            let session = format!("steady-{}", turn % SESSIONS as u64);
            let reply = complete(port, &session, &format!("steady {turn}")).await;
            assert!(reply.contains("\"ok\""), "unexpected reply: {reply}");
            at.elapsed()
        }));
    }
    let mut latencies = Vec::with_capacity(tasks.len());
    for task in tasks {
        latencies.push(task.await.unwrap());
    }
    latencies
}

fn report_steady(latencies: &[Duration]) {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    let added = |d: Duration| d.as_secs_f64() * 1000.0 - LLM_DELAY_MS as f64;
    println!(
        "steady arrival, {STEADY_RATE} turns/s for {STEADY_SECONDS} s over {SESSIONS} sessions\n    latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms → added p50 {:.1} ms, p99 {:.1} ms\n",
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        at(1.0).as_secs_f64() * 1000.0,
        added(at(0.5)),
        added(at(0.99)),
    );
}

/// One non-streaming chat completion over a fresh HTTP/1.1 connection; returns the body.
async fn complete(port: u16, session: &str, text: &str) -> String {
    let body =
        json!({"model": "oxibot", "messages": [{"role": "user", "content": text}], "session_id": session}).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {API_KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

/// RSS in KB of the kernel and each plugin, by name.
fn stack_rss(health_port: u16) -> Vec<(String, u64)> {
    let health = gateway_health(health_port).unwrap();
    let mut rss = vec![("kernel".to_owned(), rss_of(health["pid"].as_u64().unwrap()))];
    for plugin in health["plugins"].as_array().unwrap() {
        if let Some(pid) = plugin["pid"].as_u64() {
            rss.push((plugin["name"].as_str().unwrap().to_owned(), rss_of(pid)));
        }
    }
    rss
}

fn rss_of(pid: u64) -> u64 {
    oxibot_tests::procs::rss_kb(&pid.to_string())
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn report_load(latencies: &[Duration], wall: Duration, rss: &[(String, u64)]) {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    let added = |d: Duration| d.as_secs_f64() * 1000.0 - LLM_DELAY_MS as f64;
    println!(
        "{SESSIONS} concurrent sessions × {TURNS_PER_SESSION} turns over the api channel, LLM answering after {LLM_DELAY_MS} ms\n    {:.0} turns/s ({} turns in {:.2} s); latency p50 {:.1} ms, p99 {:.1} ms → added p50 {:.1} ms, p99 {:.1} ms",
        latencies.len() as f64 / wall.as_secs_f64(),
        latencies.len(),
        wall.as_secs_f64(),
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        added(at(0.5)),
        added(at(0.99)),
    );
    let total: u64 = rss.iter().map(|(_, kb)| kb).sum();
    let parts: Vec<String> = rss.iter().map(|(name, kb)| format!("{name} {:.1}", mb(*kb))).collect();
    println!("    RSS after the load: {:.1} MB in all ({} MB)\n", mb(total), parts.join(", "));
}

/// A gateway with the local channels (websocket, api) and the tools, idle for 2 s.
fn idle(llm: &ScriptedLlm) {
    let home = TempDir::new("gateway-idle");
    let health_port = free_port();
    let config = json!({
        "agents": {"defaults": {"workspace": home.path().join("workspace"), "model": "bench-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "k", "apiBase": llm.base_url()}},
        "channels": {
            "websocket": {"enabled": true, "port": free_port(), "allowFrom": "*"},
            "api": {"enabled": true, "port": free_port(), "allowFrom": "*"}
        },
        "gateway": {"port": health_port}
    });
    home.write("config.json", &config.to_string());
    let mut gateway = start(&home, health_port);
    std::thread::sleep(Duration::from_secs(2));
    let rss = stack_rss(health_port);
    let total: u64 = rss.iter().map(|(_, kb)| kb).sum();
    let parts: Vec<String> = rss.iter().map(|(name, kb)| format!("{name} {:.1}", mb(*kb))).collect();
    println!(
        "idle gateway (websocket + api channels, fs + shell tools) after 2 s\n    kernel {:.1} MB; whole stack {:.1} MB ({} MB)\n",
        mb(rss[0].1),
        mb(total),
        parts.join(", ")
    );
    stop(&mut gateway);
}
