//! `GET /health` on `gateway.host:gateway.port`: the kernel's and every plugin's state, as
//! JSON. A deliberately tiny HTTP/1.1 responder: one request per connection.

use std::rc::Rc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

/// Serves `/health` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, source: HealthSource) {
    let source = Rc::new(source);
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let source = source.clone();
        actix::spawn(async move {
            if let Err(error) = answer(socket, &source).await {
                tracing::debug!(%error, "health request failed");
            }
        });
    }
}

async fn answer(mut socket: TcpStream, source: &HealthSource) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 4096];
    let mut read = 0;
    while !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") && read < buffer.len() {
        let n = socket.read(&mut buffer[read..]).await?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let request = String::from_utf8_lossy(&buffer[..read]);
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if request.starts_with("GET ") && (path == "/health" || path == "/health/") {
        let mut report = (source.report)();
        report["uptime_secs"] = json!(source.started.elapsed().as_secs());
        // `down` fails the check (503) for monitors that only look at the status code.
        let code = if report["status"] == "down" { "503 Service Unavailable" } else { "200 OK" };
        (code, report.to_string())
    } else {
        ("404 Not Found", json!({"error": "not found; try GET /health"}).to_string())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}
