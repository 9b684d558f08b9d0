//! Plugins that failed to start, remembered so the next commands do not try them again.
//!
//! A plugin (or MCP server) that never got through its handshake and was given up costs a
//! command its restarts: seconds, and a warning per attempt. The host keeps its reason in
//! `<data dir>/cache/broken/`, under the same identity a remembered manifest has (program,
//! arguments, environment — an MCP server's entry is in it —, confinement; see
//! [`super::manifest_cache`]). While the entry is younger than [`REMEMBERED_FOR`] and the
//! identity unchanged, a host that skips broken plugins reports the plugin failed at once,
//! with the remembered reason, and says so in one line. A plugin that starts forgets its entry;
//! the gateway records failures but tries every plugin (its starts are rare, and a server may
//! be back).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::manifest_cache::{entry_name, identity};
use super::spec::PluginSpec;
use crate::fsutil;

/// How long a failure is believed: after that the plugin is tried again, whatever changed.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(10 * 60);

/// The directory of remembered failures (`<data dir>/cache/broken`).
#[derive(Debug, Clone)]
pub struct BrokenPlugins {
    /// Where the entries are.
    dir: PathBuf,
    /// Whether a remembered plugin is skipped (else only failures are recorded).
    skip: bool,
}

/// A remembered failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Why it failed.
    pub reason: String,
    /// How long ago.
    pub age: Duration,
}

/// One file.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// The identity the failure belongs to (hex SHA-256).
    identity: String,
    /// Why it failed.
    reason: String,
    /// When, in seconds since the epoch.
    at: u64,
}

impl BrokenPlugins {
    /// Failures kept in `dir`, skipped plugins included.
    pub fn new(dir: impl Into<PathBuf>) -> BrokenPlugins {
        BrokenPlugins { dir: dir.into(), skip: true }
    }

    /// The same directory, but every plugin is tried (failures are still recorded).
    pub fn recording_only(self) -> BrokenPlugins {
        BrokenPlugins { skip: false, ..self }
    }

    /// The remembered failure of `spec` when it is to be skipped: recorded for exactly this
    /// identity less than [`REMEMBERED_FOR`] ago.
    pub fn skipped(&self, spec: &PluginSpec) -> Option<Failure> {
        if !self.skip {
            return None;
        }
        let bytes = std::fs::read(self.path(spec)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        let age = Duration::from_secs(now().saturating_sub(entry.at));
        (entry.identity == identity(spec)? && age < REMEMBERED_FOR).then_some(Failure { reason: entry.reason, age })
    }

    /// Remembers that `spec`'s plugin failed to start, for `reason`. A failure to write is
    /// only logged: it costs the next command a retry.
    pub fn record(&self, spec: &PluginSpec, reason: &str) {
        let Some(identity) = identity(spec) else { return };
        let entry = Entry { identity, reason: reason.to_owned(), at: now() };
        let written = serde_json::to_vec(&entry)
            .map_err(std::io::Error::other)
            .and_then(|bytes| fsutil::write_atomic(&self.path(spec), &bytes));
        if let Err(error) = written {
            tracing::debug!(plugin = %spec.name, %error, "cannot remember the plugin's failure");
        }
    }

    /// Forgets `spec`'s failure: it started.
    pub fn forget(&self, spec: &PluginSpec) {
        let _ = std::fs::remove_file(self.path(spec));
    }

    fn path(&self, spec: &PluginSpec) -> PathBuf {
        self.dir.join(entry_name(spec))
    }
}

/// Seconds since the epoch.
fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_secs()).unwrap_or_default()
}

/// The one line said when a remembered plugin is skipped, and its status reason: the
/// reason's first line and, from a stderr tail after it, the last line.
pub fn skipped_reason(failure: &Failure) -> String {
    let mut lines = failure.reason.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next().unwrap_or_default();
    let summary = match lines.next_back() {
        Some(last) => format!("{}; {last}", first.trim_end_matches("last stderr lines:").trim_end_matches([';', ' '])),
        None => first.to_owned(),
    };
    let secs = failure.age.as_secs();
    let ago = if secs < 60 { format!("{secs} s") } else { format!("{} min", secs / 60) };
    format!(
        "not started: it failed to start {ago} ago ({summary}); it is tried again once its program or config \
         changes, or {} min after the failure",
        REMEMBERED_FOR.as_secs() / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> PluginSpec {
        let mut spec = PluginSpec::for_executable(PathBuf::from("/bin/sh"), crate::spec::Origin::Config);
        spec.args = args.iter().map(|arg| (*arg).to_owned()).collect();
        spec
    }

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-broken-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_failure_is_skipped_for_the_same_identity_only_and_forgotten_once_it_starts() {
        let dir = dir("identity");
        let broken = BrokenPlugins::new(&dir);
        let reason = "exited during the handshake; last stderr lines:\nTraceback\nNo module named mcp";
        broken.record(&spec(&["-c", "exit 3"]), reason);
        let failure = broken.skipped(&spec(&["-c", "exit 3"])).unwrap();
        assert_eq!(failure.reason, reason);
        let said = skipped_reason(&failure);
        assert!(said.contains("(exited during the handshake; No module named mcp)"), "{said}");
        assert_eq!(broken.skipped(&spec(&["-c", "exit 4"])), None, "another argument is another plugin");
        assert_eq!(broken.clone().recording_only().skipped(&spec(&["-c", "exit 3"])), None);
        broken.forget(&spec(&["-c", "exit 3"]));
        assert_eq!(broken.skipped(&spec(&["-c", "exit 3"])), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_old_failure_is_tried_again() {
        let dir = dir("old");
        let broken = BrokenPlugins::new(&dir);
        let spec = spec(&[]);
        let old =
            Entry { identity: identity(&spec).unwrap(), reason: "x".into(), at: now() - REMEMBERED_FOR.as_secs() };
        fsutil::write_atomic(&broken.path(&spec), &serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(broken.skipped(&spec), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}
