//! Guardian mode: `oxibot-tool-shell __guard [PLAN] -- PROGRAM [ARGS…]`.
//!
//! The plugin starts its own binary this way as the leader of a new process group, with stdin
//! a pipe whose only writer is the plugin. The guardian makes itself a child subreaper, so
//! everything PROGRAM starts stays its descendant even after a double fork or `setsid`, then
//! runs PROGRAM (stdin from `/dev/null`, stdout and stderr shared with the guardian) and blocks
//! a thread on reading stdin. End of file means the plugin is gone or has given up on the
//! command (timeout, cancellation); the guardian then kills every descendant, round after round
//! until none is left ([`crate::tree`]), and finally its own group, itself included. Because
//! the kernel closes the pipe when the plugin dies for any reason, SIGKILL included, no command
//! outlives the plugin that started it.
//!
//! With a plan (see [`crate::plan::Plan`]) before `--`, PROGRAM is not started directly but
//! through this binary again: [`crate::contain`] when the plan holds a container (PROGRAM then
//! runs as a child of the container's PID 1, and everything it starts dies with that PID 1),
//! else [`crate::confine`], which confines itself and then becomes PROGRAM. The guardian itself
//! stays outside the sandbox, so the command cannot signal it and escape the clean-up.
//!
//! When PROGRAM exits by itself, the guardian exits with its status (a signal `n` becomes
//! `128 + n`, as shells report it) and leaves the rest of the group alone.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, Signal, getpgrp, getpid, kill_process, set_child_subreaper};

use crate::confine::{CONFINE_ARG, split_command};
use crate::contain::{CONTAIN_ARG, PARENT_VAR};
use crate::exit_code::exit_status_byte;
use crate::group::kill_group;
use crate::plan::Plan;
use crate::tree::kill_own_descendants;

/// The first argument that switches the binary into guardian mode.
pub const GUARD_ARG: &str = "__guard";

/// Exit status when the guardian was started with bad arguments.
const USAGE_EXIT: u8 = 2;
/// Exit status when PROGRAM could not be started (what shells use for "not found").
const NOT_STARTED_EXIT: u8 = 127;
/// Exit status after the guardian killed everything without leading a group (`128 + SIGKILL`).
const KILLED_EXIT: i32 = 137;

/// Held by whichever thread ends the guardian: the one reporting PROGRAM's exit, or the one
/// killing everything. The other then waits until the process is gone, so a kill in progress
/// is never cut short by the process exiting.
static ENDING: Mutex<()> = Mutex::new(());

/// The arguments after `__guard`, when the process was started in guardian mode.
pub fn guard_args(args: &[OsString]) -> Option<&[OsString]> {
    match args {
        [_, first, rest @ ..] if first == GUARD_ARG => Some(rest),
        _ => None,
    }
}

/// Runs the guardian with the arguments after `__guard` and returns PROGRAM's exit status.
pub fn run(args: &[OsString]) -> ExitCode {
    let (plan, rest) = match Plan::from_args(args) {
        Ok(parsed) => parsed,
        Err(error) => return usage(&error.to_string()),
    };
    let Some((program, program_args)) = split_command(rest) else {
        return usage("a command must follow --");
    };
    let leads_group = getpgrp() == getpid();
    // Orphans of the command are re-parented to the guardian, so the clean-up still finds them.
    // Without it (not Linux) the clean-up still reaches everything that kept its parent.
    let _ = set_child_subreaper(Some(getpid()));
    let mut command = match (&plan.container, &plan.policy) {
        (Some(_), Some(_)) => {
            let mut command = Command::new(own_executable());
            command.arg(CONTAIN_ARG).args(args);
            if let Some(pid) = oxibot_sandbox::lifetime::proc_view_pid() {
                command.env(PARENT_VAR, pid.to_string());
            }
            command
        }
        (None, Some(_)) => {
            let mut command = Command::new(own_executable());
            command.arg(CONFINE_ARG).args(args);
            command
        }
        (_, None) => {
            let mut command = Command::new(program);
            command.args(program_args);
            command
        }
    };
    let mut child = match command.stdin(Stdio::null()).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("oxibot-tool-shell: cannot run {}: {error}", program.to_string_lossy());
            return ExitCode::from(NOT_STARTED_EXIT);
        }
    };
    let child_pid = Pid::from_child(&child);
    std::thread::spawn(move || {
        wait_for_end_of_input();
        kill_everything(leads_group, child_pid);
    });
    let code = match child.wait() {
        Ok(status) => i32::from(exit_status_byte(status)),
        Err(error) => {
            eprintln!("oxibot-tool-shell: lost track of {}: {error}", program.to_string_lossy());
            kill_everything(leads_group, child_pid);
        }
    };
    let _ending = ENDING.lock().unwrap_or_else(PoisonError::into_inner);
    std::process::exit(code)
}

/// Reports a usage error.
fn usage(problem: &str) -> ExitCode {
    eprintln!("oxibot-tool-shell: {problem}; usage: oxibot-tool-shell {GUARD_ARG} [PLAN] -- PROGRAM [ARGS...]");
    ExitCode::from(USAGE_EXIT)
}

/// This binary, for starting it again in confine mode: `/proc/self/exe` on Linux, which still
/// reaches this exact binary after an upgrade replaced the file on disk.
fn own_executable() -> PathBuf {
    let own = PathBuf::from("/proc/self/exe");
    if own.exists() { own } else { std::env::current_exe().unwrap_or(own) }
}

/// Blocks until stdin reaches end of file or fails.
fn wait_for_end_of_input() {
    let mut stdin = std::io::stdin().lock();
    let mut buffer = [0u8; 256];
    loop {
        match stdin.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Kills every descendant, then the guardian's group (itself included); never returns.
///
/// Not leading a group means someone started the guardian without a new group (by hand, say);
/// killing that shared group would hit the launcher, so the guardian exits instead.
fn kill_everything(leads_group: bool, child: Pid) -> ! {
    let _ending = ENDING.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = kill_process(child, Signal::KILL);
    kill_own_descendants();
    if leads_group {
        kill_group(getpid());
    }
    std::process::exit(KILLED_EXIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn guardian_mode_is_recognised_only_by_the_first_argument() {
        let args = os(&["bin", GUARD_ARG, "--", "sh", "-c", "true"]);
        assert_eq!(guard_args(&args), Some(&args[2..]));
        assert_eq!(guard_args(&os(&["bin"])), None);
        assert_eq!(guard_args(&os(&["bin", "--", GUARD_ARG])), None);
    }

    #[test]
    fn the_command_must_follow_a_double_dash() {
        let args = os(&["--", "sh", "-c", "true"]);
        let (program, rest) = split_command(&args).unwrap();
        assert_eq!(program, "sh");
        assert_eq!(rest, &args[2..]);
        assert!(split_command(&os(&["sh", "-c", "true"])).is_none());
        assert!(split_command(&os(&["--"])).is_none());
    }
}
