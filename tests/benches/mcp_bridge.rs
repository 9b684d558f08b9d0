//! The MCP bridge's cost: latency of a tool call through the kernel host and the bridge
//! (`oxibot __plugin mcp`) against the same call made directly with the rmcp client, both to
//! the same FastMCP server (stdio), and the bridge process's resident memory.
//!
//! Run: `cargo build --release --workspace && cargo bench -p oxibot-tests --bench mcp_bridge`
//! (needs `python3 -m pip install mcp`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use oxibot_kernel::plugin::PluginHost;
use oxibot_kernel::plugin::mcp::{McpServerConfig, mcp_specs};
use oxibot_tests::bench::sized;
use oxibot_tests::{bin, context, test_host_config};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

const WARMUP: usize = sized(50, 5);
const CALLS: usize = sized(2_000, 20);

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot MCP bridge benchmark ({CALLS} sequential echo calls each, after {WARMUP} warm-up calls)\n");
    let direct = tokio::runtime::Runtime::new().unwrap().block_on(direct_calls());
    report("direct: rmcp client -> FastMCP server (stdio)", &direct);
    let system = actix::System::new();
    let (bridged, rss_kb) = system.block_on(bridged_calls());
    report("bridged: kernel host -> oxibot __plugin mcp -> FastMCP server (stdio)", &bridged);
    let added_p50 = micros(percentile(&bridged, 50.0)) - micros(percentile(&direct, 50.0));
    let added_p99 = micros(percentile(&bridged, 99.0)) - micros(percentile(&direct, 99.0));
    println!("added by the bridge: p50 {added_p50:.0} µs, p99 {added_p99:.0} µs");
    println!("bridge RSS after the calls: {:.1} MiB", rss_kb as f64 / 1024.0);
}

fn server_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/server.py").display().to_string()
}

async fn direct_calls() -> Vec<Duration> {
    let mut command = tokio::process::Command::new("python3");
    command.args([server_script().as_str(), "stdio"]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let args = json!({"text": "ping"}).as_object().unwrap().clone();
        let started = Instant::now();
        client.call_tool(CallToolRequestParams::new("echo").with_arguments(args)).await.unwrap();
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    let _ = client.cancel().await;
    samples
}

async fn bridged_calls() -> (Vec<Duration>, u64) {
    let servers: BTreeMap<String, McpServerConfig> =
        serde_json::from_value(json!({"bench": {"command": "python3", "args": [server_script(), "stdio"]}})).unwrap();
    let host = PluginHost::start(mcp_specs(&bin("oxibot"), &servers), test_host_config()).unwrap();
    host.wait_settled(Duration::from_secs(60)).await;
    let ws = std::env::temp_dir();
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let started = Instant::now();
        let result = host.call("mcp_bench_echo", json!({"text": "ping"}), context(&ws), None).await.unwrap();
        assert_eq!(result.content, "ping");
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    let rss = host.statuses()[0].pid.map(rss_kb).unwrap_or(0);
    host.shutdown().await;
    (samples, rss)
}

fn report(label: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let (p50, p99) = (micros(percentile(&sorted, 50.0)), micros(percentile(&sorted, 99.0)));
    println!("{label}\n    p50 {p50:.0} µs, p99 {p99:.0} µs\n");
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:"));
    line.and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}
