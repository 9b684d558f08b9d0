//! The baseline of every confined oxibot process, and the user's private directories that the
//! baseline never includes.
//!
//! The baseline ([`Policy::system`]) lets a process load libraries and run the system's
//! programs (`sh`, `python3`, `git` from `/usr`), read the parts of `/etc` that programs need to
//! start, resolve names and check certificates ([`ETC_ENTRIES`]), read process information under
//! `/proc` and `/sys`, and use a few devices that reach no one's data. The rest of `/etc`
//! (`passwd`, `shadow`, `ssh/`, `ssl/private/`, …), raw disks, terminals and `/dev/shm` stay out
//! of reach.
//!
//! *Private* directories are the user's home (`$HOME`) and oxibot's data directory
//! (`$OXIBOT_HOME`, else `~/.oxibot`, which holds `config.json` with the API keys and the
//! `plugins/` directory). No baseline path lies beneath them; a policy reaches into them only
//! through paths its caller adds, such as a workspace inside the data directory.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::policy::Policy;

/// Directories of programs and libraries: read and execute.
pub const EXECUTABLE_DIRS: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/nix/store"];
/// Directories of system information: read only.
pub const READ_ONLY_DIRS: &[&str] = &["/proc", "/sys", "/run/systemd/resolve", "/run/resolvconf"];
/// What of `/etc` programs need: the dynamic loader's cache, time zone and locale, name
/// resolution, certificates, and the language runtimes' own settings. Read only.
pub const ETC_ENTRIES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/crypto-policies",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/terminfo",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/perl",
    "/etc/gitconfig",
];
/// Devices every confined process may read and write.
pub const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

impl Policy {
    /// The baseline: [`EXECUTABLE_DIRS`], [`READ_ONLY_DIRS`], [`ETC_ENTRIES`], the
    /// `/etc/python3.*` directories and [`DEVICES`]; the network stays allowed.
    pub fn system() -> Policy {
        let mut policy = Policy::new();
        for dir in EXECUTABLE_DIRS {
            policy.allow_execute(dir);
        }
        for path in READ_ONLY_DIRS.iter().chain(ETC_ENTRIES) {
            policy.allow_read_only(path);
        }
        for python in versioned_python_settings() {
            policy.allow_read_only(python);
        }
        for device in DEVICES {
            policy.allow_read_write(device);
        }
        policy
    }

    /// Adds the directories of `search_path` (a `PATH` value) that are absolute and not
    /// private, to read and execute.
    pub fn allow_public_search_path(&mut self, search_path: &OsStr) -> &mut Policy {
        for dir in std::env::split_paths(search_path) {
            if dir.is_absolute() && !is_private(&dir) {
                self.allow_execute(dir);
            }
        }
        self
    }
}

/// `/etc/python3.N` directories (Debian keeps `sitecustomize.py` there).
fn versioned_python_settings() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.starts_with("python3.")))
        .map(|entry| entry.path())
        .collect()
}

/// The user's home directory, unless unset or `/`.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).filter(|home| home.is_absolute() && home.parent().is_some())
}

/// oxibot's data directory: `$OXIBOT_HOME`, else `~/.oxibot` (with `~` expanded).
pub fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("OXIBOT_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            match (dir.strip_prefix("~"), home_dir()) {
                (Ok(rest), Some(home)) => Some(home.join(rest)),
                _ => Some(dir),
            }
        }
        None => home_dir().map(|home| home.join(".oxibot")),
    }
}

/// The private directories: the home directory and the data directory, where known.
pub fn private_dirs() -> Vec<PathBuf> {
    home_dir().into_iter().chain(data_dir()).collect()
}

/// Whether `path` lies in (or is) a private directory, judged on its text.
pub fn is_private(path: &Path) -> bool {
    private_dirs().iter().any(|private| path.starts_with(private))
}

/// The entries of `search_path` (a `PATH` value) under which `policy` lets programs run, in
/// their order: a confined command then finds the system's programs instead of failing on
/// ones it may not execute.
pub fn reachable_search_path(search_path: &OsStr, policy: &Policy) -> OsString {
    let reachable: Vec<PathBuf> = std::env::split_paths(search_path).filter(|dir| policy.can_execute_in(dir)).collect();
    std::env::join_paths(reachable).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_runs_system_programs_and_reads_some_of_etc_but_not_all_of_etc_or_dev() {
        let policy = Policy::system();
        assert!(policy.can_execute_in(Path::new("/usr/bin")));
        assert!(policy.read_only().contains(&PathBuf::from("/etc/resolv.conf")));
        assert!(!policy.read_only().iter().any(|path| path == Path::new("/etc") || path.ends_with("passwd")));
        assert!(policy.read_write().contains(&PathBuf::from("/dev/null")));
        assert!(!policy.read_write().iter().chain(policy.read_only()).any(|path| path == Path::new("/dev")));
        assert!(policy.network_allowed());
    }

    #[test]
    fn no_baseline_path_is_private() {
        let policy = Policy::system();
        for path in policy.read_write().iter().chain(policy.read_only()).chain(policy.executable()) {
            assert!(!is_private(path), "{}", path.display());
        }
    }

    #[test]
    fn search_path_entries_in_the_home_directory_are_not_granted_or_kept() {
        let Some(home) = home_dir() else { return };
        let search = std::env::join_paths([home.join(".cargo/bin"), PathBuf::from("/usr/bin"), "rel".into()]).unwrap();
        let mut policy = Policy::system();
        policy.allow_public_search_path(&search);
        assert!(!policy.can_execute_in(&home.join(".cargo/bin")));
        assert_eq!(reachable_search_path(&search, &policy), OsString::from("/usr/bin"));
    }
}
