//! `GET /api/status`: each plugin's state, pid, restarts and last error, the channels among
//! them, and token usage per UTC day over the last two weeks. Nothing secret: no config, no
//! command lines with their environment.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Value, json};

use crate::plugin::PluginHost;
use crate::usage::{Price, UsageLog, summarise};

/// How many days of usage are shown.
const USAGE_DAYS: u64 = 14;

/// The status report; `restarts` counts each plugin's restarts after dying, as its host does.
pub fn report(host: &PluginHost, usage: &UsageLog, prices: &BTreeMap<String, Price>) -> Value {
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
    json!({"plugins": plugins, "usage": days})
}
