//! Tests of the consolidation loop with fixed token counts and an in-process summariser.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::history::HistoryEntry;
use crate::message::Role;
use crate::session::SessionStore;
use crate::testing::TempDir;

/// Every message counts `per_message` tokens; the fixed part `fixed`.
struct Counted {
    per_message: u64,
    fixed: u64,
}

impl Estimator for Counted {
    fn total(&mut self, session: &Session) -> u64 {
        self.fixed + self.per_message * session.unconsolidated().len() as u64
    }
    fn message(&mut self, _: &Session, _: usize) -> u64 {
        self.per_message
    }
}

/// Summarises as "- summary of N messages", or fails when `fail` is set.
struct Scripted<'a> {
    fail: bool,
    calls: &'a AtomicUsize,
}

impl Summarizer for Scripted<'_> {
    async fn summarize(&self, messages: &[ChatMessage]) -> Result<String, ProviderError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.fail {
            Err(ProviderError::Server { status: 500, message: "HTTP 500".into() })
        } else {
            Ok(format!("- summary of {} messages", messages.len()))
        }
    }
}

struct Fixture {
    dir: TempDir,
    store: SessionStore,
    history: HistoryStore,
    session: SharedSession,
    calls: AtomicUsize,
}

/// A session of `turns` user/assistant pairs, saved to disk.
fn fixture(name: &str, turns: usize) -> Fixture {
    let dir = TempDir::new(name);
    let store = SessionStore::in_dir(dir.path());
    let mut session = store.load("cli:direct").unwrap().session;
    let messages = (0..turns)
        .flat_map(|i| {
            [ChatMessage::text(Role::User, format!("q{i}")), ChatMessage::text(Role::Assistant, format!("a{i}"))]
        })
        .collect();
    store.append(&mut session, messages).unwrap();
    let history = HistoryStore::new(dir.path());
    Fixture { dir, store, history, session: Arc::new(Mutex::new(Some(session))), calls: AtomicUsize::new(0) }
}

impl Fixture {
    fn run(&self, budget: Budget, per_message: u64, fail: bool) -> Consolidation<'_, Counted, Scripted<'_>> {
        Consolidation {
            session: &self.session,
            store: &self.store,
            history: &self.history,
            estimator: Counted { per_message, fixed: 100 },
            summarizer: Scripted { fail, calls: &self.calls },
            budget,
            timezone: None,
        }
    }

    fn last_consolidated(&self) -> usize {
        self.session.lock().unwrap().as_ref().unwrap().last_consolidated
    }

    fn on_disk_last_consolidated(&self) -> usize {
        self.store.load("cli:direct").unwrap().session.last_consolidated
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

#[test]
fn budget_is_the_window_minus_the_reply_and_a_safety_margin() {
    assert_eq!(Budget::new(65_536, 8192), Budget { limit: 56_320, target: 28_160 });
}

#[test]
fn nothing_happens_one_token_below_the_limit() {
    let f = fixture("below", 10); // 20 messages × 10 + 100 = 300
    let report = block_on(f.run(Budget { limit: 301, target: 150 }, 10, false).over_budget()).unwrap();
    assert_eq!((report.rounds, report.tokens_before), (0, 300));
    assert_eq!(f.calls.load(Ordering::Relaxed), 0);
    assert!(!f.history.path().exists());
}

#[test]
fn reaching_the_limit_archives_until_half_of_it() {
    let f = fixture("at-limit", 10);
    let budget = Budget { limit: 300, target: 150 };
    let report = block_on(f.run(budget, 10, false).over_budget()).unwrap();
    assert_eq!(report.tokens_before, 300);
    assert!(report.tokens_after <= 150, "{report:?}");
    // 300 - 150 = 150 tokens = 15 messages; the first user turn at or after that is index 16.
    assert_eq!(f.last_consolidated(), 16);
    assert_eq!(f.on_disk_last_consolidated(), 16);
    assert_eq!(report.tokens_after, 100 + 4 * 10);
    let entries = f.history.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].content, "- summary of 16 messages");
    assert_eq!((entries[0].session.as_deref(), entries[0].through), (Some("cli:direct"), Some(16)));
}

#[test]
fn big_sessions_take_several_rounds_of_at_most_sixty_messages() {
    let f = fixture("rounds", 100); // 200 messages
    let report = block_on(f.run(Budget { limit: 1000, target: 500 }, 10, false).over_budget()).unwrap();
    assert!(report.rounds >= 2 && report.rounds <= MAX_ROUNDS, "{report:?}");
    assert!(report.tokens_after <= 500);
    let entries = f.history.entries().unwrap();
    let mut previous = 0;
    for entry in &entries {
        let through = entry.through.unwrap();
        assert!(through - previous <= 60, "slice {previous}..{through}");
        previous = through;
    }
    assert_eq!(entries.iter().map(|e| e.cursor).collect::<Vec<_>>(), (1..=entries.len() as u64).collect::<Vec<_>>());
}

#[test]
fn at_most_five_rounds_run_even_when_the_target_is_not_reached() {
    let f = fixture("five", 400);
    let report = block_on(f.run(Budget { limit: 10, target: 5 }, 10, false).over_budget()).unwrap();
    assert_eq!(report.rounds, MAX_ROUNDS);
    assert!(report.tokens_after > 5);
}

#[test]
fn a_failed_summary_is_archived_raw_and_no_message_is_lost() {
    let f = fixture("raw", 10);
    let report = block_on(f.run(Budget { limit: 300, target: 150 }, 10, true).over_budget()).unwrap();
    assert_eq!(report.raw, 1);
    let entry: HistoryEntry = f.history.entries().unwrap().remove(0);
    assert!(entry.content.starts_with("[RAW] 16 messages\n"), "{}", entry.content);
    for i in 0..8 {
        assert!(
            entry.content.contains(&format!("USER: q{i}\n")) && entry.content.contains(&format!("ASSISTANT: a{i}"))
        );
    }
}

#[test]
fn archiving_everything_leaves_nothing_unconsolidated() {
    let f = fixture("everything", 50); // 100 messages: two slices
    let report = block_on(f.run(Budget::new(65_536, 8192), 10, false).everything()).unwrap();
    assert_eq!(report.messages, 100);
    assert_eq!(f.last_consolidated(), 100);
    assert_eq!(f.history.entries().unwrap().last().unwrap().through, Some(100));
}

#[test]
fn a_kill_between_the_history_entry_and_the_session_save_is_repaired_without_a_duplicate() {
    let f = fixture("recover", 10);
    // The history got the slice 0..16, the session file did not learn of it.
    f.history
        .append("2026-04-03 00:02", "- summary", Some(Origin { session: "cli:direct".into(), through: 16 }))
        .unwrap();
    let report = block_on(f.run(Budget { limit: 300, target: 150 }, 10, false).over_budget()).unwrap();
    assert_eq!(report.rounds, 0, "the estimate after recovery is under the limit");
    assert_eq!(f.last_consolidated(), 16);
    assert_eq!(f.on_disk_last_consolidated(), 16);
    assert_eq!(f.history.entries().unwrap().len(), 1);
    drop(f.dir);
}

#[test]
fn archived_messages_leave_memory_and_later_slices_keep_indices_from_the_sessions_start() {
    // Issue 30: a session kept every message of its life in memory.
    let f = fixture("forget", 100); // 200 messages
    let budget = Budget { limit: 1000, target: 500 };
    block_on(f.run(budget, 10, false).over_budget()).unwrap();
    let first = f.last_consolidated();
    {
        let guard = f.session.lock().unwrap();
        let session = guard.as_ref().unwrap();
        assert_eq!(session.offset, first, "nothing archived is left in memory");
        assert_eq!(session.messages.len(), 200 - first);
        assert_eq!(session.message_count(), 200);
    }
    // More turns, then a second consolidation: its marks count from the session's start.
    {
        let mut guard = f.session.lock().unwrap();
        let session = guard.as_mut().unwrap();
        let more = (100..150)
            .flat_map(|i| {
                [ChatMessage::text(Role::User, format!("q{i}")), ChatMessage::text(Role::Assistant, format!("a{i}"))]
            })
            .collect();
        f.store.append(session, more).unwrap();
    }
    block_on(f.run(budget, 10, false).over_budget()).unwrap();
    let entries = f.history.entries().unwrap();
    let marks: Vec<usize> = entries.iter().map(|e| e.through.unwrap()).collect();
    assert!(marks.windows(2).all(|w| w[0] < w[1]) && *marks.last().unwrap() == f.last_consolidated(), "{marks:?}");
    assert!(f.last_consolidated() > first);
    let summarised: usize = entries
        .iter()
        .map(|e| e.content.trim_start_matches("- summary of ").trim_end_matches(" messages"))
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert_eq!(summarised, f.last_consolidated(), "every archived message summarised once, none twice");
    let loaded = f.store.load("cli:direct").unwrap().session;
    assert_eq!((loaded.messages.len(), loaded.last_consolidated), (300, f.last_consolidated()));
    assert_eq!(loaded.messages[0].text_content(), "q0", "the file keeps every message");
}
