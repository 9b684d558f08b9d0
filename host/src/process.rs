//! Starting a plugin process (confined by the launcher's sandbox when its spec says so) and
//! capturing its stderr into the log (at the level a line names in front, `warn: …`, else
//! INFO) and a tail buffer.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use oxibot_proto::{ENV_KERNEL_PID, ENV_SOCKET, ENV_TOKEN};
use oxibot_sandbox::{ALLOW_PATHS_VAR, Support};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::environment;
use super::error::StartError;
use super::gitconfig;
use super::spec::PluginSpec;

/// Lines of stderr kept for error messages.
const TAIL_LINES: usize = 20;
/// Longest stderr line kept (longer lines are cut).
const TAIL_LINE_CHARS: usize = 400;

/// The last lines a plugin wrote to stderr and stdout.
#[derive(Debug, Clone, Default)]
pub struct OutputTail(Arc<Mutex<VecDeque<String>>>);

impl OutputTail {
    /// Keeps `line`, forgetting the oldest line when full.
    pub fn push(&self, line: &str) {
        let mut lines = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line.chars().take(TAIL_LINE_CHARS).collect());
    }

    /// A copy of the kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }
}

/// A running plugin process. Dropping it kills the process.
#[derive(Debug)]
pub struct PluginProcess {
    /// The child; `kill_on_drop` is set so no plugin outlives its handle.
    child: Child,
    /// The process id.
    pid: u32,
    /// The last output lines, for error messages.
    tail: OutputTail,
    /// Tasks forwarding stdout/stderr lines into tracing; they end at EOF.
    forwarders: Vec<JoinHandle<()>>,
    /// The confined plugin's private temporary directory, removed with this handle.
    _tmp: Option<PrivateTmp>,
}

/// A confined plugin's `TMPDIR`: a 0700 directory next to its socket in the kernel's private
/// run directory, removed when dropped (and with the run directory).
#[derive(Debug)]
struct PrivateTmp(PathBuf);

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What confining one plugin takes: the launcher's policy arguments, its variables, its tmp.
struct Sandboxing {
    /// `oxibot_sandbox::Policy::to_args`, placed before the launcher's `--`.
    launcher_args: Vec<OsString>,
    /// `TMPDIR` and the extra paths for the plugin to pass on.
    env: Vec<(&'static str, OsString)>,
    /// The private temporary directory.
    tmp: PrivateTmp,
}

/// How the kernel starts plugin processes.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The `oxibot` binary, used as a launcher that ties the plugin's life to the kernel's
    /// (see `launcher.rs`); `None` starts the plugin directly.
    pub launcher: Option<&'a Path>,
    /// Where the plugin must connect.
    pub socket: &'a Path,
    /// The one-time token it must present.
    pub token: &'a str,
}

impl PluginProcess {
    /// Spawns the plugin described by `spec`.
    ///
    /// Must run on a long-lived thread: the launcher's parent-death signal fires when the
    /// spawning *thread* exits.
    pub fn spawn(spec: &PluginSpec, launch: &Launch<'_>) -> Result<PluginProcess, StartError> {
        let sandboxing =
            sandboxing(spec, launch).map_err(|source| StartError::Spawn { command: spec.command_line(), source })?;
        let mut command = match launch.launcher {
            Some(launcher) => {
                let mut command = Command::new(launcher);
                command.arg(crate::launcher::SUBCOMMAND);
                if let Some(sandboxing) = &sandboxing {
                    command.args(&sandboxing.launcher_args);
                }
                command.arg("--").arg(&spec.command);
                command
            }
            None => Command::new(&spec.command),
        };
        command
            .args(&spec.args)
            // A scrubbed environment: keys and `${VAR}` values stay in the kernel.
            .env_clear()
            .envs(environment::inherited(std::env::vars_os()))
            .envs(&spec.env)
            .env(ENV_SOCKET, launch.socket)
            .env(ENV_TOKEN, launch.token)
            .env(ENV_KERNEL_PID, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C on the terminal (SIGINT to the foreground
            // group) is for the kernel, which stops the turn; it must not kill plugins.
            .process_group(0)
            .kill_on_drop(true);
        if let Some(sandboxing) = &sandboxing {
            command.envs(sandboxing.env.iter().map(|(name, value)| (name, value)));
        }
        let mut child = command.spawn().map_err(|source| StartError::Spawn { command: spec.command_line(), source })?;
        let pid = child.id().unwrap_or(0);
        let tail = OutputTail::default();
        let mut forwarders = Vec::new();
        if let Some(stderr) = child.stderr.take() {
            forwarders.push(tokio::spawn(forward_lines(stderr, spec.name.clone(), tail.clone())));
        }
        if let Some(stdout) = child.stdout.take() {
            forwarders.push(tokio::spawn(forward_lines(stdout, spec.name.clone(), tail.clone())));
        }
        Ok(PluginProcess { child, pid, tail, forwarders, _tmp: sandboxing.map(|sandboxing| sandboxing.tmp) })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The last output lines.
    pub fn tail(&self) -> &OutputTail {
        &self.tail
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends SIGKILL (if still running) and reaps the process, waiting at most `limit`.
    /// Returns the exit status as text.
    pub async fn kill_and_reap(&mut self, limit: Duration) -> String {
        let _ = self.child.start_kill();
        self.reap(limit).await
    }

    /// Waits up to `limit` for the process to exit on its own and for its output to drain;
    /// returns the exit status as text.
    pub async fn reap(&mut self, limit: Duration) -> String {
        let status = match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(Ok(status)) => describe_status(status),
            Ok(Err(error)) => format!("unknown ({error})"),
            Err(_) => "still running".to_owned(),
        };
        for forwarder in std::mem::take(&mut self.forwarders) {
            // The pipes close when the process (and any child holding them) exits; do not
            // wait long for children that inherited them.
            let _ = tokio::time::timeout(Duration::from_millis(50), forwarder).await;
        }
        status
    }
}

/// How to confine the plugin of `spec`: `None` when it is not to be confined, or cannot be
/// (no launcher, or no sandbox on this system: then a warning is logged once and the plugin
/// runs unconfined; `exec` refuses on its own). Creates the private temporary directory and a
/// channel's media directory (a sandbox rule needs an existing path).
fn sandboxing(spec: &PluginSpec, launch: &Launch<'_>) -> std::io::Result<Option<Sandboxing>> {
    if !spec.is_confined() {
        return Ok(None);
    }
    if launch.launcher.is_none() {
        tracing::warn!(plugin = %spec.name, "no launcher to confine the plugin; it runs unconfined");
        return Ok(None);
    }
    if let Support::Unavailable { reason } = oxibot_sandbox::detect() {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "no sandbox is available ({reason}): plugins run unconfined, and exec refuses commands \
                 while tools.restrictToWorkspace is on"
            );
        });
        return Ok(None);
    }
    let tmp = PrivateTmp(launch.socket.with_extension("tmp"));
    DirBuilder::new().mode(0o700).create(&tmp.0)?;
    if let Some(media) = spec.media_dir() {
        std::fs::create_dir_all(media)?;
    }
    let Some(policy) = spec.sandbox_policy(&tmp.0) else { return Ok(None) };
    let contained = spec.contains_its_commands()
        && launch.launcher.is_some_and(|launcher| crate::launcher::namespace_support(launcher).is_ok());
    let launcher_args = if contained { Vec::new() } else { policy.to_args() };
    let mut env = vec![("TMPDIR", tmp.0.clone().into_os_string())];
    // git cannot run where the user's own configuration exists but cannot be read.
    if !spec.env.contains_key(gitconfig::GIT_CONFIG_GLOBAL) {
        env.push((gitconfig::GIT_CONFIG_GLOBAL, gitconfig::write_into(&tmp.0)?.into_os_string()));
    }
    let extra = spec.extra_paths();
    if !extra.is_empty() {
        env.push((ALLOW_PATHS_VAR, std::env::join_paths(extra).unwrap_or_default()));
    }
    Ok(Some(Sandboxing { launcher_args, env, tmp }))
}

/// `exit code 3`, `signal 9 (SIGKILL)`, …
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    match status.signal() {
        Some(signal) => format!("killed by signal {signal}{}", signal_name(signal)),
        None => "unknown".to_owned(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

async fn forward_lines(stream: impl AsyncRead + Unpin, plugin: String, tail: OutputTail) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let (level, message) = split_level(&line);
        log_at(&plugin, level, message);
        tail.push(&line);
    }
}

/// The level a stderr line names in front (`error: `, `warn: `, `warning: `, `info: `,
/// `debug: `, `trace: `, as the SDK writes them before it is connected) and the rest of the
/// line; `info` and the whole line when it names none.
fn split_level(line: &str) -> (&str, &str) {
    const LEVELS: [(&str, &str); 6] = [
        ("error: ", "error"),
        ("warn: ", "warn"),
        ("warning: ", "warn"),
        ("info: ", "info"),
        ("debug: ", "debug"),
        ("trace: ", "trace"),
    ];
    LEVELS
        .iter()
        .find_map(|(prefix, level)| line.strip_prefix(prefix).map(|rest| (*level, rest)))
        .unwrap_or(("info", line))
}

/// Writes a plugin's line into the kernel's log at `level` (a protocol level name; anything
/// else counts as `info`).
pub(super) fn log_at(plugin: &str, level: &str, message: &str) {
    match level {
        "error" => tracing::error!(target: "oxibot::plugin", plugin, "{message}"),
        "warn" => tracing::warn!(target: "oxibot::plugin", plugin, "{message}"),
        "debug" => tracing::debug!(target: "oxibot::plugin", plugin, "{message}"),
        "trace" => tracing::trace!(target: "oxibot::plugin", plugin, "{message}"),
        _ => tracing::info!(target: "oxibot::plugin", plugin, "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::split_level;

    #[test]
    fn a_stderr_line_naming_its_level_is_logged_at_it_without_the_prefix() {
        assert_eq!(split_level("warn: disk almost full"), ("warn", "disk almost full"));
        assert_eq!(split_level("warning: old key"), ("warn", "old key"));
        assert_eq!(split_level("error: cannot start"), ("error", "cannot start"));
    }

    #[test]
    fn a_stderr_line_naming_no_level_is_logged_whole_at_info() {
        assert_eq!(split_level("connected to slack"), ("info", "connected to slack"));
        assert_eq!(split_level("warnings: none"), ("info", "warnings: none"));
    }
}
