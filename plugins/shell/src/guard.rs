//! Guardian mode: `oxibot-tool-shell __guard -- PROGRAM [ARGS…]`.
//!
//! The plugin starts its own binary this way as the leader of a new process group, with stdin
//! a pipe whose only writer is the plugin. The guardian runs PROGRAM in the same group (stdin
//! from `/dev/null`, stdout and stderr shared with the guardian) and blocks a thread on reading
//! stdin. End of file means the plugin is gone or has given up on the command; the guardian then
//! kills the whole group, itself included. Because the kernel closes the pipe when the plugin
//! dies for any reason, SIGKILL included, no command outlives the plugin that started it.
//!
//! When PROGRAM exits by itself, the guardian exits with its status (a signal `n` becomes
//! `128 + n`, as shells report it) and leaves the rest of the group alone.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, ExitStatus, Stdio};

use rustix::process::{Pid, Signal, getpgrp, getpid, kill_process};

use crate::group::kill_group;

/// The first argument that switches the binary into guardian mode.
pub const GUARD_ARG: &str = "__guard";

/// Exit status when the guardian was started with bad arguments.
const USAGE_EXIT: u8 = 2;
/// Exit status when PROGRAM could not be started (what shells use for "not found").
const NOT_STARTED_EXIT: u8 = 127;

/// The arguments after `__guard`, when the process was started in guardian mode.
pub fn guard_args(args: &[OsString]) -> Option<&[OsString]> {
    match args {
        [_, first, rest @ ..] if first == GUARD_ARG => Some(rest),
        _ => None,
    }
}

/// Runs the guardian with the arguments after `__guard` and returns PROGRAM's exit status.
pub fn run(args: &[OsString]) -> ExitCode {
    let Some((program, program_args)) = split_command(args) else {
        eprintln!("oxibot-tool-shell: usage: oxibot-tool-shell {GUARD_ARG} -- PROGRAM [ARGS...]");
        return ExitCode::from(USAGE_EXIT);
    };
    let leads_group = getpgrp() == getpid();
    let mut child = match Command::new(program).args(program_args).stdin(Stdio::null()).spawn() {
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
    match child.wait() {
        Ok(status) => ExitCode::from(exit_status_byte(status)),
        Err(error) => {
            eprintln!("oxibot-tool-shell: lost track of {}: {error}", program.to_string_lossy());
            kill_everything(leads_group, child_pid);
            ExitCode::FAILURE
        }
    }
}

/// Splits `-- PROGRAM ARGS…` into PROGRAM and its arguments.
fn split_command(args: &[OsString]) -> Option<(&OsString, &[OsString])> {
    match args {
        [separator, program, rest @ ..] if separator == "--" => Some((program, rest)),
        _ => None,
    }
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

/// Kills the guardian's group, or only PROGRAM when the guardian does not lead its own group.
///
/// Not leading a group means someone started the guardian without a new group (by hand, say);
/// killing that shared group would hit the launcher, so only the direct child is killed.
fn kill_everything(leads_group: bool, child: Pid) {
    if leads_group {
        kill_group(getpid());
    } else {
        let _ = kill_process(child, Signal::KILL);
    }
}

/// The exit status byte a shell would report for `status`: its code, or 128 plus the signal.
pub fn exit_status_byte(status: ExitStatus) -> u8 {
    let code = status.code().or_else(|| status.signal().map(|signal| 128 + signal)).unwrap_or(1);
    u8::try_from(code).unwrap_or(u8::MAX)
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

    #[test]
    fn exit_statuses_map_to_codes_and_signals_to_128_plus_the_signal() {
        assert_eq!(exit_status_byte(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_status_byte(ExitStatus::from_raw(9)), 137);
    }
}
