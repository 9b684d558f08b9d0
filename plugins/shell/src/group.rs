//! Ending a command: cutting its guardian's lifeline, and killing its process group as a last
//! resort.

use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::ChildStdin;

/// How long a guardian gets to kill a command's tree after its lifeline is cut, before its
/// process group is killed from outside.
pub const CLEAN_UP_GRACE: Duration = Duration::from_secs(2);

/// Sends SIGKILL to every process in `group`; errors (the group is already gone) are ignored.
///
/// Process group 1 is never signalled: `kill(-1, …)` would reach every process the user owns.
pub fn kill_group(group: Pid) {
    if group != Pid::INIT {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

/// The write end of a guardian's stdin, and the guardian's process group.
///
/// Closing the pipe ([`Lifeline::cut`]) tells the guardian to kill everything the command
/// started: it finds even processes that left the group, which a group kill from here would
/// miss. A lifeline dropped while armed (the call's future was dropped: the kernel cancelled
/// it) is cut, and the group is killed after [`CLEAN_UP_GRACE`] in case the guardian is stuck.
#[derive(Debug)]
pub struct Lifeline {
    /// The pipe; `None` once cut.
    pipe: Option<ChildStdin>,
    /// The group to kill as a last resort; `None` once disarmed.
    group: Option<Pid>,
}

impl Lifeline {
    /// Arms a lifeline for a guardian leading `group`, holding `pipe` (its stdin).
    pub fn new(group: Pid, pipe: Option<ChildStdin>) -> Lifeline {
        Lifeline { pipe, group: Some(group) }
    }

    /// Closes the pipe: the guardian kills the command's whole tree, then itself.
    pub fn cut(&mut self) {
        self.pipe = None;
    }

    /// Kills the guardian's group now (the guardian did not finish in time); the lifeline is
    /// spent.
    pub fn kill_group_now(&mut self) {
        self.cut();
        if let Some(group) = self.group.take() {
            kill_group(group);
        }
    }

    /// Leaves everything alone: the command finished on its own.
    pub fn disarm(&mut self) {
        self.group = None;
    }
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        self.cut();
        if let Some(group) = self.group.take() {
            std::thread::spawn(move || {
                std::thread::sleep(CLEAN_UP_GRACE);
                kill_group(group);
            });
        }
    }
}
