//! Tests of the index on real SQLite files, and of the `memory` tool through a running
//! [`Recall`].

use std::sync::Arc;

use serde_json::json;

use super::index::{MemoryIndex, Query};
use super::rank::Weights;
use super::settings::RecallSettings;
use super::tool::MemoryTool;
use super::{Recall, RecallSetup};
use crate::history::HistoryStore;
use crate::testing::TempDir;
use crate::turn::builtin::{BuiltinContext, BuiltinTool};

const WEIGHTS: Weights = Weights { vector: 0.7, text: 0.3, half_life_days: 30.0, lambda: 0.7 };

fn query(text: &str) -> Query<'_> {
    Query { text, vector: None, limit: 3, category: None, weights: WEIGHTS, now: 0 }
}

fn workspace() -> TempDir {
    let dir = TempDir::new("recall-ws");
    dir.write("memory/MEMORY.md", "# Memory\n\n## Home\n- Sam lives in Lyon\n- The cat is called Miso\n");
    dir.write("memory/2026-04-16.md", "# 2026-04-16\n\n- 09:12 the wifi password is hunter2\n");
    let history = HistoryStore::new(dir.path());
    history.append("2026-04-03 10:00", "- Sam planted tomatoes by the south wall", None).unwrap();
    dir
}

#[test]
fn the_index_finds_facts_in_every_kind_of_memory_file_with_their_place() {
    let ws = workspace();
    let store = TempDir::new("recall-index");
    let mut index = MemoryIndex::open(&store.path().join("i.sqlite")).unwrap();
    let report = index.sync(ws.path()).unwrap();
    assert_eq!((report.files_read, report.added), (3, 4));
    let hit = |text: &str, index: &mut MemoryIndex| index.search(&query(text)).unwrap().remove(0);
    let wifi = hit("what was the wifi password", &mut index);
    assert_eq!(wifi.location(), "memory/2026-04-16.md:3");
    assert_eq!(wifi.day().as_deref(), Some("2026-04-16"));
    let tomatoes = hit("where are the tomatoes planted", &mut index);
    assert_eq!(tomatoes.location(), "memory/history.jsonl:1 (cursor 1)");
    let cat = hit("cat name", &mut index);
    assert_eq!((cat.text.as_str(), cat.context.as_str()), ("- The cat is called Miso", "Home"));
    assert!(index.search(&query("quantum chromodynamics")).unwrap().is_empty());
}

#[test]
fn unchanged_files_are_skipped_and_history_appends_read_only_the_new_entries() {
    let ws = workspace();
    let store = TempDir::new("recall-incremental");
    let mut index = MemoryIndex::open(&store.path().join("i.sqlite")).unwrap();
    index.sync(ws.path()).unwrap();
    assert_eq!(index.sync(ws.path()).unwrap(), Default::default(), "nothing changed, nothing read");
    HistoryStore::new(ws.path()).append("2026-04-04 10:00", "- Sam bought a blue bicycle", None).unwrap();
    let report = index.sync(ws.path()).unwrap();
    assert_eq!((report.added, report.removed), (1, 0), "only the appended entry");
    let bike = index.search(&query("bicycle")).unwrap().remove(0);
    assert_eq!(bike.location(), "memory/history.jsonl:2 (cursor 2)");
    assert_eq!(index.stats().unwrap().chunks, 5);
}

#[test]
fn an_edit_in_an_editor_is_indexed_and_a_deleted_file_is_dropped() {
    let ws = workspace();
    let store = TempDir::new("recall-edit");
    let mut index = MemoryIndex::open(&store.path().join("i.sqlite")).unwrap();
    index.sync(ws.path()).unwrap();
    ws.write("memory/MEMORY.md", "# Memory\n\n- Sam moved to Berlin\n");
    index.sync(ws.path()).unwrap();
    assert!(index.search(&query("lyon")).unwrap().is_empty());
    assert_eq!(index.search(&query("berlin")).unwrap()[0].text, "- Sam moved to Berlin");
    std::fs::remove_file(ws.path().join("memory/2026-04-16.md")).unwrap();
    index.sync(ws.path()).unwrap();
    assert!(index.search(&query("wifi")).unwrap().is_empty());
}

#[test]
fn a_rebuilt_index_gives_the_same_results() {
    let ws = workspace();
    let store = TempDir::new("recall-rebuild");
    let path = store.path().join("i.sqlite");
    let results = |index: &mut MemoryIndex| -> Vec<(String, String)> {
        ["sam lyon", "wifi password", "tomatoes wall"]
            .iter()
            .flat_map(|q| index.search(&query(q)).unwrap())
            .map(|h| (h.id, format!("{:.6}", h.score)))
            .collect()
    };
    let mut index = MemoryIndex::open(&path).unwrap();
    index.sync(ws.path()).unwrap();
    let before = results(&mut index);
    drop(index);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut rebuilt = MemoryIndex::open(&path).unwrap();
    rebuilt.sync(ws.path()).unwrap();
    assert_eq!(results(&mut rebuilt), before);
}

/// An archive of `entries` history entries that all share the words of `query("turn
/// hello")`, as a long session's consolidations leave it (issue 30: a search every user
/// message read and stemmed its candidates again, so a turn cost more the more was archived).
fn long_archive(entries: usize) -> TempDir {
    let ws = TempDir::new("recall-long");
    let history = HistoryStore::new(ws.path());
    for n in 1..=entries {
        history.append("2026-04-03 10:00", &format!("- echo: turn {n}: hello there"), None).unwrap();
    }
    ws
}

#[test]
fn a_search_repeated_on_an_unchanged_index_reads_no_chunk_again() {
    let ws = long_archive(200);
    let store = TempDir::new("recall-cache");
    let mut index = MemoryIndex::open(&store.path().join("i.sqlite")).unwrap();
    index.sync(ws.path()).unwrap();
    let first = index.search(&query("turn hello")).unwrap();
    let read = index.chunks_read();
    assert!(read > 0 && read <= 60, "the first search reads its candidates only: {read}");
    for n in 0..5 {
        assert_eq!(index.search(&query(&format!("turn {n} hello"))).unwrap().len(), 3);
    }
    assert_eq!(index.search(&query("turn hello")).unwrap(), first, "the same answer from the kept chunks");
    assert_eq!(index.chunks_read(), read, "searches of the same words read nothing more");
}

#[test]
fn a_change_written_by_another_connection_empties_the_readers_kept_chunks() {
    let ws = long_archive(3);
    let store = TempDir::new("recall-cache-change");
    let path = store.path().join("i.sqlite");
    let mut writer = MemoryIndex::open(&path).unwrap();
    let mut reader = MemoryIndex::open(&path).unwrap();
    writer.sync(ws.path()).unwrap();
    assert_eq!(reader.search(&query("turn hello")).unwrap().len(), 3);
    ws.write(
        "memory/history.jsonl",
        "{\"cursor\": 1, \"timestamp\": \"2026-04-03 10:00\", \"content\": \"- turn hello, edited\"}\n",
    );
    writer.sync(ws.path()).unwrap();
    let after: Vec<String> = reader.search(&query("turn hello")).unwrap().into_iter().map(|h| h.text).collect();
    assert_eq!(after, ["- turn hello, edited"], "nothing of the old chunks is served");
    let fresh = MemoryIndex::open(&path).unwrap().search(&query("turn hello")).unwrap();
    assert_eq!(reader.search(&query("turn hello")).unwrap(), fresh, "the same answer as a new connection's");
}

#[test]
fn vectors_are_kept_for_unchanged_chunks_and_dropped_when_the_model_changes() {
    let ws = workspace();
    let store = TempDir::new("recall-vectors");
    let mut index = MemoryIndex::open(&store.path().join("i.sqlite")).unwrap();
    index.use_model(Some("m1")).unwrap();
    index.sync(ws.path()).unwrap();
    let missing = index.missing_vectors(100).unwrap();
    assert_eq!(missing.len(), 4);
    let vectors: Vec<(i64, Vec<f32>)> =
        missing.iter().enumerate().map(|(i, (row, _))| (*row, vec![i as f32, 1.0])).collect();
    index.store_vectors(&vectors).unwrap();
    ws.write("memory/MEMORY.md", "# Memory\n\n## Home\n- Sam lives in Lyon\n- New fact\n");
    index.sync(ws.path()).unwrap();
    assert_eq!(index.missing_vectors(100).unwrap().len(), 1, "only the new chunk needs a vector");
    let semantic = Query { vector: Some(&[3.0, 1.0]), ..query("zzz") };
    assert_eq!(index.search(&semantic).unwrap().len(), 3, "vector search finds chunks without shared words");
    index.use_model(Some("m2")).unwrap();
    assert_eq!(index.stats().unwrap().embedded, 0);
}

fn recall_in(ws: &TempDir, store: &TempDir) -> Recall {
    Recall::start(RecallSetup {
        workspace: ws.path().to_path_buf(),
        index_path: store.path().join("i.sqlite"),
        settings: RecallSettings::default(),
        embedder: None,
        meter: None,
        history: Arc::new(HistoryStore::new(ws.path())),
        timezone: None,
        poll: None,
    })
    .unwrap()
}

#[test]
fn the_memory_tool_stores_recalls_gets_counts_and_forgets() {
    let ws = workspace();
    let store = TempDir::new("recall-tool");
    actix::System::new().block_on(async {
        let tool = MemoryTool::new(recall_in(&ws, &store));
        let context = BuiltinContext::default();
        let call = |args: serde_json::Value| {
            let tool = tool.clone();
            let context = context.clone();
            async move { tool.call(args, &context).await }
        };
        let stored = call(json!({"action": "store", "content": "Sam's passport number ends in 4417"})).await;
        assert_eq!(stored.content, "Stored in memory/MEMORY.md (core memory).");
        let found = call(json!({"action": "recall", "query": "passport number"})).await;
        assert!(found.content.contains("memory/MEMORY.md:6") && found.content.contains("4417"), "{}", found.content);
        let id = found.content[1..13].to_owned();
        let got = call(json!({"action": "get", "id": id})).await;
        assert!(got.content.ends_with("- Sam's passport number ends in 4417"), "{}", got.content);
        let counted = call(json!({"action": "count"})).await;
        assert_eq!(counted.content, "5 memories: core 3, daily 1, conversation 1");
        let forgot = call(json!({"action": "forget", "query": "passport"})).await;
        assert!(forgot.content.starts_with("Removed 1 piece(s)"), "{}", forgot.content);
        let again = call(json!({"action": "recall", "query": "passport number"})).await;
        assert_eq!(again.content, "Nothing in memory matches \"passport number\".");
        let bad = call(json!({"action": "forget", "query": "a"})).await;
        assert!(bad.is_error);
        let unknown = call(json!({"action": "teleport"})).await;
        assert!(unknown.is_error && unknown.content.contains("store, recall"), "{}", unknown.content);
    });
    assert!(!ws.read("memory/MEMORY.md").contains("passport"));
}
