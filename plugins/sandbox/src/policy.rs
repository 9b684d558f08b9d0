//! [`Policy`]: what a confined process may still reach, and its command-line form.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::error::SandboxError;

/// The argument that starts a policy on a command line.
pub const ARGS_MARKER: &str = "--sandbox";
/// Flag before a path the process may read, write, create in, delete in and execute from.
const READ_WRITE_FLAG: &str = "--rw";
/// Flag before a path the process may only read (files and directory listings).
const READ_ONLY_FLAG: &str = "--ro";
/// Flag before a path the process may read and execute.
const EXECUTABLE_FLAG: &str = "--rx";
/// Flag that takes TCP away from the process.
const NO_NETWORK_FLAG: &str = "--no-network";

/// What a confined process may still reach; everything else on the filesystem is out of reach.
///
/// Each path grants access to itself and, for a directory, to everything beneath it. Paths that
/// do not exist when the policy is applied grant nothing. The network (TCP) is allowed unless
/// [`Policy::deny_network`] was called.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Full access: read, write, create, delete, rename, execute.
    read_write: Vec<PathBuf>,
    /// Read files and list directories.
    read_only: Vec<PathBuf>,
    /// Read, list and execute.
    executable: Vec<PathBuf>,
    /// Whether TCP `connect` and `bind` are taken away.
    no_network: bool,
}

impl Policy {
    /// A policy that allows nothing on the filesystem, and the network.
    pub fn new() -> Policy {
        Policy::default()
    }

    /// Grants full access to `path` and everything beneath it.
    pub fn allow_read_write(&mut self, path: impl Into<PathBuf>) -> &mut Policy {
        push_unique(&mut self.read_write, path.into());
        self
    }

    /// Grants reading `path` and everything beneath it.
    pub fn allow_read_only(&mut self, path: impl Into<PathBuf>) -> &mut Policy {
        push_unique(&mut self.read_only, path.into());
        self
    }

    /// Grants reading and executing `path` and everything beneath it.
    pub fn allow_execute(&mut self, path: impl Into<PathBuf>) -> &mut Policy {
        push_unique(&mut self.executable, path.into());
        self
    }

    /// Takes TCP `connect` and `bind` away (Landlock ABI 4 and newer).
    pub fn deny_network(&mut self) -> &mut Policy {
        self.no_network = true;
        self
    }

    /// Paths with full access.
    pub fn read_write(&self) -> &[PathBuf] {
        &self.read_write
    }

    /// Paths that may only be read.
    pub fn read_only(&self) -> &[PathBuf] {
        &self.read_only
    }

    /// Paths that may be read and executed.
    pub fn executable(&self) -> &[PathBuf] {
        &self.executable
    }

    /// Whether the confined process keeps TCP.
    pub fn network_allowed(&self) -> bool {
        !self.no_network
    }

    /// Whether programs in `dir` may be executed under this policy, judged on the path's text
    /// (no symbolic link is followed): `dir` lies beneath an executable or read-write path.
    pub fn can_execute_in(&self, dir: &Path) -> bool {
        self.executable.iter().chain(&self.read_write).any(|granted| dir.starts_with(granted))
    }

    /// The policy as command-line arguments, starting with [`ARGS_MARKER`].
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from(ARGS_MARKER)];
        for (flag, paths) in [
            (READ_WRITE_FLAG, &self.read_write),
            (READ_ONLY_FLAG, &self.read_only),
            (EXECUTABLE_FLAG, &self.executable),
        ] {
            for path in paths {
                args.push(flag.into());
                args.push(path.into());
            }
        }
        if self.no_network {
            args.push(NO_NETWORK_FLAG.into());
        }
        args
    }

    /// Reads a policy from the start of `args`, as written by [`Policy::to_args`].
    ///
    /// Returns `None` and all of `args` when they do not start with [`ARGS_MARKER`]; otherwise
    /// the policy and the arguments after it. Relative paths are refused: a policy must not
    /// depend on the directory it is read in.
    pub fn from_args(args: &[OsString]) -> Result<(Option<Policy>, &[OsString]), SandboxError> {
        let Some((first, mut rest)) = args.split_first() else { return Ok((None, args)) };
        if first != ARGS_MARKER {
            return Ok((None, args));
        }
        let mut policy = Policy::new();
        while let Some((flag, after)) = rest.split_first() {
            if flag == NO_NETWORK_FLAG {
                policy.deny_network();
                rest = after;
                continue;
            }
            let add: fn(&mut Policy, PathBuf) -> &mut Policy = match flag.to_str() {
                Some(READ_WRITE_FLAG) => |policy, path| policy.allow_read_write(path),
                Some(READ_ONLY_FLAG) => |policy, path| policy.allow_read_only(path),
                Some(EXECUTABLE_FLAG) => |policy, path| policy.allow_execute(path),
                _ => break,
            };
            let Some((path, after)) = after.split_first() else {
                return Err(bad(format!("{} needs a path", flag.to_string_lossy())));
            };
            add(&mut policy, absolute(path)?);
            rest = after;
        }
        Ok((Some(policy), rest))
    }
}

/// Appends `path` unless it is already listed.
fn push_unique(paths: &mut Vec<PathBuf>, path: PathBuf) {
    if !paths.contains(&path) {
        paths.push(path);
    }
}

/// `path` as an absolute path, or an error naming it.
fn absolute(path: &OsStr) -> Result<PathBuf, SandboxError> {
    let path = PathBuf::from(path);
    if path.is_absolute() { Ok(path) } else { Err(bad(format!("'{}' is not an absolute path", path.display()))) }
}

fn bad(message: String) -> SandboxError {
    SandboxError::BadArguments(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_policy_survives_the_trip_through_arguments() {
        let mut policy = Policy::new();
        policy.allow_read_write("/ws").allow_read_only("/etc").allow_execute("/usr").deny_network();
        let mut args = policy.to_args();
        args.extend(os(&["--", "sh", "-c", "true"]));
        let (parsed, rest) = Policy::from_args(&args).unwrap();
        assert_eq!(parsed, Some(policy));
        assert_eq!(rest, os(&["--", "sh", "-c", "true"]).as_slice());
    }

    #[test]
    fn arguments_without_the_marker_carry_no_policy() {
        let args = os(&["--", "--rw", "/x"]);
        let (parsed, rest) = Policy::from_args(&args).unwrap();
        assert_eq!(parsed, None);
        assert_eq!(rest, args.as_slice());
        assert_eq!(Policy::from_args(&[]).unwrap().0, None);
    }

    #[test]
    fn the_marker_alone_is_a_policy_that_allows_no_path() {
        let args = os(&[ARGS_MARKER, "--", "x"]);
        let (parsed, rest) = Policy::from_args(&args).unwrap();
        let parsed = parsed.unwrap();
        assert!(parsed.read_write().is_empty() && parsed.read_only().is_empty() && parsed.executable().is_empty());
        assert!(parsed.network_allowed());
        assert_eq!(rest, os(&["--", "x"]).as_slice());
    }

    #[test]
    fn relative_and_missing_paths_are_refused() {
        let relative = Policy::from_args(&os(&[ARGS_MARKER, "--rw", "ws"])).unwrap_err().to_string();
        assert!(relative.contains("'ws' is not an absolute path"), "{relative}");
        let missing = Policy::from_args(&os(&[ARGS_MARKER, "--ro"])).unwrap_err().to_string();
        assert!(missing.contains("--ro needs a path"), "{missing}");
    }

    #[test]
    fn execution_is_judged_beneath_executable_and_read_write_paths_only() {
        let mut policy = Policy::new();
        policy.allow_execute("/usr").allow_read_write("/ws").allow_read_only("/etc");
        assert!(policy.can_execute_in(Path::new("/usr/local/bin")));
        assert!(policy.can_execute_in(Path::new("/ws/bin")));
        assert!(!policy.can_execute_in(Path::new("/etc")));
        assert!(!policy.can_execute_in(Path::new("/usrx/bin")));
    }

    #[test]
    fn a_path_granted_twice_is_listed_once() {
        let mut policy = Policy::new();
        policy.allow_read_write("/ws").allow_read_write("/ws");
        assert_eq!(policy.read_write(), [PathBuf::from("/ws")]);
    }
}
