//! The stress plugin's tools and the ways `misbehave` can go wrong.

use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use oxibot_proto::{Call, Manifest, Message, ToolResult, ToolSpec};
use serde_json::{Value, json};

use crate::wire::{self, Writer};

/// Exit status of a Rust program that panicked.
const PANIC_EXIT: i32 = 101;
/// Delay of the `slow` action when neither the call nor the environment gives one.
const DEFAULT_DELAY_MS: u64 = 500;
/// How often the `slow` action looks for its `until_file`.
const GATE_POLL: Duration = Duration::from_millis(5);

/// Settings read once from the environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// Prepended to every tool name (`OXIBOT_STRESS_PREFIX`).
    pub prefix: String,
    /// What `misbehave` does when the call has no `action` (`OXIBOT_STRESS_ACTION`).
    pub default_action: String,
    /// How long `slow` sleeps when the call has no `delay_ms` (`OXIBOT_STRESS_DELAY_MS`).
    pub default_delay_ms: u64,
    /// `timeout_secs` of `misbehave` in the manifest (`OXIBOT_STRESS_TIMEOUT_SECS`).
    pub timeout_secs: Option<u64>,
    /// One more tool, named exactly this, that does nothing (`OXIBOT_STRESS_EXTRA_TOOL`).
    pub extra_tool: Option<String>,
    /// The extra tool's description padded to this many bytes
    /// (`OXIBOT_STRESS_EXTRA_DESCRIPTION_BYTES`).
    pub extra_description_bytes: Option<u64>,
}

impl Config {
    /// Reads the `OXIBOT_STRESS_*` variables; malformed numbers are reported and ignored.
    pub fn from_env() -> Config {
        Config {
            prefix: std::env::var("OXIBOT_STRESS_PREFIX").unwrap_or_default(),
            default_action: std::env::var("OXIBOT_STRESS_ACTION").unwrap_or_else(|_| "echo".to_owned()),
            default_delay_ms: env_number("OXIBOT_STRESS_DELAY_MS").unwrap_or(DEFAULT_DELAY_MS),
            timeout_secs: env_number("OXIBOT_STRESS_TIMEOUT_SECS"),
            extra_tool: std::env::var("OXIBOT_STRESS_EXTRA_TOOL").ok(),
            extra_description_bytes: env_number("OXIBOT_STRESS_EXTRA_DESCRIPTION_BYTES"),
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    match text.trim().parse() {
        Ok(number) => Some(number),
        Err(error) => {
            eprintln!("stress: ignoring {name}={text:?}: {error}");
            None
        }
    }
}

/// The tools offered, with names carrying the configured prefix.
pub fn manifest(config: &Config) -> Manifest {
    let name = |tool: &str| format!("{}{tool}", config.prefix);
    let text_schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to return"}},
        "required": ["text"],
    });
    let misbehave_schema = json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": Action::NAMES,
                "description": "How to misbehave; defaults to OXIBOT_STRESS_ACTION",
            },
            "text": {"type": "string", "description": "Returned by the echo action"},
            "delay_ms": {"type": "integer", "minimum": 0, "description": "Sleep of the slow action"},
            "until_file": {"type": "string", "description": "The slow action waits until this file exists instead"},
        },
    });
    let tool = |tool: &str, description: &str, parameters: Value, read_only: bool| ToolSpec {
        name: name(tool),
        description: description.to_owned(),
        parameters,
        read_only,
        exclusive: false,
        timeout_secs: None,
    };
    let mut misbehave =
        tool("misbehave", "Fail in the way `action` asks (for testing the kernel)", misbehave_schema, false);
    misbehave.timeout_secs = config.timeout_secs;
    let mut tools = vec![
        tool("noop", "Do nothing and return an empty string", json!({"type": "object", "properties": {}}), true),
        tool("echo", "Return `text` unchanged", text_schema, true),
        misbehave,
    ];
    if let Some(extra) = &config.extra_tool {
        let mut spec = tool("noop", "Do nothing (the extra tool)", json!({"type": "object", "properties": {}}), true);
        spec.name = extra.clone();
        if let Some(bytes) = config.extra_description_bytes {
            let padding = usize::try_from(bytes).unwrap_or(usize::MAX).saturating_sub(spec.description.len());
            spec.description.push_str(&".".repeat(padding));
        }
        tools.push(spec);
    }
    Manifest { tools, detail: None }
}

/// What `misbehave` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Echo,
    Panic,
    Garbage,
    Oversize,
    Hang,
    Sigkill,
    Slow,
    Error,
}

impl Action {
    const NAMES: [&'static str; 8] = ["echo", "panic", "garbage", "oversize", "hang", "sigkill", "slow", "error"];

    fn parse(name: &str) -> Option<Action> {
        Some(match name {
            "echo" => Action::Echo,
            "panic" => Action::Panic,
            "garbage" => Action::Garbage,
            "oversize" => Action::Oversize,
            "hang" => Action::Hang,
            "sigkill" => Action::Sigkill,
            "slow" => Action::Slow,
            "error" => Action::Error,
            _ => return None,
        })
    }
}

/// Answers one call: the cheap tools on the reader thread, `misbehave` on a thread of its own
/// so that slow or hanging calls do not hold up the others.
pub fn dispatch(config: &Arc<Config>, call: Call, writer: &Writer) {
    if config.extra_tool.as_deref() == Some(call.tool.as_str()) {
        return reply(writer, call.id, String::new(), false);
    }
    let tool = call.tool.strip_prefix(config.prefix.as_str()).unwrap_or("");
    match tool {
        "noop" => reply(writer, call.id, String::new(), false),
        "echo" => match text_arg(&call.arguments) {
            Some(text) => reply(writer, call.id, text.to_owned(), false),
            None => reply(writer, call.id, "Error: missing string argument 'text'".to_owned(), true),
        },
        "misbehave" => {
            let config = Arc::clone(config);
            let writer = writer.clone();
            let spawned = thread::Builder::new()
                .name(format!("call-{}", call.id))
                .spawn(move || misbehave(&config, &call, &writer));
            if let Err(error) = spawned {
                eprintln!("stress: cannot start a thread for a call: {error}");
            }
        }
        _ => {
            let names: Vec<String> = manifest(config).tools.into_iter().map(|tool| tool.name).collect();
            let content =
                format!("Error: this plugin has no tool named '{}' (it has: {})", call.tool, names.join(", "));
            reply(writer, call.id, content, true);
        }
    }
}

fn misbehave(config: &Config, call: &Call, writer: &Writer) {
    let id = call.id;
    let name = call.arguments.get("action").and_then(Value::as_str).unwrap_or(&config.default_action);
    let Some(action) = Action::parse(name) else {
        let content = format!("Error: unknown action '{name}'; use one of: {}", Action::NAMES.join(", "));
        return reply(writer, id, content, true);
    };
    match action {
        Action::Echo => reply(writer, id, text_arg(&call.arguments).unwrap_or_default().to_owned(), false),
        Action::Error => reply(writer, id, "Error: asked to fail".to_owned(), true),
        Action::Slow => {
            match call.arguments.get("until_file").and_then(Value::as_str) {
                // A gate the test opens: the answer comes exactly when the test wants it.
                Some(gate) => {
                    while !Path::new(gate).exists() {
                        thread::sleep(GATE_POLL);
                    }
                }
                None => {
                    let delay =
                        call.arguments.get("delay_ms").and_then(Value::as_u64).unwrap_or(config.default_delay_ms);
                    thread::sleep(Duration::from_millis(delay));
                }
            }
            reply(writer, id, "slow done".to_owned(), false);
        }
        Action::Hang => eprintln!("stress: call {id} will never be answered"),
        Action::Garbage => {
            eprintln!("stress: call {id}: writing a garbage frame");
            writer.send_raw(&wire::garbage_frame());
        }
        Action::Oversize => {
            eprintln!("stress: call {id}: announcing a 64 MiB frame");
            writer.send_raw(&wire::oversize_start());
        }
        Action::Panic => {
            eprintln!("thread 'main' panicked at stress: asked to panic");
            eprintln!("note: call {id} is left unanswered");
            std::process::exit(PANIC_EXIT);
        }
        Action::Sigkill => {
            eprintln!("stress: call {id}: killing myself with SIGKILL");
            let pid = rustix::process::getpid();
            if let Err(error) = rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
                eprintln!("stress: SIGKILL failed ({error}); aborting instead");
                std::process::abort();
            }
            // SIGKILL cannot be caught; this thread does not get here.
            thread::sleep(Duration::from_secs(3600));
        }
    }
}

fn text_arg(arguments: &Value) -> Option<&str> {
    arguments.get("text").and_then(Value::as_str)
}

fn reply(writer: &Writer, id: u64, content: String, is_error: bool) {
    writer.send(&Message::Result(ToolResult { id, content, is_error }));
}
