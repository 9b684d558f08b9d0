//! Kill campaign: `oxibot agent -m` tool turns (half of them in new sessions) SIGKILLed at
//! random moments while another thread keeps the disk busy with fsyncs, then checks that
//! every session file loads, that no temporary file survives a load, and that every message
//! the model saw is in its session's file (a message is on disk before any model call).
//!
//! Run: `cargo build --release --workspace && cargo bench -p oxibot-tests --bench kill_campaign`
//! (`OXIBOT_KILLS=N` changes the number of kills, default 200; `OXIBOT_KILL_SEED=S` repeats a run).
#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use oxibot_kernel::session::SessionStore;
use oxibot_tests::bench::sized;
use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::procs::sigkill;
use oxibot_tests::{TempDir, bin};
use serde_json::json;

/// The latest kill, after the start of the kernel.
const MAX_DELAY_MS: u64 = 400;

/// What one run found.
#[derive(Default)]
struct Tally {
    kills: usize,
    reached_model: usize,
    new_sessions: usize,
    lost: Vec<String>,
    unloadable: Vec<String>,
    temp_files_left: usize,
    repaired: usize,
    delays_of_model_reached: Vec<u64>,
}

fn main() {
    oxibot_tests::bench::announce_short_run();
    let kills: usize = std::env::var("OXIBOT_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(sized(200, 4));
    let seed = std::env::var("OXIBOT_KILL_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
    println!(
        "kill campaign: {kills} SIGKILLs of `oxibot agent -m` tool turns, delays 0–{MAX_DELAY_MS} ms (seed {seed})"
    );
    let llm = ScriptedLlm::start();
    let home = TempDir::new("kill-campaign");
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let config = json!({
        "agents": {"defaults": {"workspace": workspace, "model": "kill-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "kill-campaign-key", "apiBase": llm.base_url()}}
    });
    home.write("config.json", &config.to_string());
    let busy = DiskLoad::start(home.path());
    let mut random = Lcg(seed);
    let mut tally = Tally::default();
    let started = Instant::now();
    for run in 0..kills {
        let new_session = run % 2 == 0;
        let key = if new_session { format!("cli:new-{run}") } else { format!("cli:old-{}", run % 5) };
        let message = format!("kill campaign message {run}");
        llm.push(Reply::ToolCalls(vec![("exec".into(), json!({"command": "sleep 0.05; echo ok"}).to_string())]));
        llm.push(Reply::Text(format!("answer {run}")));
        let delay = random.below(MAX_DELAY_MS + 1);
        let seen_before = llm.requests().len();
        let mut kernel = Command::new(bin("oxibot"))
            .args(["agent", "--session", &key, "-m", &message])
            .env("OXIBOT_HOME", home.path())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        sigkill(kernel.id());
        let _ = kernel.wait();
        tally.kills += 1;
        tally.new_sessions += usize::from(new_session);
        let reached = llm.requests()[seen_before..].iter().any(|r| r.to_string().contains(&message));
        if reached {
            tally.reached_model += 1;
            tally.delays_of_model_reached.push(delay);
        }
        check(&workspace, home.path(), &key, &message, reached, &mut tally);
    }
    busy.stop();
    report(&tally, started.elapsed());
}

/// Loads `key`'s session as the next kernel would and records what it finds.
fn check(workspace: &Path, home: &Path, key: &str, message: &str, reached: bool, tally: &mut Tally) {
    let store = SessionStore::for_workspace(workspace, home);
    tally.temp_files_left += temp_files(store.dir());
    match store.load(key) {
        Ok(loaded) => {
            tally.repaired += usize::from(loaded.repaired.is_some());
            let stored = loaded.session.messages.iter().any(|m| m.text_content().contains(message));
            if reached && !stored {
                tally.lost.push(key.to_owned());
            }
        }
        Err(error) => tally.unloadable.push(format!("{key}: {error}")),
    }
    // What a load leaves behind: no temporary file of a dead writer.
    let left = temp_files(store.dir());
    if left > 0 {
        tally.unloadable.push(format!("{key}: {left} temporary file(s) left after a load"));
    }
}

fn temp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".tmp")).count())
        .unwrap_or(0)
}

fn report(tally: &Tally, took: Duration) {
    let mut delays = tally.delays_of_model_reached.clone();
    delays.sort_unstable();
    let span = match (delays.first(), delays.last()) {
        (Some(first), Some(last)) => format!("{first}–{last} ms"),
        _ => "-".to_owned(),
    };
    println!("  kills:                              {}", tally.kills);
    println!("  in a new session:                   {}", tally.new_sessions);
    println!("  killed after the model saw the msg: {} (kill delays {span})", tally.reached_model);
    println!("  messages the model saw but lost:    {}", tally.lost.len());
    println!("  session files that did not load:    {}", tally.unloadable.len());
    println!("  loads that repaired a torn line:    {}", tally.repaired);
    println!("  temp files found before loading:    {}", tally.temp_files_left);
    println!("  took:                               {:.1} s", took.as_secs_f64());
    for problem in tally.lost.iter().chain(&tally.unloadable) {
        println!("  PROBLEM: {problem}");
    }
}

/// A thread writing and fsyncing a file in a loop, so the kernel's own syncs are slow, as on a
/// busy machine.
struct DiskLoad {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl DiskLoad {
    fn start(dir: &Path) -> DiskLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let path = dir.join("disk-load.bin");
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let block = vec![7u8; 4 << 20];
            while !flag.load(Ordering::Relaxed) {
                let mut file = std::fs::File::create(&path).unwrap();
                file.write_all(&block).unwrap();
                file.sync_all().unwrap();
            }
            let _ = std::fs::remove_file(&path);
        });
        DiskLoad { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// A small linear congruential generator: reproducible delays from the printed seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}
