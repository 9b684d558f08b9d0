//! The launcher: `oxibot __plugin-exec [POLICY] -- CMD ARGS…` ties a plugin's life to the
//! kernel's and confines it.
//!
//! The kernel starts every plugin through its own binary in this mode. The launcher asks the
//! OS to SIGKILL it when its parent (the kernel thread that spawned it) dies, checks that the
//! kernel did not die already in between, confines itself to POLICY when one is given (an
//! `oxibot_sandbox::Policy` in its argument form; the kernel passes one while the workspace is
//! restricted and a sandbox is available), and then replaces itself with the plugin
//! executable. The parent-death signal and the sandbox survive `exec`, so the plugin dies with
//! the kernel even when the kernel is killed with SIGKILL and runs no cleanup at all, and never
//! reaches more than its policy. A policy that cannot be applied stops the launch: a plugin the
//! kernel meant to confine never runs unconfined.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use oxibot_proto::ENV_KERNEL_PID;
use oxibot_sandbox::{Policy, SandboxError};

/// The hidden subcommand name.
pub const SUBCOMMAND: &str = "__plugin-exec";

/// Why the launcher could not run the plugin (it only returns on failure).
#[derive(Debug, thiserror::Error)]
pub enum LaunchFailure {
    /// No command was given after `--`.
    #[error("{SUBCOMMAND} needs a command to run")]
    NoCommand,
    /// The parent-death signal could not be set.
    #[error("cannot tie the plugin to the kernel: {0}")]
    DeathSignal(std::io::Error),
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

/// Replaces this process with the plugin command; returns only on failure.
pub fn exec_plugin(argv: Vec<OsString>) -> LaunchFailure {
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
    if let Some(policy) = policy
        && let Err(error) = oxibot_sandbox::apply(&policy)
    {
        return LaunchFailure::Sandbox(error);
    }
    let command = argv.remove(0);
    let source = Command::new(&command).args(argv).exec();
    LaunchFailure::Exec { command: command.to_string_lossy().into_owned(), source }
}
