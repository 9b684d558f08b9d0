//! Plugin host benchmarks through the real kernel host and a real plugin process: call round
//! trip, throughput with 1 and 16 calls in flight, cold spawn + handshake, the time from a
//! plugin's SIGKILL to the next call being served by its replacement, and `read_file` of five
//! lines of a small file and of a 20 GiB sparse file with the same head, paired.
//!
//! Run: `cargo build --release --workspace && cargo bench -p oxibot-tests --bench plugin_host`
//! (`OXIBOT_BENCH_ONLY=codec|bare|round_trip|throughput|spawn|sigkill|read_file` runs one
//! section).
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use oxibot_kernel::plugin::{PluginHost, RestartPolicy};
use oxibot_tests::bench::sized;
use oxibot_tests::procs::sigkill;
use oxibot_tests::{TempDir, context, start_host, stress_spec, test_host_config, tool_spec};
use serde_json::json;

const RUNS: usize = sized(5, 1);
const CALLS_PER_RUN: usize = sized(20_000, 200);
const SPAWNS: usize = sized(40, 3);
const KILLS: usize = sized(40, 3);

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot plugin host benchmarks ({RUNS} runs each; figures are medians with min–max over runs)\n");
    let system = actix::System::new();
    // `OXIBOT_BENCH_ONLY=round_trip` (or codec, bare, throughput, spawn, sigkill) runs one section.
    let only = std::env::var("OXIBOT_BENCH_ONLY").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if wanted("codec") {
        codec_only();
    }
    if wanted("bare") {
        bare_round_trip();
    }
    system.block_on(async {
        if wanted("round_trip") {
            round_trip().await;
        }
        if wanted("throughput") {
            throughput(16).await;
        }
        if wanted("spawn") {
            cold_spawn().await;
        }
        if wanted("sigkill") {
            sigkill_to_next_call().await;
        }
        if wanted("read_file") {
            read_file_small_and_huge().await;
        }
    });
}

/// The protocol's own share of a round trip: encode and decode a call and its result.
fn codec_only() {
    use oxibot_proto::{Call, CallContext, Message, ToolResult};
    let call = Message::Call(Call {
        id: 1,
        tool: "noop".into(),
        arguments: json!({}),
        context: CallContext { workspace: "/tmp".into(), ..CallContext::default() },
    });
    let result = Message::Result(ToolResult { id: 1, content: String::new(), is_error: false });
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        for _ in 0..CALLS_PER_RUN {
            let frame = oxibot_proto::encode(&call).unwrap();
            let decoded =
                oxibot_proto::read_message(&mut frame.as_slice(), oxibot_proto::DEFAULT_MAX_FRAME_LEN).unwrap();
            let frame = oxibot_proto::encode(&result).unwrap();
            let answer =
                oxibot_proto::read_message(&mut frame.as_slice(), oxibot_proto::DEFAULT_MAX_FRAME_LEN).unwrap();
            std::hint::black_box((decoded, answer));
        }
        rates.push(micros(start.elapsed()) / CALLS_PER_RUN as f64);
    }
    report("codec only: encode + decode of a call and its result", &rates, "µs");
}

/// The floor: the same stress plugin driven by a blocking client with no host, no actors and
/// no async runtime, so the difference to `round_trip` is what the kernel host adds.
fn bare_round_trip() {
    use oxibot_proto::{Call, CallContext, DEFAULT_MAX_FRAME_LEN, Hello, Message, PeerKind, read_message};
    use std::io::Write;
    use std::os::unix::net::UnixListener;

    let dir = oxibot_tests::TempDir::new("bare-bench");
    let socket = dir.path().join("bare.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut child = std::process::Command::new(oxibot_tests::bin("oxibot-stress-plugin"))
        .env(oxibot_proto::ENV_SOCKET, &socket)
        .env(oxibot_proto::ENV_TOKEN, "t")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    assert!(matches!(read_message(&mut reader, DEFAULT_MAX_FRAME_LEN).unwrap(), Some(Message::Hello(_))));
    stream
        .write_all(&oxibot_proto::encode(&Message::Hello(Hello::new("kernel", PeerKind::Kernel, "t"))).unwrap())
        .unwrap();
    assert!(matches!(read_message(&mut reader, DEFAULT_MAX_FRAME_LEN).unwrap(), Some(Message::Manifest(_))));
    let context = CallContext { workspace: "/tmp".into(), ..CallContext::default() };
    let mut one_call = |id: u64| {
        let call = Message::Call(Call { id, tool: "noop".into(), arguments: json!({}), context: context.clone() });
        stream.write_all(&oxibot_proto::encode(&call).unwrap()).unwrap();
        let answer = read_message(&mut reader, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert!(matches!(answer, Some(Message::Result(r)) if r.id == id));
    };
    for id in 0..2_000 {
        one_call(id);
    }
    let mut p50s = Vec::new();
    for _ in 0..RUNS {
        let mut samples: Vec<Duration> = (0..CALLS_PER_RUN as u64)
            .map(|id| {
                let start = Instant::now();
                one_call(id);
                start.elapsed()
            })
            .collect();
        samples.sort();
        p50s.push(micros(percentile(&samples, 50.0)));
    }
    report("bare round trip p50 (blocking client, same plugin, no host)", &p50s, "µs");
    drop(stream);
    let _ = child.kill();
    let _ = child.wait();
}

async fn start_noop_host() -> PluginHost {
    let mut config = test_host_config();
    // Every death counts as one after a stable run, so each restart is immediate, as the
    // first restart of a healthy plugin is.
    config.restart = RestartPolicy { max_restarts: 10_000, stable_after: Duration::ZERO, ..RestartPolicy::default() };
    let host = PluginHost::start(vec![stress_spec("stress", &[])], config).unwrap();
    host.wait_settled(Duration::from_secs(5)).await;
    assert_eq!(host.statuses()[0].state, "running", "stress plugin did not start");
    host
}

async fn noop(host: &PluginHost) {
    let ws = std::env::temp_dir();
    let result = host.call("noop", json!({}), context(&ws), None).await.unwrap();
    assert!(!result.is_error);
}

async fn round_trip() {
    let host = start_noop_host().await;
    for _ in 0..2_000 {
        noop(&host).await;
    }
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let mut samples = Vec::with_capacity(CALLS_PER_RUN);
        let run = Instant::now();
        for _ in 0..CALLS_PER_RUN {
            let start = Instant::now();
            noop(&host).await;
            samples.push(start.elapsed());
        }
        rates.push(CALLS_PER_RUN as f64 / run.elapsed().as_secs_f64());
        samples.sort();
        p50s.push(micros(percentile(&samples, 50.0)));
        p99s.push(micros(percentile(&samples, 99.0)));
    }
    report("round trip p50 (1 in flight)", &p50s, "µs");
    report("round trip p99 (1 in flight)", &p99s, "µs");
    report("throughput, 1 call in flight", &rates, "calls/s");
    host.shutdown().await;
}

async fn throughput(in_flight: usize) {
    let host = start_noop_host().await;
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let per_lane = CALLS_PER_RUN / in_flight;
        let start = Instant::now();
        let lanes = (0..in_flight).map(|_| async {
            for _ in 0..per_lane {
                noop(&host).await;
            }
        });
        join_all(lanes).await;
        rates.push((per_lane * in_flight) as f64 / start.elapsed().as_secs_f64());
    }
    report(&format!("throughput, {in_flight} calls in flight"), &rates, "calls/s");
    host.shutdown().await;
}

async fn cold_spawn() {
    let mut samples = Vec::new();
    for _ in 0..SPAWNS {
        let start = Instant::now();
        let host = PluginHost::start(vec![stress_spec("stress", &[])], test_host_config()).unwrap();
        host.wait_settled(Duration::from_secs(5)).await;
        samples.push(start.elapsed());
        assert_eq!(host.statuses()[0].state, "running");
        host.shutdown().await;
    }
    summarize("cold spawn + handshake (launcher exec, connect, hello, manifest)", samples);
}

async fn sigkill_to_next_call() {
    let host = start_noop_host().await;
    noop(&host).await;
    let mut samples = Vec::new();
    for _ in 0..KILLS {
        let pid = host.statuses()[0].pid.unwrap();
        let start = Instant::now();
        sigkill(pid);
        // `noop` is read-only, so a call that meets the dying instance is re-run on its
        // replacement by the host itself; the call must succeed.
        noop(&host).await;
        samples.push(start.elapsed());
        // The host records the replacement's pid once its handshake is done, which a slow
        // (debug) build may finish after the call it re-ran.
        let replaced = Instant::now();
        while host.statuses()[0].pid == Some(pid) && replaced.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_ne!(host.statuses()[0].pid, Some(pid), "the killed instance was replaced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    summarize("SIGKILL → next call served by the replacement", samples);
    host.shutdown().await;
}

/// `read_file` of five lines, alternating between a 60 KB file and a 20 GiB sparse file that
/// starts with the same 2,000 lines (issue 23, finding 10b: the huge one used to count every line).
async fn read_file_small_and_huge() {
    let ws = TempDir::new("bench-read");
    let head: String = (1..=2000).map(|n| format!("entry {n}: the service started\n")).collect();
    ws.write("small.log", &head);
    let huge = ws.write("huge.log", &head);
    std::fs::OpenOptions::new().write(true).open(&huge).unwrap().set_len(20 << 30).unwrap();
    let host = start_host(vec![tool_spec("fs")]).await;
    let read = |path: &'static str| {
        let host = &host;
        let ws = ws.path().to_path_buf();
        async move {
            let start = Instant::now();
            let result = host.call("read_file", json!({"path": path, "limit": 5}), context(&ws), None).await.unwrap();
            assert!(result.content.starts_with("1| entry 1:"), "{}", result.content);
            start.elapsed()
        }
    };
    let (mut small, mut large) = (Vec::new(), Vec::new());
    for _ in 0..500 {
        small.push(read("small.log").await);
        large.push(read("huge.log").await);
    }
    summarize("read_file, 5 lines of a 60 KB file", small);
    summarize("read_file, 5 lines of a 20 GiB sparse file (same head)", large);
    host.shutdown().await;
}

fn summarize(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label}\n    n={} p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, min {:.2} ms, max {:.2} ms\n",
        samples.len(),
        ms(percentile(&samples, 50.0)),
        ms(percentile(&samples, 90.0)),
        ms(percentile(&samples, 99.0)),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
    );
}

fn report(label: &str, values: &[f64], unit: &str) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    println!("{label}\n    median {median:.1} {unit} (min {:.1}, max {:.1})\n", sorted[0], sorted[sorted.len() - 1]);
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[index]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn join_all<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    let handles: Vec<_> = futures.map(Box::pin).collect();
    let mut pending = handles;
    // Poll all lanes concurrently on this thread.
    std::future::poll_fn(move |cx| {
        pending.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pending.is_empty() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
}
