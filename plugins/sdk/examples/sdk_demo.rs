//! A small plugin built on the SDK, used by the integration tests to exercise the SDK's own
//! behaviour: `shout` answers, `crash` panics (reported, then a clean exit), and `nap` sleeps
//! and then leaves a marker file, so a test can see that a cancelled call stopped working. `nap`
//! can also leave a file when it starts and one when it is dropped before finishing, so the
//! test knows when to cancel and sees the cancellation happen instead of waiting for it.

use std::process::ExitCode;
use std::time::Duration;

use oxibot_plugin::{CallContext, Plugin, Tool, ToolError, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
struct Nap {
    /// How long to sleep.
    ms: u64,
    /// Written once the sleep is over.
    marker: String,
    /// Written as soon as the handler runs.
    #[serde(default)]
    started: Option<String>,
    /// Written when the handler is dropped before it finished (its call was cancelled).
    #[serde(default)]
    dropped: Option<String>,
}

/// Writes `"dropped"` to its path when dropped while still armed.
struct DropMarker(Option<String>);

impl Drop for DropMarker {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::write(path, "dropped");
        }
    }
}

async fn shout(_ctx: CallContext, args: Value) -> Result<String, ToolError> {
    let args: Text = parse_args(args)?;
    Ok(args.text.to_uppercase())
}

async fn crash(_ctx: CallContext, _args: Value) -> Result<String, ToolError> {
    panic!("the crash tool always panics");
}

async fn nap(_ctx: CallContext, args: Value) -> Result<String, ToolError> {
    let args: Nap = parse_args(args)?;
    let mut dropped = DropMarker(args.dropped);
    if let Some(started) = &args.started {
        std::fs::write(started, "started").map_err(|e| ToolError::new(e.to_string()))?;
    }
    tokio::time::sleep(Duration::from_millis(args.ms)).await;
    dropped.0 = None;
    std::fs::write(&args.marker, "finished").map_err(|e| ToolError::new(e.to_string()))?;
    Ok("rested".into())
}

fn main() -> ExitCode {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let nap_schema = json!({"type": "object", "properties": {"ms": {"type": "integer"}, "marker": {"type": "string"}, "started": {"type": "string"}, "dropped": {"type": "string"}}, "required": ["ms", "marker"]});
    Plugin::new("sdk-demo")
        .tool(Tool::new("shout", "Repeat text in capitals", text).read_only(), shout)
        .tool(Tool::new("crash", "Panic", json!({"type": "object"})), crash)
        .tool(Tool::new("nap", "Sleep, then write a marker file", nap_schema), nap)
        .run()
}
