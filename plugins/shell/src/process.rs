//! Running one command under a guardian process and collecting what it prints.
//!
//! The guardian (see [`crate::guard`]) leads a new process group and holds a pipe from the
//! plugin on its stdin, the [`Lifeline`]. On timeout here, and when the call's future is
//! dropped, the lifeline is cut: the guardian then kills every process the command started,
//! including ones that left the group, and itself. Should the guardian not be gone within
//! [`CLEAN_UP_GRACE`], its group is killed from here. If the plugin dies, the pipe closes just
//! the same.
//!
//! A command that finishes by itself leaves the group alone, so without a container processes
//! it deliberately put in the background with their output redirected keep running, as they
//! would in a terminal; one that still holds the output when the time runs out is killed with
//! the group. In a container (see [`crate::contain`]) everything the command started ends with
//! it.

use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use oxibot_proto::{ENV_KERNEL_PID, ENV_SOCKET, ENV_TOKEN};
use rustix::process::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use crate::exit_code::exit_status_byte;
use crate::group::{CLEAN_UP_GRACE, Lifeline};
use crate::guard::GUARD_ARG;
use crate::output::Capture;
use crate::sandbox::Confinement;

/// How long a killed guardian gets to be reaped before the result is reported anyway.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The command exited with this status (`128 + n` after signal `n`).
    Exited(i32),
    /// The time ran out; the command and everything it started were killed.
    TimedOut,
}

/// The result of a run: how it ended and what it printed until then.
#[derive(Debug)]
pub struct Run {
    /// How the run ended.
    pub ending: Ending,
    /// What the command wrote to stdout.
    pub stdout: Capture,
    /// What the command wrote to stderr.
    pub stderr: Capture,
}

/// Runs `command` with `sh -c` in `cwd`, under the guardian executable `guardian`, confined by
/// `confinement` when given.
///
/// Waits until the command exits and both output streams close, or until `timeout` passes,
/// whichever is first. On timeout, and if the returned future is dropped before it completes,
/// the command's whole process tree is killed. Errors are failures to start the guardian.
pub async fn run(
    guardian: &Path,
    command: &str,
    cwd: &Path,
    timeout: Duration,
    confinement: Option<&Confinement>,
) -> io::Result<Run> {
    let mut child = guardian_command(guardian, command, cwd, confinement).spawn()?;
    let group = group_of(&child).ok_or_else(|| io::Error::other("the guardian has no process id"))?;
    // Declared after `child`, so it is dropped first, while the guardian's pid is still held.
    let mut lifeline = Lifeline::new(group, child.stdin.take());
    let (Some(stdout_pipe), Some(stderr_pipe)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("the guardian's output pipes are missing"));
    };
    let mut stdout = Capture::default();
    let mut stderr = Capture::default();
    let finished = tokio::time::timeout(timeout, async {
        let (status, (), ()) =
            tokio::join!(child.wait(), drain(stdout_pipe, &mut stdout), drain(stderr_pipe, &mut stderr));
        status
    })
    .await;
    let ending = match finished {
        Ok(status) => {
            let status = status?;
            lifeline.disarm();
            Ending::Exited(i32::from(exit_status_byte(status)))
        }
        Err(_elapsed) => {
            lifeline.cut();
            let guardian_ended = tokio::time::timeout(CLEAN_UP_GRACE, child.wait()).await.is_ok();
            // A guardian that ended before the timeout (the command returned, a background
            // child kept the output open) killed nothing: what is left of its group goes now,
            // as the timeout message promises. A stuck guardian goes with it.
            lifeline.kill_group_now();
            if !guardian_ended {
                reap(&mut child).await;
            }
            lifeline.disarm();
            Ending::TimedOut
        }
    };
    Ok(Run { ending, stdout, stderr })
}

/// The command that starts the guardian for `command`, in a new process group.
fn guardian_command(guardian: &Path, command: &str, cwd: &Path, confinement: Option<&Confinement>) -> Command {
    let mut cmd = Command::new(guardian);
    cmd.arg(GUARD_ARG);
    if let Some(confinement) = confinement {
        cmd.args(confinement.plan().to_args()).envs(confinement.env());
    }
    cmd.args(["--", "sh", "-c", command])
        .current_dir(cwd)
        // The kernel connection's secrets are the plugin's, not the command's.
        .env_remove(ENV_SOCKET)
        .env_remove(ENV_TOKEN)
        .env_remove(ENV_KERNEL_PID)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Never SIGKILL the guardian from here first: it must live to kill the command's tree.
        .kill_on_drop(false);
    cmd
}

/// The process group a guardian leads: its own pid.
fn group_of(child: &Child) -> Option<Pid> {
    child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw)
}

/// Reads `pipe` to its end into `into`; a read error ends the stream like end of file.
async fn drain(mut pipe: impl AsyncRead + Unpin, into: &mut Capture) {
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read @ 1..) = pipe.read(&mut buffer).await {
        into.push(&buffer[..read]);
    }
}

/// Waits briefly for a killed guardian to exit, so it does not linger as a zombie.
async fn reap(child: &mut Child) {
    let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
}
