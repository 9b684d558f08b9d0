//! Entering new Linux namespaces: the container's set ([`enter_container`]), a user namespace
//! that gives a process back its own user id ([`enter_user`]), a PID namespace for a plugin
//! ([`enter_plugin`]), and finding out whether the running system allows them ([`probe`]).
//!
//! Every call unshares the *calling* process, which must be single-threaded (the kernel refuses
//! a new user namespace to a threaded process): call them first thing in a freshly executed
//! helper mode. The new PID namespace takes effect for the next child only; that child is its
//! PID 1, and when PID 1 exits the kernel kills every other process in the namespace.

use std::path::Path;
use std::process::{Command, Stdio};

use nix::sched::{CloneFlags, unshare};

use crate::error::SandboxError;

/// Environment variable that, set to anything but empty or `0`, makes [`probe`] answer as on a
/// system without user namespaces. For tests of the fallback; it can only take layers away.
pub const DISABLE_VAR: &str = "OXIBOT_CONTAINER_DISABLE";

/// The argument a binary's probe mode is started with (see [`probe`] and [`probe_here`]).
pub const PROBE_ARG: &str = "--probe-namespaces";

/// The real user and group ids of a process, as the outermost namespace sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

impl Ids {
    /// The ids of the calling process.
    pub fn current() -> Ids {
        Ids { uid: rustix::process::getuid().as_raw(), gid: rustix::process::getgid().as_raw() }
    }
}

/// Moves the calling process into new user, mount, IPC and UTS namespaces (and a new network
/// namespace unless `network`), prepares a new PID namespace for its next child, and maps the
/// caller's user and group to root inside. The process then holds every capability over the
/// new namespaces (none over the system): enough to build a root and mount `/proc`.
pub fn enter_container(network: bool) -> Result<(), SandboxError> {
    let outer = Ids::current();
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if !network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|errno| unavailable("cannot create the namespaces", errno))?;
    write_maps(Ids { uid: 0, gid: 0 }, outer)
}

/// Moves the calling process (root of a container's user namespace) into a nested user
/// namespace in which it is `ids` again, the user who started oxibot. After `exec` it holds no
/// capability (unless `ids` is root, see [`crate::drop_capabilities`]), and nothing it does can
/// change the container's mounts, which belong to the outer namespace.
pub fn enter_user(ids: Ids) -> Result<(), SandboxError> {
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|errno| unavailable("cannot create the user namespace", errno))?;
    write_maps(ids, Ids { uid: 0, gid: 0 })
}

/// Prepares a new PID namespace for the calling process's next child — the plugin launcher's
/// guarantee that nothing a plugin starts outlives it — inside a new user namespace in which
/// the user keeps its ids (root, who may create a PID namespace without one, keeps the system's
/// user namespace and so its access to every user's files).
///
/// `Ok(false)` when the system refused the namespaces: nothing changed, the caller may go on
/// without them. An error means the namespaces exist but could not be set up: the caller must
/// not start anything (its children could not even start threads).
pub fn enter_plugin() -> Result<bool, SandboxError> {
    let outer = Ids::current();
    let flags =
        if outer.uid == 0 { CloneFlags::CLONE_NEWPID } else { CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID };
    if unshare(flags).is_err() {
        return Ok(false);
    }
    if outer.uid != 0 {
        write_maps(outer, outer)?;
    }
    Ok(true)
}

/// Writes the calling process's user and group maps: `inside` is `outside` in the parent
/// namespace (a process may map only itself). `setgroups` is denied first, as the kernel
/// demands of an unprivileged mapper; it also keeps a process from dropping a group that a
/// file's permissions deny.
fn write_maps(inside: Ids, outside: Ids) -> Result<(), SandboxError> {
    let failed = |what: &str, error: std::io::Error| SandboxError::Namespaces(format!("cannot write {what}: {error}"));
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(failed("setgroups", error)),
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{} {} 1\n", inside.uid, outside.uid))
        .map_err(|error| failed("uid_map", error))?;
    std::fs::write("/proc/self/gid_map", format!("{} {} 1\n", inside.gid, outside.gid))
        .map_err(|error| failed("gid_map", error))
}

fn unavailable(what: &str, errno: nix::errno::Errno) -> SandboxError {
    SandboxError::Namespaces(format!("{what}: {errno} (user namespaces may be turned off on this system)"))
}

/// Whether [`DISABLE_VAR`] turns the namespaces off.
pub fn disabled_by_environment() -> bool {
    std::env::var_os(DISABLE_VAR).is_some_and(|value| !value.is_empty() && value != "0")
}

/// Whether this system lets an unprivileged process build a container: starts `program` with
/// `args` (a binary whose probe mode runs [`probe_here`]) and reads its verdict. `Err` holds
/// the reason, in words a user can act on.
pub fn probe(program: &Path, args: &[&str]) -> Result<(), String> {
    if disabled_by_environment() {
        return Err(format!("disabled by the environment variable {DISABLE_VAR}"));
    }
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot start {} to probe for namespaces: {error}", program.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let reason = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(if reason.is_empty() { format!("the namespace probe failed ({})", output.status) } else { reason })
}

/// The probe mode: enters the container's namespaces (network included) and reports. Returns
/// the process's exit status: 0 when they could be entered, 1 (with the reason on stderr) when
/// not.
pub fn probe_here() -> u8 {
    match enter_container(false) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("{error}");
            1
        }
    }
}
