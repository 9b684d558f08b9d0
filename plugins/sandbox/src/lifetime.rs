//! Tying a helper process's life to its parent's, and the duties of a PID namespace's first
//! process: the pieces the shell plugin's container and the kernel's plugin launcher share.
//!
//! A process started into a new PID namespace is its PID 1: it sees its parent as pid 0, and
//! `/proc` (still the outer one until a new one is mounted) numbers processes as the outer
//! namespace does. So a parent passes its pid *as `/proc` numbers it* ([`proc_view_pid`]) and
//! the child compares it with its parent in `/proc` ([`tie_to_parent`]).

use rustix::process::{Pid, Signal, WaitOptions, set_parent_process_death_signal, wait};

/// Asks for SIGKILL when the parent dies, then checks that the parent — `expected` as `/proc`
/// numbers it, else any process but init — is still there (it may have died before the
/// request, and then the signal never comes). `Err` says why not.
pub fn tie_to_parent(expected: Option<i32>) -> Result<(), String> {
    set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|error| format!("cannot ask for the parent-death signal: {error}"))?;
    let alive = match expected {
        Some(expected) => proc_view_parent() == Some(expected),
        None => std::os::unix::process::parent_id() != 1,
    };
    if alive { Ok(()) } else { Err("the parent process is gone".to_owned()) }
}

/// This process's pid as `/proc` numbers it (the namespace `/proc` was mounted for, which may
/// be an outer one).
pub fn proc_view_pid() -> Option<i32> {
    std::fs::read_link("/proc/self").ok()?.to_str()?.parse().ok()
}

/// This process's parent's pid as `/proc` numbers it.
pub fn proc_view_parent() -> Option<i32> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat.get(stat.rfind(')')? + 1..)?.split_whitespace().nth(1)?.parse().ok()
}

/// How a waited-for child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Killed(i32),
}

impl Ending {
    /// The status byte a shell reports: the code, or 128 plus the signal.
    pub fn status_byte(self) -> u8 {
        let code = match self {
            Ending::Exited(code) => code,
            Ending::Killed(signal) => 128 + signal,
        };
        u8::try_from(code).unwrap_or(u8::MAX)
    }
}

/// Reaps every child that ends — the first process of a PID namespace inherits every orphan in
/// it — until `child` does, and says how it ended.
pub fn reap_until(child: Pid) -> Ending {
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == child => {
                return match (status.exit_status(), status.terminating_signal()) {
                    (Some(code), _) => Ending::Exited(code),
                    (None, Some(signal)) => Ending::Killed(signal),
                    (None, None) => Ending::Exited(1),
                };
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ending::Exited(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_new_namespace_proc_numbers_this_process_as_it_does_itself() {
        assert_eq!(proc_view_pid(), i32::try_from(std::process::id()).ok());
        assert_eq!(proc_view_parent(), i32::try_from(std::os::unix::process::parent_id()).ok());
    }

    #[test]
    fn endings_become_the_status_bytes_shells_report() {
        assert_eq!(Ending::Exited(3).status_byte(), 3);
        assert_eq!(Ending::Killed(9).status_byte(), 137);
    }

    #[test]
    #[allow(clippy::zombie_processes, reason = "reap_until waits for it")]
    fn a_child_is_reaped_with_its_exit_code() {
        let child = std::process::Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        assert_eq!(reap_until(pid), Ending::Exited(7));
    }
}
