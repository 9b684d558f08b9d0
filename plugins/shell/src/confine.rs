//! Confine mode: `oxibot-tool-shell __confine POLICY -- PROGRAM [ARGS…]`.
//!
//! The guardian starts this binary again this way instead of PROGRAM when the command must be
//! sandboxed. The process confines itself to POLICY with [`oxibot_sandbox::apply`], drops any
//! capabilities (a command run as root keeps no more than the user's file permissions), and
//! then replaces itself with PROGRAM, which inherits the confinement along with everything it
//! starts. If the sandbox cannot be applied it prints a line starting with
//! [`SANDBOX_FAILED_PREFIX`] and exits with [`SANDBOX_FAILED_EXIT`]: the command never runs
//! unconfined.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use oxibot_sandbox::{Policy, apply, drop_capabilities};

/// The first argument that switches the binary into confine mode.
pub const CONFINE_ARG: &str = "__confine";

/// Splits `-- PROGRAM ARGS…` into PROGRAM and its arguments.
pub fn split_command(args: &[OsString]) -> Option<(&OsString, &[OsString])> {
    match args {
        [separator, program, rest @ ..] if separator == "--" => Some((program, rest)),
        _ => None,
    }
}

/// Exit status when the sandbox could not be applied.
pub const SANDBOX_FAILED_EXIT: u8 = 125;
/// Start of the stderr line explaining a sandbox failure.
pub const SANDBOX_FAILED_PREFIX: &str = "oxibot-tool-shell: cannot sandbox the command:";

/// Exit status when PROGRAM could not be executed.
const NOT_STARTED_EXIT: u8 = 127;

/// The arguments after `__confine`, when the process was started in confine mode.
pub fn confine_args(args: &[OsString]) -> Option<&[OsString]> {
    match args {
        [_, first, rest @ ..] if first == CONFINE_ARG => Some(rest),
        _ => None,
    }
}

/// Confines this process and becomes PROGRAM; returns only on failure.
pub fn run(args: &[OsString]) -> ExitCode {
    let policy = match Policy::from_args(args) {
        Ok((Some(policy), rest)) => split_command(rest).map(|command| (policy, command)),
        Ok((None, _)) | Err(_) => None,
    };
    let Some((policy, (program, program_args))) = policy else {
        return refuse("expected a sandbox policy, then -- PROGRAM [ARGS...]");
    };
    if let Err(error) = apply(&policy) {
        return refuse(&error.to_string());
    }
    if let Err(error) = drop_capabilities() {
        return refuse(&error.to_string());
    }
    let error = Command::new(program).args(program_args).exec();
    eprintln!("oxibot-tool-shell: cannot run {}: {error}", program.to_string_lossy());
    ExitCode::from(NOT_STARTED_EXIT)
}

/// Explains why the command was not run, and exits with [`SANDBOX_FAILED_EXIT`].
fn refuse(reason: &str) -> ExitCode {
    eprintln!("{SANDBOX_FAILED_PREFIX} {reason}");
    ExitCode::from(SANDBOX_FAILED_EXIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_mode_is_recognised_only_by_the_first_argument() {
        let args: Vec<OsString> = ["bin", CONFINE_ARG, "--sandbox", "--", "sh"].iter().map(OsString::from).collect();
        assert_eq!(confine_args(&args), Some(&args[2..]));
        assert_eq!(confine_args(&args[1..]), None);
    }
}
