//! How `exec` confines a command while the workspace is restricted: the [`Plan`] (container,
//! limits, sandbox policy), a private temporary directory, and the environment the command
//! gets.
//!
//! The command may read and write the workspace and its own temporary directory (`TMPDIR`,
//! where its `GIT_CONFIG_GLOBAL` is: a copy of the harmless git configuration the kernel gave
//! the plugin, so git runs with the user's identity),
//! read and execute the system's programs, and read `/etc`, `/proc` and `/sys`; the user's home
//! directory and oxibot's data directory (config, API keys, plugins) are out of reach, whatever
//! path the command builds at run time. Paths the plugin was granted with `allowPaths` are
//! granted again. The network stays allowed unless the plugin's environment sets
//! [`NETWORK_VAR`] to `off`.
//!
//! Where the system allows user namespaces (probed once per plugin process, see
//! [`container_support`]) the command runs in a container ([`crate::contain`]): only those
//! paths exist for it, the workspace's `.git`, `memory/`, `cron/`, `SOUL.md`, `USER.md` and
//! `AGENTS.md` ([`PROTECTED`]) are read-only, its `/tmp` is the private directory, its `/proc`
//! shows only its own processes, and with the network off it has an empty network namespace.
//! Elsewhere it runs under Landlock, the seccomp filter and the limits alone. Either way the
//! limits ([`limits`]) can be raised in the plugin's environment: [`MAX_PROCESSES_VAR`],
//! [`MAX_FILE_MB_VAR`], [`MAX_MEMORY_MB_VAR`].
//!
//! Without Landlock the restriction cannot be kept, so [`Confinement::prepare`] refuses: the
//! command is never run unconfined while the workspace is restricted.

use std::ffi::{OsStr, OsString};
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use oxibot_plugin::{CallContext, ToolError, workspace};
use oxibot_sandbox::limits::Limits;
use oxibot_sandbox::mounts::CONTAINER_TMP;
use oxibot_sandbox::namespaces::{Ids, PROBE_ARG, probe};
use oxibot_sandbox::system::reachable_search_path;
use oxibot_sandbox::{ALLOW_PATHS_VAR, Policy, Support, detect};

use crate::plan::{Container, Plan};

/// Environment variable of the plugin that takes the network away from commands: `off`,
/// `false`, `no` or `0`.
pub const NETWORK_VAR: &str = "OXIBOT_EXEC_NETWORK";
/// Environment variable of the plugin: how many processes a command may run at once.
pub const MAX_PROCESSES_VAR: &str = "OXIBOT_EXEC_MAX_PROCESSES";
/// Environment variable of the plugin: the largest file a command may write, in MiB.
pub const MAX_FILE_MB_VAR: &str = "OXIBOT_EXEC_MAX_FILE_MB";
/// Environment variable of the plugin: the address space of each of a command's processes, in
/// MiB.
pub const MAX_MEMORY_MB_VAR: &str = "OXIBOT_EXEC_MAX_MEMORY_MB";
/// The variable git reads its global configuration file from.
const GIT_CONFIG_GLOBAL: &str = "GIT_CONFIG_GLOBAL";
/// The copy of the git configuration in a command's temporary directory.
const GITCONFIG_NAME: &str = ".gitconfig";
/// The workspace entries that hold the assistant's own state, read-only for commands in a
/// container (the kernel's own tools keep editing them).
pub const PROTECTED: &[&str] = &[".git", "memory", "cron", "SOUL.md", "USER.md", "AGENTS.md"];

/// Everything that confines one command; dropping it removes the private temporary directory.
#[derive(Debug)]
pub struct Confinement {
    /// How the command is confined.
    plan: Plan,
    /// Variables set for the command: `TMPDIR`, `GIT_CONFIG_GLOBAL` (a copy of the plugin's
    /// harmless git configuration) and `PATH` without directories it may not use.
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
        let root = workspace::root(ctx);
        let container = match container_support() {
            Ok(()) => Some(
                container(&root, tmp.path())
                    .map_err(|error| ToolError::new(format!("cannot prepare the command's container: {error}")))?,
            ),
            Err(_) => None,
        };
        let command_tmp = if container.is_some() { PathBuf::from(CONTAINER_TMP) } else { tmp.path().to_path_buf() };
        let policy = policy(&root, &command_tmp, network_allowed());
        let mut env = vec![(OsString::from("TMPDIR"), command_tmp.clone().into_os_string())];
        let real_tmp = container.as_ref().map_or_else(|| tmp.path().to_path_buf(), Container::tmp);
        if let Some(gitconfig) = carry_gitconfig(&real_tmp, &command_tmp) {
            env.push((OsString::from(GIT_CONFIG_GLOBAL), gitconfig));
        }
        if let Some(search_path) = std::env::var_os("PATH") {
            env.push((OsString::from("PATH"), reachable_search_path(&search_path, &policy)));
        }
        let mut limits = limits();
        if container.is_none() {
            // Outside a user namespace the process limit counts every process of the user
            // (a desktop's browser threads too): it would stop commands, not fork bombs.
            limits.processes = 0;
        }
        let plan = Plan { container, limits: Some(limits), policy: Some(policy) };
        Ok(Some(Confinement { plan, env, tmp }))
    }

    /// How the command is confined.
    pub fn plan(&self) -> &Plan {
        &self.plan
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
    // A workspace reached through a symbolic link: a container recreates the link, so the
    // directory it leads to must be there too.
    if let Ok(real) = std::fs::canonicalize(workspace)
        && real != workspace
    {
        policy.allow_read_write(real);
    }
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

/// Copies the plugin's harmless git configuration (`GIT_CONFIG_GLOBAL`, which the kernel
/// writes into the plugin's `TMPDIR`) into the command's temporary directory, `real_tmp` here
/// and `command_tmp` as the command sees it; returns the command's `GIT_CONFIG_GLOBAL`. The
/// user's own `~/.gitconfig` is out of the command's reach, and git refuses to run when it
/// exists but cannot be read.
fn carry_gitconfig(real_tmp: &Path, command_tmp: &Path) -> Option<OsString> {
    let plugins = std::env::var_os(GIT_CONFIG_GLOBAL)?;
    std::fs::copy(plugins, real_tmp.join(GITCONFIG_NAME)).ok()?;
    Some(command_tmp.join(GITCONFIG_NAME).into_os_string())
}

/// Whether this system lets commands run in a container: `Err` with the reason when not.
/// Probed once per plugin process, by starting this binary in its probe mode (a threaded
/// process cannot enter a user namespace itself).
pub fn container_support() -> Result<(), String> {
    static SUPPORT: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORT.get_or_init(|| probe(Path::new("/proc/self/exe"), &[PROBE_ARG])).clone()
}

/// The container of a command in `workspace`, its scratch space in `scratch`.
fn container(workspace: &Path, scratch: &Path) -> std::io::Result<Container> {
    // Bound where they really are: a bind through a symbolic link would land outside the root.
    let real = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let container = Container {
        scratch: scratch.to_path_buf(),
        ids: Ids::current(),
        protected: PROTECTED.iter().map(|entry| real.join(entry)).collect(),
    };
    for dir in [container.mount_point(), container.tmp()] {
        DirBuilder::new().mode(0o700).create(dir)?;
    }
    Ok(container)
}

/// The limits of commands: [`Limits::DEFAULT`], each replaced by its variable when set to a
/// number.
fn limits() -> Limits {
    let number = |name: &str| std::env::var(name).ok().and_then(|value| value.trim().parse::<u64>().ok());
    let mib = 1024 * 1024;
    Limits {
        processes: number(MAX_PROCESSES_VAR).unwrap_or(Limits::DEFAULT.processes),
        file_size: number(MAX_FILE_MB_VAR).map_or(Limits::DEFAULT.file_size, |mb| mb.saturating_mul(mib)),
        address_space: number(MAX_MEMORY_MB_VAR).map_or(Limits::DEFAULT.address_space, |mb| mb.saturating_mul(mib)),
    }
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
