//! Confine mode: `oxibot-tool-shell __confine [--user UID GID] [--limits N N N] POLICY --
//! PROGRAM [ARGS…]`, the last step before the command.
//!
//! The guardian starts this binary again this way instead of PROGRAM when the command must be
//! sandboxed without a container; in a container its PID 1 ([`crate::contain`]) does, with
//! `--user`. The process
//! 1. with `--user`, enters a nested user namespace in which it is that user again, so the
//!    command runs with the user's id and no capability over the container's mounts;
//! 2. sets the resource limits ([`oxibot_sandbox::limits::Limits`]);
//! 3. confines itself to POLICY with [`oxibot_sandbox::apply`] (Landlock);
//! 4. drops any capabilities (a command run as root keeps no more than the user's file
//!    permissions);
//! 5. applies the seccomp filter ([`oxibot_sandbox::seccomp`]), with the sockets the policy's
//!    network allows;
//!
//! and then replaces itself with PROGRAM, which inherits all of it along with everything it
//! starts. If a step fails it prints a line starting with [`SANDBOX_FAILED_PREFIX`] and exits
//! with [`SANDBOX_FAILED_EXIT`]: the command never runs less confined than planned.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use oxibot_sandbox::namespaces::{Ids, enter_user};
use oxibot_sandbox::seccomp::apply_filter;
use oxibot_sandbox::{Policy, SandboxError, apply, drop_capabilities};

use crate::plan::Plan;

/// The first argument that switches the binary into confine mode.
pub const CONFINE_ARG: &str = "__confine";
/// The flag before the user and group ids the command runs as, in a nested user namespace.
pub const USER_FLAG: &str = "--user";

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
    let (user, args) = user_from_args(args);
    let parsed = match Plan::from_args(args) {
        Ok((plan, rest)) => {
            plan.policy.clone().zip(split_command(rest)).map(|(policy, command)| (plan, policy, command))
        }
        Err(_) => None,
    };
    let Some((plan, policy, (program, program_args))) = parsed else {
        return refuse("expected a sandbox policy, then -- PROGRAM [ARGS...]");
    };
    if let Err(error) = confine(user, &plan, &policy) {
        return refuse(&error.to_string());
    }
    let error = Command::new(program).args(program_args).exec();
    eprintln!("oxibot-tool-shell: cannot run {}: {error}", program.to_string_lossy());
    ExitCode::from(NOT_STARTED_EXIT)
}

/// Every step of the confinement, in order (see the module docs).
fn confine(user: Option<Ids>, plan: &Plan, policy: &Policy) -> Result<(), SandboxError> {
    if let Some(ids) = user {
        enter_user(ids)?;
    }
    if let Some(limits) = &plan.limits {
        limits.apply()?;
    }
    apply(policy)?;
    drop_capabilities()?;
    apply_filter(policy.network_allowed())
}

/// Reads `--user UID GID` from the start of `args`.
fn user_from_args(args: &[OsString]) -> (Option<Ids>, &[OsString]) {
    let [flag, uid, gid, rest @ ..] = args else { return (None, args) };
    let id = |value: &OsString| value.to_str().and_then(|text| text.parse::<u32>().ok());
    match (flag == USER_FLAG, id(uid), id(gid)) {
        (true, Some(uid), Some(gid)) => (Some(Ids { uid, gid }), rest),
        _ => (None, args),
    }
}

/// Explains why the command was not run, and exits with [`SANDBOX_FAILED_EXIT`].
pub(crate) fn refuse(reason: &str) -> ExitCode {
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
