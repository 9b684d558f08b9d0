//! Container modes: `oxibot-tool-shell __contain PLAN -- PROGRAM [ARGS…]` and its PID 1,
//! `__init PLAN -- PROGRAM [ARGS…]` (see [`crate::plan`] for PLAN).
//!
//! The guardian starts `__contain` when the plan holds a container. That process ties its life
//! to the guardian's (parent-death signal), enters new user, mount, PID, IPC, UTS and — with
//! the network off — network namespaces ([`oxibot_sandbox::namespaces::enter_container`]) and
//! starts this binary again as `__init`, the first process of the new PID namespace, whose
//! exit status it passes on.
//!
//! `__init` ties its life to `__contain`'s, builds the container's root
//! ([`oxibot_sandbox::mounts::build_root`]: read-only system directories, the workspace with
//! the assistant's own state read-only, a private `/tmp`, a new `/proc`), and starts
//! [`crate::confine`] — which applies the seccomp filter, the limits and Landlock and becomes
//! PROGRAM — as its only child. It reaps every orphan of the namespace and exits with that
//! child's status as soon as the child ends. When PID 1 exits, the kernel kills every process
//! left in the namespace: whatever ends the command (it finishing, a timeout, a cancellation,
//! the guardian's or the plugin's death), nothing it started stays behind, however it hid
//! (`setsid`, double forks, `nohup`).
//!
//! A failure before PROGRAM runs prints a line starting with [`SANDBOX_FAILED_PREFIX`] and
//! exits with [`SANDBOX_FAILED_EXIT`], like [`crate::confine`].

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};

use oxibot_sandbox::lifetime::{proc_view_pid, reap_until, tie_to_parent};
use oxibot_sandbox::mounts::{Root, build_root};
use oxibot_sandbox::namespaces::{enter_container, probe_here};
use rustix::process::Pid;

use crate::confine::{CONFINE_ARG, USER_FLAG, refuse, split_command};
use crate::exit_code::exit_status_byte;
use crate::plan::Plan;

/// The first argument of the mode that builds the namespaces.
pub const CONTAIN_ARG: &str = "__contain";
/// The first argument of the container's PID 1.
pub const INIT_ARG: &str = "__init";
/// Environment variable in which the guardian tells `__contain`, and `__contain` tells
/// `__init`, its pid as `/proc` shows it, so the child can check that its parent did not die
/// before the parent-death signal was set.
pub const PARENT_VAR: &str = "OXIBOT_CONTAIN_PARENT";

/// The arguments after `__contain` or `__init`, and which of the two it is.
pub fn contain_args(args: &[OsString]) -> Option<(&str, &[OsString])> {
    match args {
        [_, first, rest @ ..] if first == CONTAIN_ARG => Some((CONTAIN_ARG, rest)),
        [_, first, rest @ ..] if first == INIT_ARG => Some((INIT_ARG, rest)),
        [_, first] if first == oxibot_sandbox::namespaces::PROBE_ARG => {
            Some((oxibot_sandbox::namespaces::PROBE_ARG, &[]))
        }
        _ => None,
    }
}

/// Runs the mode `mode` with `args`; returns only the exit status to end with.
pub fn run(mode: &str, args: &[OsString]) -> ExitCode {
    match mode {
        CONTAIN_ARG => contain(args),
        INIT_ARG => init(args),
        _ => ExitCode::from(probe_here()),
    }
}

/// `__contain`: enters the namespaces and runs `__init` in them.
fn contain(args: &[OsString]) -> ExitCode {
    let plan = match Plan::from_args(args) {
        Ok((plan, rest)) if plan.container.is_some() && plan.policy.is_some() && split_command(rest).is_some() => plan,
        Ok(_) => return refuse("expected a container, a sandbox policy, then -- PROGRAM [ARGS...]"),
        Err(error) => return refuse(&error.to_string()),
    };
    if let Err(reason) = tie_to_parent(expected_parent()) {
        return refuse(&format!("cannot tie the command to its guardian: {reason}"));
    }
    let network = plan.policy.as_ref().is_some_and(|policy| policy.network_allowed());
    let own_pid = proc_view_pid();
    if let Err(error) = enter_container(network) {
        return refuse(&error.to_string());
    }
    let mut init = Command::new(own_executable());
    init.arg(INIT_ARG).args(args);
    if let Some(pid) = own_pid {
        init.env(PARENT_VAR, pid.to_string());
    }
    match init.status() {
        Ok(status) => ExitCode::from(exit_status_byte(status)),
        Err(error) => refuse(&format!("cannot start the container's first process: {error}")),
    }
}

/// `__init`: builds the root, starts the confine step, reaps, and ends with its status.
fn init(args: &[OsString]) -> ExitCode {
    let parsed = Plan::from_args(args)
        .ok()
        .and_then(|(plan, rest)| Some((plan.clone(), plan.container?, plan.policy?, split_command(rest)?)));
    let Some((plan, container, policy, (program, program_args))) = parsed else {
        return refuse("expected a container, a sandbox policy, then -- PROGRAM [ARGS...]");
    };
    if let Err(reason) = tie_to_parent(expected_parent()) {
        return refuse(&format!("cannot tie the container to its first step: {reason}"));
    }
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => return refuse(&format!("cannot tell the working directory: {error}")),
    };
    let (mount_point, tmp) = (container.mount_point(), container.tmp());
    let root =
        Root { policy: &policy, mount_point: &mount_point, tmp: &tmp, protected: &container.protected, cwd: &cwd };
    if let Err(error) = build_root(&root) {
        return refuse(&error.to_string());
    }
    let mut confine = Command::new("/proc/self/exe");
    confine.arg(CONFINE_ARG).arg(USER_FLAG).arg(container.ids.uid.to_string()).arg(container.ids.gid.to_string());
    let inner = Plan { container: None, ..plan };
    confine.args(inner.to_args()).arg("--").arg(program).args(program_args).env_remove(PARENT_VAR);
    let child = match confine.spawn() {
        Ok(child) => child,
        Err(error) => return refuse(&format!("cannot start the command: {error}")),
    };
    let Some(child) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
        return refuse("the command has no process id");
    };
    ExitCode::from(reap_until(child).status_byte())
}

/// The parent's pid that [`PARENT_VAR`] names.
fn expected_parent() -> Option<i32> {
    std::env::var(PARENT_VAR).ok().and_then(|pid| pid.parse().ok())
}

/// This binary, for starting it again: `/proc/self/exe`, which reaches this exact binary even
/// after an upgrade replaced the file on disk.
fn own_executable() -> &'static Path {
    Path::new("/proc/self/exe")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_are_recognised_only_by_the_first_argument() {
        let args: Vec<OsString> = ["bin", CONTAIN_ARG, "--", "sh"].iter().map(OsString::from).collect();
        assert_eq!(contain_args(&args), Some((CONTAIN_ARG, &args[2..])));
        let init: Vec<OsString> = ["bin", INIT_ARG].iter().map(OsString::from).collect();
        assert_eq!(contain_args(&init).map(|(mode, _)| mode), Some(INIT_ARG));
        assert_eq!(contain_args(&args[1..]), None);
    }
}
