//! Memory recall benchmarks on a generated corpus: 10,000 history entries and 200 queries
//! with known answers (fixed seed), searched by BM25 alone and by the hybrid (BM25 + the
//! scripted LLM's hashed bag-of-words embeddings, through the real `/v1/embeddings` client).
//! Prints recall@3, search latency, index build and per-entry update time, index size, and
//! what auto-recall adds to a turn.
//!
//! Run: `cargo bench -p oxibot-tests --bench recall`
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use oxibot_kernel::config::{Config, ProviderConfig};
use oxibot_kernel::history::HistoryStore;
use oxibot_kernel::memory::recall::auto::recall_for_message;
use oxibot_kernel::memory::recall::settings::RecallSettings;
use oxibot_kernel::memory::recall::{Recall, RecallSetup};
use oxibot_kernel::provider::Embedder;
use oxibot_tests::TempDir;
use oxibot_tests::bench::sized;
use oxibot_tests::llm::ScriptedLlm;
use serde_json::json;

const ENTRIES: usize = sized(10_000, 300);
const QUERIES: usize = sized(200, 20);
const SEED: u64 = 0x5eed_2026;

/// xorshift64*: small, fixed, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const PEOPLE: &[&str] = &[
    "Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lucia", "Mateo",
    "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin", "Umar", "Vera", "Wendell", "Ximena", "Yusuf",
    "Zoe", "Amara", "Bjorn", "Carmen", "Dario", "Esme", "Felix", "Gwen", "Hector", "Ilse", "Jamal",
];
/// (past, base) forms: regular verbs meet under stemming, irregular ones do not.
const VERBS: &[(&str, &str)] = &[
    ("bought", "buy"),
    ("repaired", "repair"),
    ("planted", "plant"),
    ("borrowed", "borrow"),
    ("painted", "paint"),
    ("sold", "sell"),
    ("lost", "lose"),
    ("found", "find"),
    ("ordered", "order"),
    ("returned", "return"),
    ("cleaned", "clean"),
    ("moved", "move"),
];
const ADJECTIVES: &[&str] = &[
    "blue", "oak", "rusty", "vintage", "folding", "electric", "ceramic", "wool", "leather", "copper", "striped",
    "tiny", "heavy", "spare", "cracked", "antique", "green", "silver", "bamboo", "glass", "marble", "canvas",
];
const NOUNS: &[&str] = &[
    "bicycle",
    "table",
    "kettle",
    "lamp",
    "umbrella",
    "guitar",
    "ladder",
    "teapot",
    "backpack",
    "mirror",
    "bookshelf",
    "scooter",
    "blender",
    "wardrobe",
    "telescope",
    "hammock",
    "typewriter",
    "sewing",
    "easel",
    "compass",
    "aquarium",
    "microscope",
    "trombone",
    "skateboard",
    "projector",
    "toaster",
    "chessboard",
    "birdhouse",
    "lantern",
    "wheelbarrow",
    "thermos",
    "harmonica",
    "suitcase",
    "raincoat",
    "tripod",
];
const PLACES: &[&str] = &[
    "market",
    "harbour",
    "garage",
    "library",
    "bakery",
    "station",
    "workshop",
    "garden centre",
    "flea market",
    "hardware store",
    "post office",
    "museum shop",
    "school fair",
    "town hall",
    "pharmacy",
    "marina",
];
const FILLER: &[&str] = &[
    "It was raining all afternoon.",
    "The queue was long.",
    "They paid in cash.",
    "Everyone was in a hurry.",
    "The weather was mild.",
    "A friend helped carry it.",
    "It took longer than planned.",
    "Prices were up again.",
    "The shop closed early.",
    "Nobody else was there.",
    "It was a quiet day.",
    "The bus was late.",
];

/// One generated fact and the query that should find it.
struct Fact {
    entry: String,
    query: String,
    cursor: u64,
}

/// Entries, and queries with known answers: the person, the object and the verb's base
/// form; every fourth query misspells the object (two letters swapped).
fn corpus() -> (Vec<Fact>, Vec<usize>) {
    let mut rng = Rng(SEED);
    let mut facts = Vec::with_capacity(ENTRIES);
    for n in 0..ENTRIES {
        let person = rng.pick(PEOPLE);
        let (past, base) = VERBS[(rng.next() % VERBS.len() as u64) as usize];
        let adjective = rng.pick(ADJECTIVES);
        let noun = rng.pick(NOUNS);
        let place = rng.pick(PLACES);
        let filler = rng.pick(FILLER);
        let entry = format!("- {person} {past} the {adjective} {noun} at the {place}. {filler}");
        let mut object = noun.to_owned();
        if n % 4 == 0 && object.len() > 4 {
            let mut chars: Vec<char> = object.chars().collect();
            let at = chars.len() - 3;
            chars.swap(at, at + 1);
            object = chars.into_iter().collect();
        }
        let query = format!("when did {person} {base} the {adjective} {object}?");
        facts.push(Fact { entry, query, cursor: n as u64 + 1 });
    }
    let mut asked = Vec::with_capacity(QUERIES);
    while asked.len() < QUERIES {
        let at = (rng.next() % ENTRIES as u64) as usize;
        // A query must have one answer: skip facts whose person, verb, adjective and noun
        // repeat elsewhere.
        let key = |f: &Fact| f.entry.split(" at the ").next().map(str::to_owned);
        if !asked.contains(&at) && facts.iter().filter(|f| key(f) == key(&facts[at])).count() == 1 {
            asked.push(at);
        }
    }
    (facts, asked)
}

fn write_history(workspace: &std::path::Path, facts: &[Fact]) {
    let lines: String = facts
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let day = 1 + n % 28;
            let month = 1 + (n / 28) % 12;
            format!(
                "{}\n",
                json!({"cursor": f.cursor, "timestamp": format!("2026-{month:02}-{day:02} 10:00"), "content": f.entry})
            )
        })
        .collect();
    std::fs::create_dir_all(workspace.join("memory")).unwrap();
    std::fs::write(workspace.join("memory/history.jsonl"), lines).unwrap();
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn start_recall(
    workspace: &std::path::Path,
    index: &std::path::Path,
    settings: RecallSettings,
    embedder: Option<Embedder>,
) -> Recall {
    Recall::start(RecallSetup {
        workspace: workspace.to_path_buf(),
        index_path: index.to_path_buf(),
        settings,
        embedder,
        meter: None,
        history: Arc::new(HistoryStore::new(workspace)),
        timezone: None,
        poll: None,
    })
    .unwrap()
}

async fn measure(name: &str, recall: &Recall, facts: &[Fact], asked: &[usize]) {
    let mut latencies = Vec::new();
    let mut found = 0;
    for &at in asked {
        let start = Instant::now();
        let hits = recall.search(&facts[at].query, 3, None).await.unwrap();
        latencies.push(start.elapsed());
        if hits.iter().any(|h| h.cursor == Some(facts[at].cursor)) {
            found += 1;
        }
    }
    let misspelt: Vec<usize> = asked.iter().copied().filter(|at| at % 4 == 0).collect();
    let mut found_misspelt = 0;
    for &at in &misspelt {
        let hits = recall.search(&facts[at].query, 3, None).await.unwrap();
        found_misspelt += usize::from(hits.iter().any(|h| h.cursor == Some(facts[at].cursor)));
    }
    println!(
        "{name}: recall@3 {:.1}% ({found}/{}; misspelt queries {found_misspelt}/{}), search p50 {:.2} ms, p99 {:.2} ms, min {:.2} ms, max {:.2} ms",
        100.0 * found as f64 / asked.len() as f64,
        asked.len(),
        misspelt.len(),
        ms(percentile(&mut latencies, 0.5)),
        ms(percentile(&mut latencies, 0.99)),
        ms(percentile(&mut latencies, 0.0)),
        ms(percentile(&mut latencies, 1.0)),
    );
}

fn main() {
    oxibot_tests::bench::announce_short_run();
    println!(
        "oxibot recall benchmarks: {ENTRIES} history entries, {QUERIES} queries with known answers (seed {SEED:#x})\n"
    );
    let (facts, asked) = corpus();
    let llm = ScriptedLlm::start();
    actix::System::new().block_on(async {
        // BM25 alone.
        let ws = TempDir::new("recall-bench");
        write_history(ws.path(), &facts);
        let index_path = ws.path().join("index/bm25.sqlite");
        let recall = start_recall(ws.path(), &index_path, RecallSettings::default(), None);
        let start = Instant::now();
        recall.sync().await.unwrap();
        let build = start.elapsed();
        let stats = recall.read(|index| { index.checkpoint()?; index.stats() }).await.unwrap();
        println!(
            "BM25 index: built in {:.0} ms, {} chunks, {:.1} MiB on disk",
            ms(build),
            stats.chunks,
            stats.bytes as f64 / (1024.0 * 1024.0)
        );
        measure("BM25", &recall, &facts, &asked).await;

        // Auto-recall as a turn runs it: search, threshold, de-duplication, rendering.
        let system = "# oxibot\n\nYou are oxibot.\n".repeat(200);
        let mut added = Vec::new();
        let mut recalled = 0;
        for &at in &asked {
            let start = Instant::now();
            let block = recall_for_message(&recall, &facts[at].query, &[&system]).await;
            added.push(start.elapsed());
            recalled += usize::from(block.is_some());
        }
        println!(
            "auto-recall added to a turn (BM25): p50 {:.2} ms, p99 {:.2} ms, min {:.2} ms, max {:.2} ms ({recalled}/{} messages got recalled memory)",
            ms(percentile(&mut added, 0.5)),
            ms(percentile(&mut added, 0.99)),
            ms(percentile(&mut added, 0.0)),
            ms(percentile(&mut added, 1.0)),
            asked.len()
        );

        // Incremental update: one new entry appended, then a sync.
        let history = HistoryStore::new(ws.path());
        let mut updates = Vec::new();
        for n in 0..100 {
            history.append("2026-12-31 10:00", &format!("- Update number {n} about the green lantern"), None).unwrap();
            let start = Instant::now();
            recall.sync().await.unwrap();
            updates.push(start.elapsed());
        }
        println!(
            "index update per new history entry: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms(percentile(&mut updates, 0.5)),
            ms(percentile(&mut updates, 0.99)),
            ms(percentile(&mut updates, 1.0))
        );
        let mut unchanged = Vec::new();
        for _ in 0..100 {
            let start = Instant::now();
            recall.sync().await.unwrap();
            unchanged.push(start.elapsed());
        }
        println!("sync with nothing changed (the poll): p50 {:.2} ms\n", ms(percentile(&mut unchanged, 0.5)));

        // Hybrid: the same corpus, embeddings from the scripted LLM's /v1/embeddings.
        let ws = TempDir::new("recall-bench-hybrid");
        write_history(ws.path(), &facts);
        let mut config = Config::default();
        config.agents.defaults.model = "test-model".into();
        config.agents.defaults.provider = "custom".into();
        config.providers.insert("custom".into(), ProviderConfig { api_key: Some("k".into()), api_base: Some(llm.base_url()), ..Default::default() });
        let embedder = Embedder::from_config(&config.llm(), "scripted-embedding").unwrap();
        let settings = RecallSettings { embedding: Some("scripted-embedding".into()), ..RecallSettings::default() };
        let recall = start_recall(ws.path(), &ws.path().join("index/hybrid.sqlite"), settings, Some(embedder));
        let start = Instant::now();
        recall.sync().await.unwrap();
        let build = start.elapsed();
        let stats = recall.read(|index| { index.checkpoint()?; index.stats() }).await.unwrap();
        println!(
            "hybrid index: built in {:.0} ms with {} embeddings over HTTP, {:.1} MiB on disk",
            ms(build),
            stats.embedded,
            stats.bytes as f64 / (1024.0 * 1024.0)
        );
        measure("hybrid (BM25 0.3 + hashed bag-of-words vectors 0.7)", &recall, &facts, &asked).await;
    });
}
