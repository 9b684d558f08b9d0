//! Building a container's root ([`build_root`]): a fresh `tmpfs` holding read-only binds of
//! what a [`Policy`] lets a process read or execute, read-write binds of what it may write
//! (with [`Root::protected`] paths bound read-only on top), a private `/tmp`, a new `/proc`
//! and the few devices of the policy; then `pivot_root` into it, so nothing else of the
//! system's filesystem (the home directory, the data directory, `/run`, other users' `/tmp`)
//! exists for the process any more.
//!
//! Run by the container's PID 1, which holds every capability over its own user and mount
//! namespaces (see [`crate::namespaces::enter_container`]): a new `/proc` shows the processes
//! of the mounting process's PID namespace, so only a process inside it can mount one.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::statvfs;

use crate::error::SandboxError;
use crate::policy::Policy;

/// Where the process finds its private temporary directory inside the container.
pub const CONTAINER_TMP: &str = "/tmp";
/// The host name of every container.
const HOST_NAME: &str = "oxibot";
/// Where the old root is parked during `pivot_root`, before it is detached.
const OLD_ROOT: &str = ".old-root";
/// Links every Linux system has in `/dev` (bash's `<(…)` needs `/dev/fd`).
const DEV_LINKS: &[(&str, &str)] = &[
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
];

/// What a container's root is made of.
#[derive(Debug, Clone)]
pub struct Root<'a> {
    /// What the process may reach, in container paths: [`CONTAINER_TMP`] stands for `tmp`.
    pub policy: &'a Policy,
    /// An empty directory of the caller's, on the host, that becomes the root's mount point.
    pub mount_point: &'a Path,
    /// The host directory bound at [`CONTAINER_TMP`].
    pub tmp: &'a Path,
    /// Paths inside read-write ones that stay read-only (the assistant's own state).
    pub protected: &'a [PathBuf],
    /// The directory the process continues in, the same path inside as outside.
    pub cwd: &'a Path,
}

/// One bind mount: a host path, the same path inside, and whether it may be written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bind {
    source: PathBuf,
    target: PathBuf,
    writable: bool,
}

/// Builds the root described by `root` and makes it the calling process's `/`.
pub fn build_root(root: &Root<'_>) -> Result<(), SandboxError> {
    let new_root = root.mount_point;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| failed("make the mounts private", "/", e))?;
    mount(Some("tmpfs"), new_root, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some("mode=0755"))
        .map_err(|e| failed("mount a tmpfs on", new_root, e))?;
    for bind in binds(root) {
        place(new_root, &bind)?;
    }
    for path in root.protected.iter().filter(|path| path.exists()) {
        place(new_root, &Bind { source: path.clone(), target: path.clone(), writable: false })?;
    }
    mount_proc(new_root)?;
    for (link, target) in DEV_LINKS {
        let _ = std::os::unix::fs::symlink(target, inside(new_root, Path::new(link)));
    }
    enter(new_root)?;
    std::env::set_current_dir(root.cwd)
        .map_err(|e| SandboxError::Namespaces(format!("cannot enter {}: {e}", root.cwd.display())))?;
    nix::unistd::sethostname(HOST_NAME).map_err(|e| failed("set the host name", Path::new(HOST_NAME), e))
}

/// The binds of `root`, parents before children: every policy path that exists, read-write or
/// read-only as the policy grants it, with [`CONTAINER_TMP`] coming from `root.tmp` and
/// `/proc` left out (a new one is mounted).
fn binds(root: &Root<'_>) -> Vec<Bind> {
    let policy = root.policy;
    let writable = policy.read_write().iter().map(|path| (path, true));
    let readable = policy.read_only().iter().chain(policy.executable()).map(|path| (path, false));
    let mut binds: Vec<Bind> = writable
        .chain(readable)
        .filter(|(path, _)| path.as_path() != Path::new("/proc") && !path.starts_with("/proc/"))
        .map(|(path, writable)| {
            let source = if path.as_path() == Path::new(CONTAINER_TMP) { root.tmp.to_path_buf() } else { path.clone() };
            Bind { source, target: path.clone(), writable }
        })
        .collect();
    // Stable: of two binds of one path the first, the writable one, is kept.
    binds.sort_by_key(|bind| bind.target.components().count());
    let mut seen = std::collections::HashSet::new();
    binds.retain(|bind| seen.insert(bind.target.clone()));
    binds
}

/// Recreates `bind` under `new_root`: a symbolic link as the same link, anything else as a bind
/// mount on a new empty directory or file, made read-only unless writable.
fn place(new_root: &Path, bind: &Bind) -> Result<(), SandboxError> {
    let Ok(meta) = std::fs::symlink_metadata(&bind.source) else { return Ok(()) };
    let target = inside(new_root, &bind.target);
    if let Some(parent) = target.parent() {
        // A parent inside a read-only bind already exists; one that cannot be made is skipped.
        if std::fs::create_dir_all(parent).is_err() {
            return Ok(());
        }
    }
    if meta.file_type().is_symlink() {
        if let Ok(link) = std::fs::read_link(&bind.source) {
            let _ = std::os::unix::fs::symlink(link, &target);
        }
        return Ok(());
    }
    if std::fs::symlink_metadata(&target).is_err() {
        let made = if meta.is_dir() { std::fs::create_dir(&target) } else { std::fs::write(&target, b"") };
        if made.is_err() {
            return Ok(());
        }
    }
    mount(Some(&bind.source), &target, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        .map_err(|e| failed("bind", &bind.source, e))?;
    if !bind.writable {
        make_read_only(&target)?;
    }
    Ok(())
}

/// Remounts the bind at `target` read-only, keeping the flags the kernel locks in a user
/// namespace (`nosuid`, `nodev`, `noexec`, atime) as the source mount has them.
fn make_read_only(target: &Path) -> Result<(), SandboxError> {
    let kept = statvfs(target).map(|stat| stat.flags().bits()).unwrap_or(0);
    let locked = MsFlags::from_bits_truncate(kept as _)
        & (MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC
            | MsFlags::MS_NOATIME
            | MsFlags::MS_NODIRATIME
            | MsFlags::MS_RELATIME);
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | locked;
    mount(None::<&str>, target, None::<&str>, flags, None::<&str>).map_err(|e| failed("make read-only", target, e))
}

/// Mounts a new `/proc` for the calling process's PID namespace.
fn mount_proc(new_root: &Path) -> Result<(), SandboxError> {
    let proc = inside(new_root, Path::new("/proc"));
    std::fs::create_dir_all(&proc).map_err(|e| SandboxError::Namespaces(format!("cannot create /proc: {e}")))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), &proc, Some("proc"), flags, None::<&str>).map_err(|e| failed("mount", Path::new("/proc"), e))
}

/// Makes `new_root` the root, detaches the old one, and makes the root's own tmpfs read-only.
fn enter(new_root: &Path) -> Result<(), SandboxError> {
    let old = new_root.join(OLD_ROOT);
    std::fs::create_dir(&old).map_err(|e| SandboxError::Namespaces(format!("cannot create {}: {e}", old.display())))?;
    nix::unistd::pivot_root(new_root, &old).map_err(|e| failed("pivot_root to", new_root, e))?;
    std::env::set_current_dir("/").map_err(|e| SandboxError::Namespaces(format!("cannot enter the new root: {e}")))?;
    let parked = Path::new("/").join(OLD_ROOT);
    umount2(&parked, MntFlags::MNT_DETACH).map_err(|e| failed("detach the old root at", &parked, e))?;
    let _ = std::fs::remove_dir(&parked);
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(None::<&str>, "/", None::<&str>, flags, None::<&str>).map_err(|e| failed("make read-only", Path::new("/"), e))
}

/// `path` (absolute) placed under `root`.
fn inside(root: &Path, path: &Path) -> PathBuf {
    let relative: PathBuf = path.components().filter(|part| matches!(part, Component::Normal(_))).collect();
    root.join(relative)
}

fn failed(what: &str, path: impl AsRef<OsStr>, errno: nix::errno::Errno) -> SandboxError {
    SandboxError::Namespaces(format!("cannot {what} {}: {errno}", Path::new(path.as_ref()).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_come_parents_first_without_proc_and_with_the_private_tmp() {
        let mut policy = Policy::new();
        policy
            .allow_read_write("/tmp/ws")
            .allow_read_write(CONTAINER_TMP)
            .allow_read_only("/proc")
            .allow_execute("/usr")
            .allow_read_only("/usr");
        let root = Root {
            policy: &policy,
            mount_point: Path::new("/x/root"),
            tmp: Path::new("/x/tmp"),
            protected: &[],
            cwd: Path::new("/tmp/ws"),
        };
        let binds = binds(&root);
        let targets: Vec<&Path> = binds.iter().map(|bind| bind.target.as_path()).collect();
        assert_eq!(targets, [Path::new("/tmp"), Path::new("/usr"), Path::new("/tmp/ws")]);
        assert_eq!(binds[0].source, PathBuf::from("/x/tmp"));
        assert!(binds[0].writable && !binds[1].writable && binds[2].writable);
    }

    #[test]
    fn paths_are_placed_beneath_the_new_root() {
        assert_eq!(inside(Path::new("/r"), Path::new("/usr/bin")), PathBuf::from("/r/usr/bin"));
        assert_eq!(inside(Path::new("/r"), Path::new("/")), PathBuf::from("/r"));
    }
}
