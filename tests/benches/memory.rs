//! Memory benchmarks: tokenizer load cost and encoding throughput, the per-turn memory
//! bookkeeping on sessions of growing length, and one consolidation round without its LLM
//! call.
//!
//! Run: `cargo bench -p oxibot-tests --bench memory`
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oxibot_kernel::history::HistoryStore;
use oxibot_kernel::memory::consolidator::{Budget, Consolidation, SharedSession, Summarizer};
use oxibot_kernel::memory::consolidator_actor::LedgerEstimator;
use oxibot_kernel::memory::tokens::{TokenLedger, exact_tokens};
use oxibot_kernel::message::{ChatMessage, Role};
use oxibot_kernel::provider::ProviderError;
use oxibot_kernel::session::SessionStore;
use oxibot_tests::TempDir;
use oxibot_tests::bench::sized;

const RUNS: usize = sized(5, 1);

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!("oxibot memory benchmarks (figures: median over {RUNS} runs with min–max, unless noted)\n");
    tokenizer_load();
    encoding_throughput();
    for length in [100, 1_000, 10_000] {
        bookkeeping(length, false);
    }
    bookkeeping(10_000, true);
    consolidation_round();
}

fn rss_kb() -> u64 {
    oxibot_tests::procs::rss_kb("self")
}

fn tokenizer_load() {
    let before = rss_kb();
    let start = Instant::now();
    exact_tokens("warm up");
    let load = start.elapsed();
    println!(
        "tokenizer load (cl100k_base, first use in the process)\n    {:.1} ms, RSS +{:.1} MB\n",
        ms(load),
        (rss_kb().saturating_sub(before)) as f64 / 1024.0
    );
}

fn sample_text() -> String {
    let prose = "The backup job runs at 02:00 and keeps seven daily copies under /srv/backup. ";
    let code = "fn main() { let total: u64 = (1..=10).sum(); println!(\"{total}\"); }\n";
    let json = r#"{"path": "memory/MEMORY.md", "old_text": "- likes tea", "new_text": "- likes green tea"}"#;
    let cjk = "東京の天気は晴れです。明日は雨が降るかもしれません。";
    format!("{}{}{}{}", prose.repeat(400), code.repeat(200), json.repeat(100), cjk.repeat(100))
}

fn encoding_throughput() {
    let text = sample_text();
    let mut rates = Vec::new();
    let mut tokens = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        tokens = exact_tokens(&text);
        rates.push(tokens as f64 / start.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "exact encoding of a {:.0} KB mixed text ({tokens} tokens)\n    {:.2} M tokens/s (min {:.2}, max {:.2}), {:.1} MB/s\n",
        text.len() as f64 / 1024.0,
        rates[RUNS / 2] / 1e6,
        rates[0] / 1e6,
        rates[RUNS - 1] / 1e6,
        rates[RUNS / 2] * text.len() as f64 / tokens as f64 / 1e6
    );
}

/// Answers at once, so only the kernel's work is timed.
struct Instant0;

impl Summarizer for Instant0 {
    async fn summarize(&self, messages: &[ChatMessage]) -> Result<String, ProviderError> {
        Ok(format!("- {} messages about the garden", messages.len()))
    }
}

/// A consolidation as the `ConsolidatorActor` builds it, with the instant summariser.
fn consolidation<'a>(
    session: &'a SharedSession,
    store: &'a SessionStore,
    history: &'a HistoryStore,
    ledger: &'a Mutex<TokenLedger>,
    fixed: &'a str,
    budget: Budget,
) -> Consolidation<'a, LedgerEstimator<'a>, Instant0> {
    Consolidation {
        session,
        store,
        history,
        estimator: LedgerEstimator { ledger, fixed, limit: budget.limit },
        summarizer: Instant0,
        budget,
        timezone: None,
    }
}

fn message(i: usize) -> ChatMessage {
    ChatMessage::text(
        if i.is_multiple_of(2) { Role::User } else { Role::Assistant },
        format!("message number {i}: the tomatoes go by the south wall, the basil beside them"),
    )
}

/// A session of `length` messages, all but the last 20 consolidated, saved to disk.
fn session(dir: &TempDir, length: usize) -> (SessionStore, SharedSession) {
    let store = SessionStore::in_dir(dir.path());
    let mut session = store.load("bench:memory").unwrap().session;
    store.append(&mut session, (0..length).map(message).collect()).unwrap();
    session.last_consolidated = length.saturating_sub(20);
    store.save_metadata(&mut session).unwrap();
    (store, Arc::new(Mutex::new(Some(session))))
}

/// The bookkeeping of one turn: two messages appended, then the consolidator's check
/// (history lookup for crash recovery, ledger sync, estimate); nothing is archived.
fn bookkeeping(length: usize, near_budget: bool) {
    let dir = TempDir::new("memory-bench");
    let (store, shared) = session(&dir, length);
    let history = HistoryStore::new(dir.path());
    let ledger = Mutex::new(TokenLedger::default());
    let fixed = "system prompt ".repeat(500);
    // Near the budget the bound is over the limit, so the estimate counts exactly (cached).
    let budget = if near_budget {
        Budget { limit: 2_000, target: 1_000_000 }
    } else {
        Budget { limit: 1_000_000, target: 500_000 }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut next = length;
    for _ in 0..RUNS {
        let mut samples = Vec::new();
        for _ in 0..200 {
            {
                let mut guard = shared.lock().unwrap();
                let session = guard.as_mut().unwrap();
                session.messages.extend([message(next), message(next + 1)]);
                next += 2;
            }
            let start = Instant::now();
            let mut consolidation = consolidation(&shared, &store, &history, &ledger, &fixed, budget);
            let report = runtime.block_on(consolidation.over_budget()).unwrap();
            samples.push(start.elapsed());
            assert_eq!(report.rounds, 0);
        }
        samples.sort();
        p50s.push(samples[samples.len() / 2]);
        p99s.push(samples[samples.len() * 99 / 100]);
    }
    let label =
        if near_budget { "near its budget (exact counts, cached)" } else { "far from its budget (byte bounds only)" };
    println!(
        "per-turn memory bookkeeping, session of {length} messages {label}\n    p50 {:.1} µs (min {:.1}, max {:.1}), p99 {:.1} µs\n",
        us(median(&p50s)),
        us(*p50s.iter().min().unwrap()),
        us(*p50s.iter().max().unwrap()),
        us(median(&p99s))
    );
}

/// One archiving round on a 10,000-message session: cut, history append (fsync), session
/// metadata save, re-estimate — everything but the model call.
fn consolidation_round() {
    let mut samples = Vec::new();
    let mut archived = 0;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for _ in 0..RUNS * 4 {
        let dir = TempDir::new("memory-bench-round");
        let (store, shared) = session(&dir, 10_000);
        {
            let mut guard = shared.lock().unwrap();
            let session = guard.as_mut().unwrap();
            session.last_consolidated = 9_900;
        }
        let history = HistoryStore::new(dir.path());
        let ledger = Mutex::new(TokenLedger::default());
        let fixed = String::new();
        let budget = Budget { limit: 100, target: 1_500 };
        let mut consolidation = consolidation(&shared, &store, &history, &ledger, &fixed, budget);
        let start = Instant::now();
        let report = runtime.block_on(consolidation.over_budget()).unwrap();
        samples.push(start.elapsed());
        assert_eq!(report.rounds, 1, "{report:?}");
        archived = report.messages;
    }
    samples.sort();
    println!(
        "one consolidation round without the LLM call ({archived}-message slice of a 10,000-message session: cut, exact counts, history append with fsync, metadata save)\n    p50 {:.2} ms (min {:.2}, max {:.2}) over {} rounds\n",
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
