//! Race-free file access inside a workspace: every path is resolved and opened beneath one
//! handle on the workspace root, so no `..`, absolute path or symlink leads outside it, not
//! even a symlink that another process swaps between a check and an open.
//!
//! [`workspace::resolve`](crate::workspace::resolve) checks a path and returns it; opening
//! that path again later leaves a gap in which a symlink on it can be pointed elsewhere (time
//! of check to time of use). A [`WorkspaceDir`] has no such gap: it opens the root once per
//! call, then resolves each path in the same system call that opens it, relative to that
//! handle, and hands out open files and directory handles ([`DirHandle`]) to work with. A
//! tree is walked by opening each subdirectory relative to its parent's handle, and a file is
//! replaced by writing a temp file and renaming it within one directory handle.
//!
//! How a path is resolved when the workspace restriction is on ([`Resolver`]):
//! - `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (Linux 5.6 and later): the kernel
//!   refuses any step that would leave the root, whenever it happens;
//! - a walk, one component at a time from the root handle, where `openat2` is missing
//!   (`ENOSYS`, or `EPERM` from a seccomp filter) and for every path `openat2` refuses: each
//!   component is opened with `O_NOFOLLOW` relative to its parent's handle, each symlink is
//!   read with `readlinkat` and followed by the walk itself, and `..` goes back to the
//!   parent's handle. The walk refuses `..` above the root and absolute symlinks that do not
//!   lead into the root's real path. It accepts absolute symlinks that lead into the
//!   workspace, which `RESOLVE_BENEATH` refuses, so such links keep working.
//!
//! An escape found only while opening (`EXDEV` from the kernel, a symlink the walk refuses)
//! gives the same [`AccessError::Outside`] as a path refused up front. When the restriction is
//! off, paths are opened as given, absolute paths anywhere.
//!
//! Linux is the platform this is built for; elsewhere the walk is always used.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use oxibot_proto::CallContext;
use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::Errno;

use crate::workspace;

/// Environment variable that forces a [`Resolver`]: `walk` makes a plugin resolve paths as
/// on a kernel without `openat2` (for tests of that path); anything else is ignored.
pub const RESOLVER_ENV: &str = "OXIBOT_WORKSPACE_RESOLVER";

/// Most symlinks one resolution follows, as Linux's own limit.
const MAX_LINKS: usize = 40;

/// How often an `openat2` that met a concurrent rename (`EAGAIN`) is tried again.
const EAGAIN_TRIES: usize = 3;

/// Flags for a handle that only names a directory entry (`O_PATH` where there is one).
#[cfg(any(target_os = "linux", target_os = "android"))]
const PATH_ONLY: OFlags = OFlags::PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const PATH_ONLY: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// How paths are resolved beneath the root when the workspace restriction is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, with the walk settling what it refuses.
    Openat2,
    /// The component-by-component walk alone, as on kernels without `openat2`.
    Walk,
}

/// A path resolved against a [`WorkspaceDir`], not yet opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The path as the model wrote it, for messages.
    shown: String,
    /// The absolute path, `.` and `..` removed lexically, under the root as the call named it.
    path: PathBuf,
    /// When confined: the path below the root, made of plain names (empty for the root).
    beneath: Option<PathBuf>,
}

impl Target {
    /// The path as the model wrote it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The absolute path (symlinks not resolved), for showing and for display relative to the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry `name` inside this directory.
    pub fn child(&self, name: &OsStr) -> Target {
        let path = self.path.join(name);
        Target { shown: path.display().to_string(), beneath: self.beneath.as_ref().map(|rel| rel.join(name)), path }
    }

    /// The directory holding it, or `None` for the root (or `/`).
    pub fn parent(&self) -> Option<Target> {
        self.split().map(|(parent, _)| parent)
    }

    /// Its last name, or `None` for the root (or `/`).
    pub fn name(&self) -> Option<OsString> {
        self.split().map(|(_, name)| name)
    }

    /// The parent directory and the last name, or `None` for the root (or `/`).
    fn split(&self) -> Option<(Target, OsString)> {
        let name = match &self.beneath {
            Some(rel) => rel.file_name()?,
            None => self.path.file_name()?,
        };
        let parent = Target {
            shown: self.shown.clone(),
            path: self.path.parent()?.to_path_buf(),
            beneath: self.beneath.as_ref().map(|rel| rel.parent().unwrap_or(Path::new("")).to_path_buf()),
        };
        Some((parent, name.to_os_string()))
    }
}

/// The workspace of one call, with a handle on its root when the restriction is on.
#[derive(Debug)]
pub struct WorkspaceDir {
    /// The root as the call named it; shown paths and messages use it.
    root: PathBuf,
    /// The root's canonical path: absolute symlinks under it lead inside.
    real_root: PathBuf,
    /// The handle every path is resolved beneath; `None` when the restriction is off.
    handle: Option<OwnedFd>,
    /// How paths are resolved beneath `handle`.
    resolver: Resolver,
}

impl WorkspaceDir {
    /// Opens the workspace of a call: a handle on its root when `restrict_to_workspace` is set.
    pub fn open(ctx: &CallContext) -> Result<WorkspaceDir, AccessError> {
        WorkspaceDir::open_with(ctx, configured_resolver())
    }

    /// Like [`WorkspaceDir::open`] with a chosen resolver (`Openat2` falls back to the walk
    /// when the kernel lacks it).
    pub fn open_with(ctx: &CallContext, resolver: Resolver) -> Result<WorkspaceDir, AccessError> {
        let root = workspace::root(ctx);
        if !ctx.restrict_to_workspace {
            return Ok(WorkspaceDir { real_root: root.clone(), root, handle: None, resolver });
        }
        let failed = |source: io::Error| AccessError::Workspace { root: root.clone(), source };
        let real_root = root.canonicalize().map_err(failed)?;
        let handle = rustix::fs::open(&real_root, PATH_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| failed(e.into()))?;
        let resolver = if openat2_works(&handle) { resolver } else { Resolver::Walk };
        Ok(WorkspaceDir { root, real_root, handle: Some(handle), resolver })
    }

    /// The root as the call named it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether paths are confined to the workspace.
    pub fn is_confined(&self) -> bool {
        self.handle.is_some()
    }

    /// How paths are resolved beneath the root.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// Resolves `path` as the model wrote it (`~` expanded, relative to the root), refusing
    /// at once what leads outside by its spelling (`..`, absolute paths elsewhere). Symlinks
    /// are judged when the target is opened.
    pub fn resolve(&self, path: &str) -> Result<Target, AccessError> {
        self.locate(path, workspace::absolute(&self.root, path))
    }

    /// The target for an absolute, normalised `path`.
    fn locate(&self, shown: &str, path: PathBuf) -> Result<Target, AccessError> {
        if self.handle.is_none() {
            return Ok(Target { shown: shown.to_owned(), path, beneath: None });
        }
        let rel = [&self.root, &self.real_root]
            .iter()
            .find_map(|root| path.strip_prefix(root).ok().map(Path::to_path_buf))
            // An absolute path that reaches the workspace through a symlink elsewhere.
            .or_else(|| workspace::real_path(&path).strip_prefix(&self.real_root).ok().map(Path::to_path_buf))
            .ok_or_else(|| self.outside(shown))?;
        let path = if rel.as_os_str().is_empty() { self.root.clone() } else { self.root.join(&rel) };
        Ok(Target { shown: shown.to_owned(), path, beneath: Some(rel) })
    }

    fn outside(&self, shown: &str) -> AccessError {
        AccessError::Outside { shown: shown.to_owned(), root: self.root.clone() }
    }

    /// Metadata of what `target` names, following symlinks (beneath the root).
    pub fn metadata(&self, target: &Target) -> Result<Metadata, AccessError> {
        let fd = self.open_fd(target, PATH_ONLY, Mode::empty())?;
        Ok(File::from(fd).metadata()?)
    }

    /// Metadata of `target` itself: a symlink is described, not followed.
    pub fn symlink_metadata(&self, target: &Target) -> Result<Metadata, AccessError> {
        match target.split() {
            Some((parent, name)) => self.open_dir(&parent)?.symlink_metadata(&name),
            None => self.metadata(target),
        }
    }

    /// Opens a file for reading, following symlinks beneath the root.
    ///
    /// The file is opened non-blocking, so a FIFO swapped in does not hang the call; check
    /// that it is a regular file (`File::metadata`) before reading.
    pub fn open_read(&self, target: &Target) -> Result<File, AccessError> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        Ok(File::from(self.open_fd(target, flags, Mode::empty())?))
    }

    /// Opens a file for writing, creating it (mode 0666 before the umask) or truncating it.
    pub fn open_write(&self, target: &Target) -> Result<File, AccessError> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOCTTY;
        Ok(File::from(self.open_fd(target, flags, Mode::from_raw_mode(0o666))?))
    }

    /// Opens a directory, following symlinks beneath the root.
    pub fn open_dir(&self, target: &Target) -> Result<DirHandle, AccessError> {
        let fd = self.open_fd(target, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        Ok(DirHandle { fd, at: target.clone() })
    }

    /// The entries of a directory, in no particular order.
    pub fn read_dir(&self, target: &Target) -> Result<Vec<DirEntry>, AccessError> {
        self.open_dir(target)?.entries()
    }

    /// Opens a directory, creating it and any missing parents first (mode 0777 before the
    /// umask). Each directory is made relative to its parent's handle.
    pub fn create_dir_all(&self, target: &Target) -> Result<DirHandle, AccessError> {
        match self.open_dir(target) {
            Err(e) if e.is_not_found() => {}
            opened => return opened,
        }
        let Some((parent, name)) = target.split() else { return self.open_dir(target) };
        let parent = self.create_dir_all(&parent)?;
        match rustix::fs::mkdirat(&parent.fd, &name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        self.open_dir(target)
    }

    /// Renames `from` to `to`, each name taken in its parent directory's handle.
    pub fn rename(&self, from: &Target, to: &Target) -> Result<(), AccessError> {
        let no_name = || AccessError::Io(io::Error::new(io::ErrorKind::InvalidInput, "cannot rename the workspace"));
        let (from_dir, from_name) = from.split().ok_or_else(no_name)?;
        let (to_dir, to_name) = to.split().ok_or_else(no_name)?;
        let (from_dir, to_dir) = (self.open_dir(&from_dir)?, self.open_dir(&to_dir)?);
        Ok(rustix::fs::renameat(&from_dir.fd, &from_name, &to_dir.fd, &to_name)?)
    }

    /// Where a new version of `target` goes when it is replaced (temp file, then rename in
    /// the returned directory): its parent directory, created if missing, and its name.
    ///
    /// When `target` is a symlink to an existing file beneath the root, the file it leads to
    /// is replaced and the link kept; a dangling link is itself replaced. A link leading
    /// outside a restricted workspace is refused.
    pub fn replace_slot(&self, target: &Target) -> Result<(DirHandle, OsString), AccessError> {
        let (parent, name) = target.split().ok_or_else(|| AccessError::Io(io::ErrorKind::IsADirectory.into()))?;
        let dir = self.create_dir_all(&parent)?;
        match rustix::fs::readlinkat(&dir.fd, &name, Vec::new()) {
            Ok(_) => {}
            Err(Errno::INVAL | Errno::NOENT) => return Ok((dir, name)),
            Err(e) => return Err(e.into()),
        }
        let linked = match self.open_fd(target, PATH_ONLY, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e.is_not_found() => return Ok((dir, name)),
            Err(e) => return Err(e),
        };
        let real = self.real_path_of(&linked, target).ok_or_else(|| self.outside(&target.shown))?;
        let (real_parent, real_name) = self
            .locate(&target.shown, real)?
            .split()
            .ok_or_else(|| AccessError::Io(io::ErrorKind::IsADirectory.into()))?;
        Ok((self.open_dir(&real_parent)?, real_name))
    }

    /// The real absolute path of what `fd` (opened through `target`) is.
    fn real_path_of(&self, fd: &OwnedFd, target: &Target) -> Option<PathBuf> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use std::os::fd::AsRawFd;
            let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
            if let Some(path) = path.filter(|p| p.is_absolute()) {
                return Some(path);
            }
        }
        let _ = fd;
        target.path.canonicalize().ok()
    }

    /// Opens `target` with `flags`: beneath the root when confined, as given when not.
    fn open_fd(&self, target: &Target, flags: OFlags, mode: Mode) -> Result<OwnedFd, AccessError> {
        let flags = flags | OFlags::CLOEXEC;
        let (Some(handle), Some(rel)) = (&self.handle, &target.beneath) else {
            return Ok(rustix::fs::openat(CWD, &target.path, flags, mode)?);
        };
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel.as_path() };
        if self.resolver == Resolver::Openat2 {
            for _ in 0..EAGAIN_TRIES {
                match openat2(handle, rel, flags, mode) {
                    Ok(fd) => return Ok(fd),
                    Err(Errno::AGAIN) => continue,
                    // Leaving the root, an absolute symlink (even one into the workspace), a
                    // magic link or a loop: the walk tells them apart.
                    Err(Errno::XDEV | Errno::LOOP) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Walk { dir: self, root: handle.as_fd(), shown: &target.shown }.open(rel, flags, mode)
    }
}

mod dir;
pub(crate) mod error;
mod walk;

pub use dir::{DirEntry, DirHandle, EntryKind};
pub use error::AccessError;
use walk::{Walk, configured_resolver, openat2, openat2_works};

#[cfg(test)]
mod tests;
