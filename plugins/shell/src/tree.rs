//! A process's descendants, found through `/proc`, and killing all of them.
//!
//! A command can leave its process group (`setsid`) and lose its parent (a double fork), so
//! neither a group kill nor a walk from the shell reaches everything it started. The guardian
//! is a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphans in its tree are re-parented to it
//! instead of to init, so every process the command started stays its descendant, and
//! [`kill_own_descendants`] finds them all by following parent links in `/proc/<pid>/stat`.
//! (`/proc/<pid>/task/<tid>/children` would be shorter but needs `CONFIG_PROC_CHILDREN`, which
//! many kernels lack.)
//!
//! The plugin runs in a PID namespace of its own while `/proc` is the system's, which numbers
//! processes differently: the walk follows `/proc`'s numbers, and each process found is
//! signalled by its number in this process's namespace (the `NSpid` line of its status).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// Pause between rounds of killing, so SIGKILL can take effect.
const ROUND_PAUSE: Duration = Duration::from_millis(2);
/// How long to keep killing before giving up on processes that do not die (stuck in the kernel).
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Its pid.
    pid: i32,
    /// Its parent's pid.
    parent: i32,
    /// Whether it has exited and waits to be reaped (it can no longer run or start anything).
    zombie: bool,
}

/// The live descendants of the calling process (children, their children, …), zombies left
/// out, as this process numbers them.
pub fn live_own_descendants() -> Vec<Pid> {
    let Some((root, level)) = own_numbers() else { return Vec::new() };
    descendants_in(&process_table(), root).into_iter().filter_map(|pid| own_number(pid, level)).collect()
}

/// Sends SIGKILL to every descendant of the calling process, round after round, until none is
/// left alive (or [`GIVE_UP_AFTER`] passes). Processes started between two rounds are caught
/// by the next.
pub fn kill_own_descendants() {
    let started = Instant::now();
    loop {
        let alive = live_own_descendants();
        if alive.is_empty() || started.elapsed() > GIVE_UP_AFTER {
            return;
        }
        for pid in alive {
            let _ = kill_process(pid, Signal::KILL);
        }
        std::thread::sleep(ROUND_PAUSE);
    }
}

/// This process's number in `/proc`, and how deep its own PID namespace lies below the one
/// `/proc` numbers for (0: the same).
fn own_numbers() -> Option<(i32, usize)> {
    let numbers = namespace_pids(&std::fs::read_to_string("/proc/self/status").ok()?)?;
    Some((*numbers.first()?, numbers.len() - 1))
}

/// The number, in the namespace `level` deep, of the process `/proc` numbers `pid`.
fn own_number(pid: i32, level: usize) -> Option<Pid> {
    if level == 0 {
        return Pid::from_raw(pid);
    }
    let numbers = namespace_pids(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)?;
    Pid::from_raw(*numbers.get(level)?)
}

/// The `NSpid` line of a status file: a process's pid in each namespace from `/proc`'s down to
/// its own.
fn namespace_pids(status: &str) -> Option<Vec<i32>> {
    let line = status.lines().find_map(|line| line.strip_prefix("NSpid:"))?;
    let numbers: Vec<i32> = line.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    (!numbers.is_empty()).then_some(numbers)
}

/// Every process in `/proc` that could be read.
fn process_table() -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| parse_stat(pid, &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// Reads the state and parent from a `/proc/<pid>/stat` line (the name may contain anything,
/// so fields are counted after its closing parenthesis).
fn parse_stat(pid: i32, stat: &str) -> Option<Entry> {
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    Some(Entry { pid, parent, zombie: matches!(state, "Z" | "X") })
}

/// The live descendants of `root` in `table`.
fn descendants_in(table: &[Entry], root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<&Entry>> = HashMap::new();
    for entry in table {
        children.entry(entry.parent).or_default().push(entry);
    }
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            if seen.insert(child.pid) {
                queue.push(child.pid);
                if !child.zombie {
                    found.push(child.pid);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i32, parent: i32, zombie: bool) -> Entry {
        Entry { pid, parent, zombie }
    }

    #[test]
    fn stat_lines_are_read_after_the_name_even_when_it_has_parentheses() {
        let parsed = parse_stat(42, "42 (evil) S 7 (x)) R 9 42 42 0").unwrap();
        assert_eq!(parsed, entry(42, 9, false));
        assert!(parse_stat(5, "5 (sleep) Z 1 5 5").unwrap().zombie);
        assert_eq!(parse_stat(5, "garbage"), None);
    }

    #[test]
    fn descendants_are_found_at_every_depth_without_zombies_or_strangers() {
        let table = [
            entry(10, 1, false),
            entry(11, 10, false),
            entry(12, 11, false),
            entry(13, 10, true),
            entry(14, 13, false),
            entry(20, 1, false),
        ];
        let mut found = descendants_in(&table, 10);
        found.sort_unstable();
        assert_eq!(found, vec![11, 12, 14]);
        assert!(descendants_in(&table, 20).is_empty());
    }

    #[test]
    fn namespace_pids_are_read_from_the_status_line() {
        assert_eq!(namespace_pids("Name:\tx\nNSpid:\t4021\t7\t1\n"), Some(vec![4021, 7, 1]));
        assert_eq!(namespace_pids("Name:\tx\n"), None);
    }

    #[test]
    fn this_test_process_has_a_live_child_while_one_runs() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(live_own_descendants().contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
