//! How `exec` confines a command while the workspace is restricted: the sandbox policy, a
//! private temporary directory, and the environment the command gets.
//!
//! The command may read and write the workspace and its own temporary directory (`TMPDIR`),
//! read and execute the system's programs, and read `/etc`, `/proc` and `/sys`; the user's home
//! directory and oxibot's data directory (config, API keys, plugins) are out of reach, whatever
//! path the command builds at run time. Paths the plugin was granted with `allowPaths` are
//! granted again. The network stays allowed unless the plugin's environment sets
//! [`NETWORK_VAR`] to `off`.
//!
//! Without a sandbox the restriction cannot be kept, so [`Confinement::prepare`] refuses: the
//! command is never run unconfined while the workspace is restricted.

use std::ffi::{OsStr, OsString};
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use oxibot_plugin::{CallContext, ToolError, workspace};
use oxibot_sandbox::system::reachable_search_path;
use oxibot_sandbox::{ALLOW_PATHS_VAR, Policy, Support, detect};

/// Environment variable of the plugin that takes TCP away from commands: `off`, `false`, `no`
/// or `0`.
pub const NETWORK_VAR: &str = "OXIBOT_EXEC_NETWORK";

/// Everything that confines one command; dropping it removes the private temporary directory.
#[derive(Debug)]
pub struct Confinement {
    /// What the command may reach.
    policy: Policy,
    /// Variables set for the command: `TMPDIR`, and `PATH` without directories it may not use.
    env: Vec<(OsString, OsString)>,
    /// The command's own temporary directory, removed with the confinement.
    tmp: PrivateTmp,
}

impl Confinement {
    /// The confinement for a call: `None` when the workspace is not restricted, an error when
    /// it is and no sandbox is available (or the temporary directory cannot be made).
    pub fn prepare(ctx: &CallContext) -> Result<Option<Confinement>, ToolError> {
        if !ctx.restrict_to_workspace {
            return Ok(None);
        }
        if let Support::Unavailable { reason } = detect() {
            return Err(ToolError::new(unavailable_message(&reason)));
        }
        let tmp = PrivateTmp::create().map_err(|error| {
            ToolError::new(format!("cannot create a private temporary directory for the command: {error}"))
        })?;
        let policy = policy(&workspace::root(ctx), tmp.path(), network_allowed());
        let mut env = vec![(OsString::from("TMPDIR"), tmp.path().as_os_str().to_owned())];
        if let Some(search_path) = std::env::var_os("PATH") {
            env.push((OsString::from("PATH"), reachable_search_path(&search_path, &policy)));
        }
        Ok(Some(Confinement { policy, env, tmp }))
    }

    /// What the command may reach.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The variables to set for the command.
    pub fn env(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.env.iter().map(|(name, value)| (name.as_os_str(), value.as_os_str()))
    }

    /// The command's private temporary directory.
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

/// The error text when the workspace is restricted and no sandbox can enforce it.
pub fn unavailable_message(reason: &str) -> String {
    format!(
        "exec refused to run the command: the workspace is restricted (tools.restrictToWorkspace) and no \
         sandbox is available to enforce that ({reason}). To fix it, run oxibot on a Linux kernel with \
         Landlock (5.13 or newer, with landlock in the lsm= boot list), or set tools.restrictToWorkspace \
         to false in config.json to run commands unsandboxed"
    )
}

/// The policy of a command: the system baseline and public `PATH` directories, the workspace,
/// the private temporary directory and the plugin's extra paths.
fn policy(workspace: &Path, tmp: &Path, network: bool) -> Policy {
    let mut policy = Policy::system();
    if let Some(search_path) = std::env::var_os("PATH") {
        policy.allow_public_search_path(&search_path);
    }
    policy.allow_read_write(workspace).allow_read_write(tmp);
    if let Some(extra) = std::env::var_os(ALLOW_PATHS_VAR) {
        for path in std::env::split_paths(&extra).filter(|path| path.is_absolute()) {
            policy.allow_read_write(path);
        }
    }
    if !network {
        policy.deny_network();
    }
    policy
}

/// Whether [`NETWORK_VAR`] leaves commands their network.
fn network_allowed() -> bool {
    let value = std::env::var(NETWORK_VAR).unwrap_or_default().to_ascii_lowercase();
    !matches!(value.trim(), "off" | "false" | "no" | "0")
}

/// A directory only this user can enter, removed when dropped.
#[derive(Debug)]
struct PrivateTmp(PathBuf);

impl PrivateTmp {
    /// Creates `oxibot-exec-<pid>-<n>` (mode 0700) in the plugin's temporary directory; a name
    /// someone else took already is skipped, never reused.
    fn create() -> std::io::Result<PrivateTmp> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("oxibot-exec-{}-{n}", std::process::id()));
            match DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateTmp(path)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unrestricted_call_is_not_confined() {
        let ctx = CallContext { restrict_to_workspace: false, ..CallContext::default() };
        assert!(Confinement::prepare(&ctx).unwrap().is_none());
    }

    #[test]
    fn the_policy_grants_the_workspace_and_the_private_tmp_but_no_private_directory() {
        let policy = policy(Path::new("/ws"), Path::new("/tmp/oxibot-exec-1-0"), false);
        assert!(policy.read_write().contains(&PathBuf::from("/ws")));
        assert!(policy.read_write().contains(&PathBuf::from("/tmp/oxibot-exec-1-0")));
        assert!(!policy.read_write().iter().chain(policy.read_only()).any(|path| path == Path::new("/tmp")));
        assert!(!policy.network_allowed());
        if let Some(home) = oxibot_sandbox::system::home_dir() {
            let all = policy.read_write().iter().chain(policy.read_only()).chain(policy.executable());
            assert!(all.filter(|path| path.starts_with(&home)).all(|path| path.starts_with("/ws")));
        }
    }

    #[test]
    fn a_private_tmp_is_only_for_this_user_and_is_removed_with_it() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = PrivateTmp::create().unwrap();
        let path = tmp.path().to_path_buf();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        drop(tmp);
        assert!(!path.exists());
    }

    #[test]
    fn the_refusal_says_how_to_fix_it() {
        let message = unavailable_message("this kernel has no Landlock");
        assert!(message.contains("Landlock") && message.contains("tools.restrictToWorkspace to false"), "{message}");
    }
}
