//! Running one command under a guardian process and collecting what it prints.
//!
//! The guardian (see [`crate::guard`]) leads a new process group whose id is its pid, so the
//! plugin can kill the command's whole tree with one signal to that group: on timeout here, and
//! through [`KillOnDrop`] when the call's future is dropped. The guardian's stdin is a pipe only
//! the plugin writes to; if the plugin dies, the pipe closes and the guardian kills the group.
//!
//! A command that finishes by itself leaves the group alone, so processes it deliberately put
//! in the background with their output redirected keep running, as they would in a terminal.

use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use oxibot_proto::{ENV_KERNEL_PID, ENV_SOCKET, ENV_TOKEN};
use rustix::process::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use crate::group::KillOnDrop;
use crate::guard::{GUARD_ARG, exit_status_byte};
use crate::output::Capture;

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

/// Runs `command` with `sh -c` in `cwd`, under the guardian executable `guardian`.
///
/// Waits until the command exits and both output streams close, or until `timeout` passes,
/// whichever is first. On timeout, and if the returned future is dropped before it completes,
/// the command's whole process group is killed. Errors are failures to start the guardian.
pub async fn run(guardian: &Path, command: &str, cwd: &Path, timeout: Duration) -> io::Result<Run> {
    let mut child = guardian_command(guardian, command, cwd).spawn()?;
    let group = group_of(&child).ok_or_else(|| io::Error::other("the guardian has no process id"))?;
    // Declared after `child`, so it is dropped first, while the guardian's pid is still held.
    let mut killer = KillOnDrop::new(group);
    // Held, never written: closing it tells the guardian to kill the group.
    let _lifeline = child.stdin.take();
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
            killer.disarm();
            Ending::Exited(i32::from(exit_status_byte(status)))
        }
        Err(_elapsed) => {
            killer.kill_now();
            reap(&mut child).await;
            Ending::TimedOut
        }
    };
    Ok(Run { ending, stdout, stderr })
}

/// The command that starts the guardian for `command`, in a new process group.
fn guardian_command(guardian: &Path, command: &str, cwd: &Path) -> Command {
    let mut cmd = Command::new(guardian);
    cmd.arg(GUARD_ARG)
        .args(["--", "sh", "-c", command])
        .current_dir(cwd)
        // The kernel connection's secrets are the plugin's, not the command's.
        .env_remove(ENV_SOCKET)
        .env_remove(ENV_TOKEN)
        .env_remove(ENV_KERNEL_PID)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
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
