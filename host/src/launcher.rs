//! The launcher: `oxibot __plugin-exec [POLICY] -- CMD ARGS…` ties a plugin's life, and the
//! life of everything the plugin starts, to the kernel's, and confines it.
//!
//! The kernel starts every plugin through its own binary in this mode. The launcher asks the
//! OS to SIGKILL it when its parent (the kernel thread that spawned it) dies and checks that the
//! kernel did not die already in between. Then, where the system allows user namespaces, it
//! enters a new user and PID namespace (`oxibot_sandbox::namespaces::enter_plugin`) and starts
//! itself again as `__plugin-exec --init PID [POLICY] -- CMD…`, the namespace's first process,
//! which ties itself to the launcher the same way, confines itself to POLICY, starts the plugin
//! as its child, reaps the namespace's orphans, and exits when the plugin does. When that first
//! process exits or is killed, the kernel kills every process left in the namespace: no
//! descendant of a plugin (`setsid` and double-forked ones included) outlives it, and nothing
//! outlives the kernel, even one killed with SIGKILL that runs no cleanup at all. The launcher
//! waits and ends as the plugin did (a plugin killed by signal `n` reaches it as status
//! `128 + n`, and the launcher then dies of that signal too).
//!
//! Without user namespaces the launcher confines itself and replaces itself with the plugin
//! executable, as before: the plugin dies with the kernel, but what it starts in a new session
//! may not (`oxibot status` says so). POLICY is an `oxibot_sandbox::Policy` in its argument
//! form; the kernel passes one while the workspace is restricted and a sandbox is available. A
//! policy that cannot be applied stops the launch: a plugin the kernel meant to confine never
//! runs unconfined.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use oxibot_proto::ENV_KERNEL_PID;
use oxibot_sandbox::lifetime::{Ending, proc_view_pid, reap_until, tie_to_parent};
use oxibot_sandbox::namespaces::{self, PROBE_ARG};
use oxibot_sandbox::{Policy, SandboxError};
use rustix::process::{Pid, Signal, getpid, kill_process};

/// The hidden subcommand name.
pub const SUBCOMMAND: &str = "__plugin-exec";
/// The flag of the namespace's first process, followed by the launcher's pid.
const INIT_FLAG: &str = "--init";

/// Why the launcher could not run the plugin (it only returns on failure).
#[derive(Debug, thiserror::Error)]
pub enum LaunchFailure {
    /// No command was given after `--`.
    #[error("{SUBCOMMAND} needs a command to run")]
    NoCommand,
    /// The parent-death signal could not be set.
    #[error("cannot tie the plugin to the kernel: {0}")]
    DeathSignal(std::io::Error),
    /// The launcher exited before the namespace's first process was tied to it.
    #[error("cannot tie the plugin to its launcher: {0}")]
    LauncherGone(String),
    /// The namespaces were created but could not be set up.
    #[error("cannot give the plugin its own namespaces: {0}")]
    Namespaces(SandboxError),
    /// The namespace's first process could not be started, or could not start the plugin.
    #[error("cannot start {command}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel exited before the plugin started.
    #[error("the kernel (pid {expected}) is gone; not starting the plugin")]
    KernelGone {
        /// The kernel pid the launcher was given.
        expected: String,
    },
    /// The sandbox policy was malformed or could not be applied.
    #[error("cannot confine the plugin: {0}")]
    Sandbox(SandboxError),
    /// `exec` failed.
    #[error("cannot execute {command}: {source}")]
    Exec {
        /// The command.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Whether this system lets the launcher (the `oxibot` binary at `launcher`) give plugins
/// their own PID namespaces, and the shell plugin build containers: `Err` with the reason when
/// not. Probed once per kernel process.
pub fn namespace_support(launcher: &std::path::Path) -> Result<(), String> {
    static SUPPORT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(|| namespaces::probe(launcher, &[SUBCOMMAND, PROBE_ARG])).clone()
}

/// Runs the plugin command as described in the module docs; returns only on failure.
pub fn exec_plugin(argv: Vec<OsString>) -> LaunchFailure {
    match argv.as_slice() {
        [flag] if flag == PROBE_ARG => std::process::exit(i32::from(namespaces::probe_here())),
        [flag, parent, rest @ ..] if flag == INIT_FLAG => return run_init(parent, rest),
        _ => {}
    }
    let (policy, rest) = match Policy::from_args(&argv) {
        Ok(parsed) => parsed,
        Err(error) => return LaunchFailure::Sandbox(error),
    };
    let mut argv = rest.to_vec();
    if argv.first().is_some_and(|a| a == "--") {
        argv.remove(0);
    }
    if argv.is_empty() {
        return LaunchFailure::NoCommand;
    }
    if let Err(error) = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL)) {
        return LaunchFailure::DeathSignal(error.into());
    }
    if let Ok(expected) = std::env::var(ENV_KERNEL_PID) {
        // If the kernel died between our fork and the prctl above, we were re-parented and
        // the death signal will never come; refuse to run as an orphan.
        if std::os::unix::process::parent_id().to_string() != expected {
            return LaunchFailure::KernelGone { expected };
        }
    }
    if !namespaces::disabled_by_environment() {
        match namespaces::enter_plugin() {
            Ok(true) => return supervise(&rest_with(policy.as_ref(), &argv)),
            Ok(false) => {}
            Err(error) => return LaunchFailure::Namespaces(error),
        }
    }
    if let Some(policy) = policy
        && let Err(error) = oxibot_sandbox::apply(&policy)
    {
        return LaunchFailure::Sandbox(error);
    }
    let command = argv.remove(0);
    let source = Command::new(&command).args(argv).exec();
    LaunchFailure::Exec { command: command.to_string_lossy().into_owned(), source }
}

/// `[POLICY] -- CMD ARGS…` again, for the namespace's first process.
fn rest_with(policy: Option<&Policy>, command: &[OsString]) -> Vec<OsString> {
    let mut args = policy.map(Policy::to_args).unwrap_or_default();
    args.push("--".into());
    args.extend(command.iter().cloned());
    args
}

/// In the new namespaces: starts the first process with `args` (`[POLICY] -- CMD…`), waits for
/// it, and ends as it did.
fn supervise(args: &[OsString]) -> LaunchFailure {
    let mut init = Command::new("/proc/self/exe");
    init.arg(SUBCOMMAND).arg(INIT_FLAG).arg(proc_view_pid().unwrap_or(0).to_string()).args(args);
    let status = match init.status() {
        Ok(status) => status,
        Err(source) => return LaunchFailure::Spawn { command: "the plugin's namespace".to_owned(), source },
    };
    let code = status.code().unwrap_or(1);
    // The first process reports a plugin killed by signal n as 128 + n: die of it too, so the
    // kernel reports the signal.
    if let Some(signal) = code.checked_sub(128).filter(|n| (1..=64).contains(n)).and_then(Signal::from_named_raw) {
        let _ = kill_process(getpid(), signal);
    }
    std::process::exit(code)
}

/// The namespace's first process: ties itself to the launcher (`parent`), confines itself,
/// starts the plugin, reaps, and exits as the plugin did.
fn run_init(parent: &OsString, args: &[OsString]) -> LaunchFailure {
    let expected = parent.to_str().and_then(|pid| pid.parse().ok());
    if let Err(reason) = tie_to_parent(expected) {
        return LaunchFailure::LauncherGone(reason);
    }
    let (policy, rest) = match Policy::from_args(args) {
        Ok(parsed) => parsed,
        Err(error) => return LaunchFailure::Sandbox(error),
    };
    let Some((command, command_args)) = rest.strip_prefix(&[OsString::from("--")]).and_then(<[OsString]>::split_first)
    else {
        return LaunchFailure::NoCommand;
    };
    if let Some(policy) = policy
        && let Err(error) = oxibot_sandbox::apply(&policy)
    {
        return LaunchFailure::Sandbox(error);
    }
    let child = match Command::new(command).args(command_args).spawn() {
        Ok(child) => child,
        Err(source) => return LaunchFailure::Exec { command: command.to_string_lossy().into_owned(), source },
    };
    let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
        return LaunchFailure::NoCommand;
    };
    let status = match reap_until(pid) {
        Ending::Exited(code) => code,
        ending => i32::from(ending.status_byte()),
    };
    std::process::exit(status)
}
