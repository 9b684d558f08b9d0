//! A process's descendants, found through `/proc`, and killing all of them.
//!
//! A command can leave its process group (`setsid`) and lose its parent (a double fork), so
//! neither a group kill nor a walk from the shell reaches everything it started. The guardian
//! is a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphans in its tree are re-parented to it
//! instead of to init, so every process the command started stays its descendant, and
//! [`kill_descendants`] finds them all by following parent links in `/proc/<pid>/stat`.
//! (`/proc/<pid>/task/<tid>/children` would be shorter but needs `CONFIG_PROC_CHILDREN`, which
//! many kernels lack.)

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

/// The live descendants of `root` (children, their children, …), zombies left out.
pub fn live_descendants(root: Pid) -> Vec<Pid> {
    descendants_in(&process_table(), root.as_raw_nonzero().get()).into_iter().filter_map(Pid::from_raw).collect()
}

/// Sends SIGKILL to every descendant of `root`, round after round, until none is left alive
/// (or [`GIVE_UP_AFTER`] passes). Processes started between two rounds are caught by the next.
pub fn kill_descendants(root: Pid) {
    let started = Instant::now();
    loop {
        let alive = live_descendants(root);
        if alive.is_empty() || started.elapsed() > GIVE_UP_AFTER {
            return;
        }
        for pid in alive {
            let _ = kill_process(pid, Signal::KILL);
        }
        std::thread::sleep(ROUND_PAUSE);
    }
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
    fn this_test_process_has_a_live_child_while_one_runs() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(live_descendants(rustix::process::getpid()).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
