//! Killing a command's process group: right away, or when a run is abandoned.

use rustix::process::{Pid, Signal, kill_process_group};

/// Sends SIGKILL to every process in `group`; errors (the group is already gone) are ignored.
///
/// Process group 1 is never signalled: `kill(-1, …)` would reach every process the user owns.
pub fn kill_group(group: Pid) {
    if group != Pid::INIT {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

/// Kills a process group when dropped, unless disarmed first.
///
/// A run holds one while its command may still be running, so a call whose future is dropped
/// (the kernel cancelled it) takes the command's whole process tree with it.
#[derive(Debug)]
pub struct KillOnDrop {
    /// The group to kill; `None` once disarmed.
    group: Option<Pid>,
}

impl KillOnDrop {
    /// Arms a guard for `group`.
    pub fn new(group: Pid) -> KillOnDrop {
        KillOnDrop { group: Some(group) }
    }

    /// Kills the group now; the guard is spent.
    pub fn kill_now(&mut self) {
        if let Some(group) = self.group.take() {
            kill_group(group);
        }
    }

    /// Leaves the group alone: the command finished on its own.
    pub fn disarm(&mut self) {
        self.group = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill_now();
    }
}
