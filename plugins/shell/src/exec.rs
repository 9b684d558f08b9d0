//! The `exec` tool: its manifest entry, its arguments, and the handler that checks and runs a
//! command.

use std::path::{Path, PathBuf};
use std::time::Duration;

use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args, workspace};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::confine::{SANDBOX_FAILED_EXIT, SANDBOX_FAILED_PREFIX};
use crate::output;
use crate::policy;
use crate::process::{self, Ending, Run};
use crate::sandbox::Confinement;

/// Seconds a command may run when the call does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The longest a command may run, whatever the call asks for.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// How long the kernel waits for a call: the longest command, plus time to kill it and report.
pub const MANIFEST_TIMEOUT_SECS: u64 = MAX_TIMEOUT_SECS + 15;

// The kernel must never give up on a call before the command's own timeout has fired.
const _: () = assert!(MANIFEST_TIMEOUT_SECS > MAX_TIMEOUT_SECS);

/// What the model reads about the tool.
const DESCRIPTION: &str = "Run `sh -c` in the workspace or working_dir; long output is cut in the \
middle. Destructive commands are refused. Prefer the file tools for files, tmux for programs that keep running.";

/// The arguments of one call.
#[derive(Debug, Deserialize)]
struct Args {
    /// The shell command line.
    command: String,
    /// Where to run it; relative paths are taken from the workspace.
    #[serde(default)]
    working_dir: Option<String>,
    /// Seconds before the command is killed.
    #[serde(default)]
    timeout: Option<f64>,
}

/// The `exec` tool's manifest entry.
pub fn tool() -> Tool {
    Tool::new("exec", DESCRIPTION, schema()).exclusive().timeout_secs(MANIFEST_TIMEOUT_SECS)
}

/// The JSON Schema of the tool's arguments.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "working_dir": {"type": "string"},
            "timeout": {
                "type": "integer",
                "description": format!("Seconds, default {DEFAULT_TIMEOUT_SECS}, at most {MAX_TIMEOUT_SECS}")
            }
        },
        "required": ["command"]
    })
}

/// The tool's handler, as the plugin serves it: runs the command under this very binary.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let guardian =
        guardian_program().map_err(|e| ToolError::new(format!("cannot find this plugin's own executable: {e}")))?;
    execute(&guardian, ctx, args).await
}

/// Checks and runs one call, with `guardian` as the executable started in guardian mode.
pub async fn execute(guardian: &Path, ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    if args.command.trim().is_empty() {
        return Err(ToolError::new("command is empty; give a shell command to run"));
    }
    policy::check(&args.command, &ctx)?;
    let cwd = working_dir(&ctx, args.working_dir.as_deref())?;
    let timeout = timeout_secs(args.timeout);
    // Fails closed: a restricted call without a sandbox is refused here.
    let confinement = Confinement::prepare(&ctx)?;
    let run = process::run(guardian, &args.command, &cwd, Duration::from_secs(timeout), confinement.as_ref())
        .await
        .map_err(|e| ToolError::new(format!("could not start the command: {e}")))?;
    if let Some(error) = sandbox_failure(&run) {
        return Err(error);
    }
    match run.ending {
        Ending::Exited(code) => Ok(output::render(&run.stdout, &run.stderr, Some(code))),
        Ending::TimedOut => Err(timed_out(timeout, &run)),
    }
}

/// The directory a call runs in: `working_dir` resolved in the workspace, or the workspace.
fn working_dir(ctx: &CallContext, requested: Option<&str>) -> Result<PathBuf, ToolError> {
    let dir = match requested.map(str::trim).filter(|dir| !dir.is_empty()) {
        Some(dir) => workspace::resolve(ctx, dir)?,
        None => workspace::root(ctx),
    };
    if !dir.is_dir() {
        return Err(ToolError::new(format!(
            "working directory '{}' does not exist or is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The timeout for a call in whole seconds: the default when absent or not positive, rounded
/// up, and capped at [`MAX_TIMEOUT_SECS`].
fn timeout_secs(requested: Option<f64>) -> u64 {
    match requested {
        Some(secs) if secs > 0.0 => {
            // Float-to-int `as` saturates; the cap keeps the value small anyway.
            (secs.ceil() as u64).min(MAX_TIMEOUT_SECS)
        }
        _ => DEFAULT_TIMEOUT_SECS,
    }
}

/// The error for a command whose sandbox could not be applied (so it never ran).
fn sandbox_failure(run: &Run) -> Option<ToolError> {
    if run.ending != Ending::Exited(i32::from(SANDBOX_FAILED_EXIT)) {
        return None;
    }
    let (stderr, _) = run.stderr.text();
    let line = stderr.lines().find(|line| line.starts_with(SANDBOX_FAILED_PREFIX))?;
    let reason = line.trim_start_matches(SANDBOX_FAILED_PREFIX).trim();
    Some(ToolError::new(crate::sandbox::unavailable_message(reason)))
}

/// The error for a command that ran out of time, with what it printed before that.
fn timed_out(timeout: u64, run: &Run) -> ToolError {
    let unit = if timeout == 1 { "second" } else { "seconds" };
    let mut message = format!(
        "command timed out after {timeout} {unit}; it and every process it started were killed \
         (pass a larger timeout, up to {MAX_TIMEOUT_SECS}, if it needs longer)"
    );
    if !run.stdout.is_blank() || !run.stderr.is_blank() {
        message.push_str("\noutput before the timeout:\n");
        message.push_str(&output::render(&run.stdout, &run.stderr, None));
    }
    ToolError::new(message)
}

/// The executable to start in guardian mode: this process's own binary.
///
/// On Linux `/proc/self/exe` is used, which still reaches this exact binary after an upgrade
/// replaced the file on disk.
fn guardian_program() -> std::io::Result<PathBuf> {
    let own = Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && own.exists() {
        return Ok(own.to_path_buf());
    }
    std::env::current_exe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_defaults_rounds_up_and_is_capped() {
        assert_eq!(timeout_secs(None), DEFAULT_TIMEOUT_SECS);
        assert_eq!(timeout_secs(Some(0.0)), DEFAULT_TIMEOUT_SECS);
        assert_eq!(timeout_secs(Some(-3.0)), DEFAULT_TIMEOUT_SECS);
        assert_eq!(timeout_secs(Some(f64::NAN)), DEFAULT_TIMEOUT_SECS);
        assert_eq!(timeout_secs(Some(2.5)), 3);
        assert_eq!(timeout_secs(Some(5_000.0)), MAX_TIMEOUT_SECS);
    }

    #[test]
    fn the_schema_requires_only_the_command() {
        let schema = schema();
        assert_eq!(schema["required"], json!(["command"]));
        let timeout = schema["properties"]["timeout"]["description"].as_str().unwrap();
        assert!(timeout.contains(&format!("at most {MAX_TIMEOUT_SECS}")), "{timeout}");
    }

    #[test]
    fn a_missing_working_directory_is_reported() {
        let ctx = CallContext { workspace: std::env::temp_dir().display().to_string(), ..CallContext::default() };
        let error = working_dir(&ctx, Some("no-such-dir-for-oxibot")).unwrap_err().to_string();
        assert!(error.contains("does not exist"), "{error}");
    }
}
