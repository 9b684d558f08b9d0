//! Cron scheduler benchmark: a `CronActor` holding 10,000 jobs — time to load and save the
//! 10,000-job `jobs.json`, the scheduler's start, its RSS, the CPU it uses and the times it
//! wakes while idle between firings, and how late firings are (200 one-shot jobs 25 ms apart,
//! then 10 jobs every second for 20 seconds), with the jobs file rewritten after every run.
//!
//! Run: `cargo bench -p oxibot-tests --bench cron_scheduler`
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use oxibot_kernel::cron::actor::{AddJob, CronActor, Flush, ListJobs, RemoveJob};
use oxibot_kernel::cron::job::{JobTarget, JobsFile, Schedule};
use oxibot_kernel::cron::storage::JobStorage as _;
use oxibot_kernel::cron::store::JobStore;
use oxibot_kernel::cron::{CronFire, NewJob, Tz, now_ms};
use oxibot_tests::TempDir;
use oxibot_tests::bench::sized;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

const JOBS: usize = sized(10_000, 100);
const RUNS: usize = sized(5, 1);
const IDLE: Duration = Duration::from_secs(10);
const TZ: Tz = Tz::Europe__Berlin;

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot cron scheduler benchmark ({JOBS} jobs; times: median of {RUNS} with min–max)\n");
    let dir = TempDir::new("cron-bench");
    let store = JobStore::new(dir.path());
    let file = JobsFile { jobs: far_jobs(), ..JobsFile::default() };
    file_io(&store, &file);
    actix::System::new().block_on(scheduler(&dir));
}

/// 10,000 jobs none of which is due during the benchmark: intervals of 1–24 h, weekday and
/// daily cron expressions in a few timezones, one-shot times days ahead.
fn far_jobs() -> Vec<oxibot_kernel::cron::CronJob> {
    let now = now_ms();
    let zones = [None, Some("America/New_York"), Some("Asia/Tokyo"), Some("Europe/London")];
    (0..JOBS)
        .map(|i| {
            let schedule = match i % 3 {
                0 => Schedule::every(3_600_000 * (1 + (i as i64 % 24))),
                1 => Schedule::cron(
                    &format!("{} {} * * {}", i % 60, i % 24, if i % 2 == 0 { "1-5" } else { "*" }),
                    zones[i % 4],
                ),
                _ => Schedule::at(now + 86_400_000 * (2 + (i as i64 % 30)) + i as i64),
            };
            job(&format!("job {i}"), schedule, now)
        })
        .collect()
}

fn job(name: &str, schedule: Schedule, now: i64) -> oxibot_kernel::cron::CronJob {
    NewJob {
        name: Some(name.to_owned()),
        message: format!("Run the check called {name} and tell me what changed since last time"),
        schedule,
        target: JobTarget::session("telegram:123456789"),
        delete_after_run: false,
        missed: None,
    }
    .into_job(now, TZ)
    .unwrap()
}

fn file_io(store: &JobStore, file: &JobsFile) {
    let mut saves = Vec::new();
    let mut loads = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let current = store.version();
        store.replace(current.as_ref(), file).unwrap();
        saves.push(start.elapsed());
        let start = Instant::now();
        let loaded = store.load().unwrap();
        loads.push(start.elapsed());
        assert_eq!(loaded.jobs.len(), JOBS);
    }
    let size = std::fs::metadata(store.path()).unwrap().len();
    println!("jobs.json with {JOBS} jobs: {:.1} MB", size as f64 / 1e6);
    println!("    save (lock, check version, encode, write, fsync, rename): {}", spread(&mut saves));
    println!("    load (lock, read, decode):                 {}\n", spread(&mut loads));
}

async fn scheduler(dir: &TempDir) {
    let rss_before = rss_kb();
    let (fire, mut fires) = unbounded_channel();
    let start = Instant::now();
    let actor = CronActor::start(dir.path(), TZ, fire);
    let listed = actor.send(ListJobs).await.unwrap().len();
    println!(
        "scheduler start (load, ready {listed} jobs, build the heap): {:.1} ms, RSS +{:.1} MB (process {:.1} MB)\n",
        ms(start.elapsed()),
        (rss_kb().saturating_sub(rss_before)) as f64 / 1024.0,
        rss_kb() as f64 / 1024.0
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (cpu, woken) = (cpu_ns(), wakeups());
    tokio::time::sleep(IDLE).await;
    let (idle_cpu, idle_wakeups) = (cpu_ns() - cpu, wakeups() - woken);
    println!(
        "idle with {JOBS} jobs, {} s, no job due: CPU {:.2} ms in all threads, {idle_wakeups} thread wakeups (the benchmark's own sleep included)\n",
        IDLE.as_secs(),
        idle_cpu as f64 / 1e6
    );

    // Staggered one-shot jobs.
    let (cpu, now) = (cpu_ns(), now_ms());
    let first = now + 1_500;
    for i in 0..200 {
        let at = first + 25 * i;
        actor.send(AddJob(job(&format!("soon {i}"), Schedule::at(at), now))).await.unwrap();
    }
    let mut late = collect(&mut fires, 200).await;
    actor.send(Flush).await.unwrap();
    let cpu_a = cpu_ns() - cpu;
    println!("200 one-shot jobs due 25 ms apart (each run recorded, the 10,200-job file rewritten):");
    println!("    lateness {}", percentiles(&mut late));
    println!("    CPU {:.1} ms in all threads, {:.2} ms per firing\n", cpu_a as f64 / 1e6, cpu_a as f64 / 1e6 / 200.0);

    // Jobs every second, all due at the same instants.
    let (cpu, now) = (cpu_ns(), now_ms());
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(actor.send(AddJob(job(&format!("tick {i}"), Schedule::every(1_000), now))).await.unwrap().id);
    }
    let mut late = collect(&mut fires, 200).await;
    for id in ids {
        actor.send(RemoveJob(id)).await.unwrap().unwrap();
    }
    actor.send(Flush).await.unwrap();
    let cpu_b = cpu_ns() - cpu;
    println!("10 jobs every second for 20 s (200 firings, 10 at a time):");
    println!("    lateness {}", percentiles(&mut late));
    println!("    CPU {:.1} ms in all threads, {:.2} ms per firing\n", cpu_b as f64 / 1e6, cpu_b as f64 / 1e6 / 200.0);
    println!("RSS at the end: {:.1} MB", rss_kb() as f64 / 1024.0);
}

/// Answers `count` firings at once and returns how late each arrived (µs after it was due).
async fn collect(fires: &mut UnboundedReceiver<CronFire>, count: usize) -> Vec<f64> {
    let mut late = Vec::with_capacity(count);
    while late.len() < count {
        let fired = tokio::time::timeout(Duration::from_secs(60), fires.recv()).await.unwrap().unwrap();
        let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
        late.push((now_us - fired.due_ms.unwrap() * 1000) as f64);
        fired.done.send(Ok(())).unwrap();
    }
    late
}

fn percentiles(late_us: &mut [f64]) -> String {
    late_us.sort_by(f64::total_cmp);
    let at = |q: f64| late_us[((late_us.len() - 1) as f64 * q).round() as usize] / 1000.0;
    format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (min {:.2} ms)", at(0.5), at(0.99), at(1.0), at(0.0))
}

fn spread(times: &mut [Duration]) -> String {
    times.sort();
    format!("{:.1} ms ({:.1}–{:.1})", ms(times[times.len() / 2]), ms(times[0]), ms(times[times.len() - 1]))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_kb() -> u64 {
    oxibot_tests::procs::rss_kb("self")
}

/// CPU time of every thread of this process, in ns (`/proc/self/task/*/schedstat`).
fn cpu_ns() -> u64 {
    tasks()
        .iter()
        .filter_map(|task| std::fs::read_to_string(format!("{task}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Voluntary context switches (sleeps ended by a wakeup) of every thread, summed.
fn wakeups() -> u64 {
    tasks()
        .iter()
        .filter_map(|task| std::fs::read_to_string(format!("{task}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("voluntary_ctxt_switches:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn tasks() -> Vec<String> {
    std::fs::read_dir("/proc/self/task").unwrap().flatten().map(|entry| entry.path().display().to_string()).collect()
}
