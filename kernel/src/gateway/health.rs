//! `GET /health` on `gateway.host:gateway.port`: the kernel's and every plugin's state, as
//! JSON (served by [`super::web`], with or without the web UI).

use std::rc::Rc;
use std::time::Instant;

use serde_json::{Value, json};

use oxibot_proto::PeerKind;

use crate::plugin::{PluginHost, PluginStatus};

/// What the endpoint reports from.
pub struct HealthSource {
    /// Builds the current report (see [`report`]).
    pub report: Rc<dyn Fn() -> Value>,
    /// When the gateway started.
    pub started: Instant,
}

/// The report for `host`: every plugin's name, kind, state, pid and restart reason, and an
/// overall `status`: `ok` when every plugin runs, `degraded` (with `reasons`) when some do
/// not, `down` when channels are configured and every one of them has failed or is
/// restarting (a plugin starting for the first time is no fault).
pub fn report(host: &PluginHost, started: Instant) -> Value {
    let statuses = host.statuses();
    let plugins: Vec<Value> = statuses
        .iter()
        .map(|s| {
            json!({"name": s.name, "kind": String::from(s.kind.clone()), "state": s.state, "pid": s.pid,
                "reason": s.reason, "refused": s.refused})
        })
        .collect();
    let reasons: Vec<String> = statuses.iter().filter_map(problem).collect();
    let channels: Vec<_> = statuses.iter().filter(|s| s.kind == PeerKind::Channel).collect();
    let channel_down = |s: &&PluginStatus| s.state != "running" && problem(s).is_some();
    let status = if !channels.is_empty() && channels.iter().all(channel_down) {
        "down"
    } else if reasons.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    json!({"status": status, "reasons": reasons, "pid": std::process::id(), "uptime_secs": started.elapsed().as_secs(),
        "plugins": plugins})
}

/// What is wrong with one plugin, if anything: not running, or running with refused tools.
fn problem(status: &PluginStatus) -> Option<String> {
    let kind = if status.kind == PeerKind::Channel { "channel" } else { "plugin" };
    match (status.state, &status.reason) {
        // Starting for the first time, or waiting for a first call, is not a fault; a restart
        // or a failure is.
        ("starting" | "idle", _) => None,
        ("running", _) if status.refused.is_empty() => None,
        ("running", _) => Some(format!("{kind} {}: {}", status.name, status.refused.join("; "))),
        (state, Some(reason)) => Some(format!("{kind} {} is {state}: {reason}", status.name)),
        (state, None) => Some(format!("{kind} {} is {state}", status.name)),
    }
}

/// The current report and its status code: `down` fails the check (503) for monitors that
/// only look at the status code.
pub fn current(source: &HealthSource) -> (u16, Value) {
    let mut report = (source.report)();
    report["uptime_secs"] = json!(source.started.elapsed().as_secs());
    let code = if report["status"] == "down" { 503 } else { 200 };
    (code, report)
}
