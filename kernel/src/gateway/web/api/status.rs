//! `GET /api/status`: each plugin's state, pid, restarts and last error, the channels among
//! them, token usage, cost and model-call time per UTC day and per source over the last two
//! weeks, the latest turns' durations, and how full each session's context was after its last
//! turn. Nothing secret: no config, no command lines with their environment, no message text.

use std::collections::BTreeMap;

use chrono::{NaiveDate, Utc};
use serde_json::{Value, json};

use crate::plugin::PluginHost;
use crate::usage::{GroupBy, Price, UsageEntry, UsageStore, group, summarise};

/// How many days of usage are shown.
const USAGE_DAYS: u64 = 14;
/// How many of the latest turns' durations are shown.
const LATEST_TURNS: usize = 60;
/// How many sessions' context fill is shown (the most recently active).
const CONTEXT_SESSIONS: usize = 12;

/// The status report; `restarts` counts each plugin's restarts after dying, as its host does;
/// `window` is the model's context window in tokens.
pub fn report(host: &PluginHost, usage: &dyn UsageStore, prices: &BTreeMap<String, Price>, window: u64) -> Value {
    let plugins: Vec<Value> = host
        .statuses()
        .iter()
        .map(|s| {
            json!({"name": s.name, "kind": String::from(s.kind.clone()), "state": s.state, "pid": s.pid,
                "restarts": s.restarts, "last_error": s.reason,
                "tools": s.tools.len(), "refused": s.refused})
        })
        .collect();
    let entries = usage.entries(Utc::now().date_naive(), USAGE_DAYS);
    let (days, _) = summarise(&entries, prices);
    let days: Vec<Value> = days
        .iter()
        .rev()
        .map(|(day, totals)| {
            json!({"day": day.to_string(), "turns": totals.turns, "prompt": totals.prompt, "cached": totals.cached,
                "completion": totals.completion, "cost": totals.cost})
        })
        .collect();
    json!({"plugins": plugins, "usage": days, "sources": per_source_per_day(&entries, prices),
        "turns": latest_turns(&entries), "contexts": context_fill(&entries, window)})
}

/// Tokens (reasoning too), cache hits, calls and cost of each source (Dream per phase) on each
/// day, oldest day first.
fn per_source_per_day(entries: &[(NaiveDate, UsageEntry)], prices: &BTreeMap<String, Price>) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut by_day: BTreeMap<NaiveDate, Vec<(NaiveDate, UsageEntry)>> = BTreeMap::new();
    for (day, entry) in entries {
        by_day.entry(*day).or_default().push((*day, entry.clone()));
    }
    for (day, entries) in by_day {
        for (source, totals) in group(&entries, prices, GroupBy::Source) {
            rows.push(json!({"day": day.to_string(), "source": source, "prompt": totals.prompt,
                "cached": totals.cached, "completion": totals.completion, "reasoning": totals.reasoning,
                "turns": totals.turns, "calls": totals.calls, "cost": totals.cost,
                "call_ms": totals.call_ms, "timed_calls": totals.timed_calls}));
        }
    }
    rows
}

/// The latest turns that recorded their duration, oldest first.
fn latest_turns(entries: &[(NaiveDate, UsageEntry)]) -> Vec<Value> {
    let timed: Vec<&UsageEntry> = entries.iter().map(|(_, entry)| entry).filter(|entry| entry.ms.is_some()).collect();
    let skip = timed.len().saturating_sub(LATEST_TURNS);
    timed[skip..]
        .iter()
        .map(|entry| json!({"at": entry.at, "session": entry.session, "source": entry.source(), "ms": entry.ms}))
        .collect()
}

/// Each recently active session's prompt size after its last turn, against the window,
/// most recent first.
fn context_fill(entries: &[(NaiveDate, UsageEntry)], window: u64) -> Vec<Value> {
    let mut latest: Vec<&UsageEntry> = Vec::new();
    for (_, entry) in entries.iter().rev() {
        if entry.context.is_some() && !latest.iter().any(|seen| seen.session == entry.session) {
            latest.push(entry);
        }
    }
    latest
        .iter()
        .take(CONTEXT_SESSIONS)
        .map(|entry| json!({"session": entry.session, "tokens": entry.context, "window": window}))
        .collect()
}
