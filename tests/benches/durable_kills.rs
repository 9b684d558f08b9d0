//! Durable-turns kill campaign (issue 26): the real `oxibot gateway` with the loopback channel
//! is SIGKILLed at random moments of tool-using turns, several messages in flight per chat,
//! and started again; then a last run without a kill lets it finish. Each tool call appends
//! its own line to `runs.txt`; each reply is announced with its outbound id (`announce`), so
//! a channel that de-duplicates by id is simulated. Four figures come out:
//!
//! - acknowledged messages never answered (no model answer after them in their session);
//! - non-read-only tool calls run twice (a line twice in `runs.txt`);
//! - replies delivered twice to a channel that de-duplicates by id (one reply text under two
//!   outbound ids);
//! - interrupted calls reported to the model (tool results saying the call was interrupted).
//!
//! Run: `cargo build --workspace && cargo build -p oxibot-tests --bench durable_kills` and the
//! bench binary under `target/debug/deps/`; `OXIBOT_KILLS=N` (default 200), `OXIBOT_KILL_SEED=S`,
//! and `OXIBOT_BIN_DIR=dir` to run other builds of the binaries (say, main's).
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use oxibot_tests::bench::sized;
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{TempDir, bin_dir};
use serde_json::{Value, json};

/// Chats written to at once.
const CHATS: usize = 3;
/// Messages each chat sends per run.
const MESSAGES_PER_RUN: usize = 2;
/// The latest kill, after the first message of a run.
const MAX_DELAY_MS: u64 = 1_500;

fn main() {
    oxibot_tests::bench::announce_short_run();
    let kills: usize = std::env::var("OXIBOT_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(sized(200, 3));
    let seed = std::env::var("OXIBOT_KILL_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
    let bins = std::env::var_os("OXIBOT_BIN_DIR").map_or_else(bin_dir, PathBuf::from);
    println!(
        "durable-turns kill campaign: {kills} SIGKILLs of `{}/oxibot gateway`, {CHATS} chats × {MESSAGES_PER_RUN} messages per run, kills 0–{MAX_DELAY_MS} ms after the first (seed {seed})",
        bins.display()
    );
    let llm = ScriptedLlm::start();
    let home = TempDir::new("durable-kills");
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let port = free_port();
    let config = json!({
        "agents": {"defaults": {"workspace": workspace, "model": "kill-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "kill-campaign-key", "apiBase": llm.base_url()}},
        "channels": {"loopback": {"enabled": true, "port": port, "allowFrom": "*", "announce": true}},
        "gateway": {"port": free_port()},
        // The campaign measures durability, not approvals: by default a chat's `exec` waits
        // for a person's yes, which nobody gives here.
        "tools": {"approval": {"exec": "allow"}}
    });
    home.write("config.json", &config.to_string());
    // Every turn uses tools: replies alternate a call that appends its own line and a text.
    for n in 0..(kills + 10) * CHATS * MESSAGES_PER_RUN * 4 {
        let command = format!("echo call-{n} >> runs.txt; sleep 0.3");
        llm.push(Reply::ToolCalls(vec![("exec".into(), json!({"command": command}).to_string())]));
        llm.push(Reply::Text(format!("answer-{n}")));
    }
    let log = Log::default();
    let mut random = Lcg(seed);
    let started = Instant::now();
    let mut sent = 0;
    for run in 0..=kills {
        let mut gateway = start(&bins, home.path());
        let watcher = log.watch(port);
        let clients: Vec<Sender> = (0..CHATS).map(|chat| Sender::connect(port, &format!("c{chat}"), &log)).collect();
        for round in 0..MESSAGES_PER_RUN {
            for client in &clients {
                client.say(&format!("msg-{run}-{round}-{}", client.chat));
                sent += 1;
            }
        }
        if run < kills {
            std::thread::sleep(Duration::from_millis(random.below(MAX_DELAY_MS + 1)));
            sigkill(gateway.id());
        } else {
            settle(&llm, &log);
            let _ = gateway.kill();
        }
        let _ = gateway.wait();
        drop(clients);
        drop(watcher);
    }
    let elapsed = started.elapsed();
    let figures = Figures::count(home.path(), &workspace, &log);
    println!(
        "{sent} messages sent, {} acknowledged, {} replies seen, {:.0} s",
        figures.acknowledged,
        figures.replies,
        elapsed.as_secs_f64()
    );
    println!("| figure | count |");
    println!("|---|---|");
    println!("| acknowledged messages never answered | {} |", figures.never_answered);
    println!("| non-read-only tool calls run twice | {} |", figures.run_twice);
    println!("| replies delivered twice to a de-duplicating channel | {} |", figures.delivered_twice);
    println!("| interrupted calls reported to the model | {} |", figures.reported);
    if !figures.unanswered.is_empty() {
        println!("never answered, first few: {:?}", &figures.unanswered[..figures.unanswered.len().min(5)]);
    }
    if std::env::var_os("OXIBOT_KEEP_HOME").is_some() {
        println!("home kept: {}", home.path().display());
        std::mem::forget(home);
    }
}

/// Starts the gateway (the clients wait until the loopback channel listens).
fn start(bins: &Path, home: &Path) -> Child {
    Command::new(bins.join("oxibot"))
        .arg("gateway")
        .env("OXIBOT_HOME", home)
        .env("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "100,200,400")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until nothing has happened for 20 s (longer than the gateway's 10 s wait for its
/// plugins before it answers what a kill left): no model request and no reply.
fn settle(llm: &ScriptedLlm, log: &Log) {
    let mut last = (llm.requests().len(), log.replies());
    let mut quiet_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(180);
    while quiet_since.elapsed() < Duration::from_secs(20) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = (llm.requests().len(), log.replies());
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
    }
}

/// What the clients saw: acknowledged messages per chat, and each reply text's outbound ids.
#[derive(Default, Clone)]
struct Log {
    acknowledged: Arc<Mutex<Vec<String>>>,
    replies: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl Log {
    fn replies(&self) -> usize {
        self.replies.lock().unwrap().values().map(HashSet::len).sum()
    }

    /// A client that only reads the replies: each `TRY <id>` line names the outbound id of the
    /// `OUT` line after it.
    fn watch(&self, port: u16) -> Option<std::thread::JoinHandle<()>> {
        let stream = connect(port)?;
        let replies = self.replies.clone();
        Some(std::thread::spawn(move || {
            let mut id = String::new();
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("TRY ") {
                    id = rest.split(' ').next().unwrap_or_default().to_owned();
                } else if let Some(rest) = line.strip_prefix("OUT ") {
                    let text = rest.split_once(' ').map_or("", |(_, text)| text).to_owned();
                    replies.lock().unwrap().entry(text).or_default().insert(id.clone());
                }
            }
        }))
    }
}

/// One chat's client: sends lines and records those the kernel accepted (the loopback
/// channel submits a client's lines one at a time, so `ACCEPTED` lines come in order).
struct Sender {
    chat: String,
    stream: Option<TcpStream>,
    sent: Arc<Mutex<Vec<String>>>,
}

impl Sender {
    fn connect(port: u16, chat: &str, log: &Log) -> Sender {
        let stream = connect(port);
        let sent: Arc<Mutex<Vec<String>>> = Arc::default();
        if let Some(reader) = stream.as_ref().and_then(|s| s.try_clone().ok()) {
            let (sent, acknowledged) = (sent.clone(), log.acknowledged.clone());
            std::thread::spawn(move || {
                let mut next = 0;
                for line in BufReader::new(reader).lines().map_while(Result::ok) {
                    if line.starts_with("ACCEPTED ") {
                        let text = sent.lock().unwrap().get(next).cloned();
                        acknowledged.lock().unwrap().extend(text);
                        next += 1;
                    }
                }
            });
        }
        Sender { chat: chat.to_owned(), stream, sent }
    }

    fn say(&self, text: &str) {
        self.sent.lock().unwrap().push(text.to_owned());
        if let Some(mut stream) = self.stream.as_ref() {
            let _ = writeln!(stream, "user:{}:{text}", self.chat);
        }
    }
}

fn connect(port: u16) -> Option<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
            return Some(stream);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The campaign's figures, from the session files, `runs.txt` and the clients' log.
struct Figures {
    acknowledged: usize,
    replies: usize,
    never_answered: usize,
    unanswered: Vec<String>,
    run_twice: usize,
    delivered_twice: usize,
    reported: usize,
}

impl Figures {
    fn count(home: &Path, workspace: &Path, log: &Log) -> Figures {
        let acknowledged = log.acknowledged.lock().unwrap().clone();
        let mut messages: Vec<Value> = Vec::new();
        for chat in 0..CHATS {
            let path = oxibot_tests::session_path(home, workspace, &format!("loopback:c{chat}"));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            messages.extend(
                text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v.get("role").is_some()),
            );
        }
        let unanswered: Vec<String> = acknowledged.iter().filter(|text| !answered(&messages, text)).cloned().collect();
        let runs = std::fs::read_to_string(workspace.join("runs.txt")).unwrap_or_default();
        let mut seen = HashSet::new();
        let run_twice = runs.lines().filter(|line| !seen.insert(*line)).count();
        let replies = log.replies.lock().unwrap();
        let delivered_twice = replies.values().filter(|ids| ids.len() > 1).count();
        let reported = messages
            .iter()
            .filter(|m| m["role"] == "tool" && m["content"].as_str().is_some_and(|c| c.contains("interrupted")))
            .count();
        Figures {
            acknowledged: acknowledged.len(),
            replies: replies.len(),
            never_answered: unanswered.len(),
            unanswered,
            run_twice,
            delivered_twice,
            reported,
        }
    }
}

/// Whether the user message `text` is followed, before the next user message, by an answer
/// of the model (not the kernel's note that a turn was interrupted).
fn answered(messages: &[Value], text: &str) -> bool {
    let Some(at) =
        messages.iter().position(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.starts_with(text)))
    else {
        return false;
    };
    messages[at + 1..]
        .iter()
        .take_while(|m| m["role"] != "user")
        .any(|m| m["role"] == "assistant" && m["content"].as_str().is_some_and(|c| c.starts_with("answer-")))
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}
