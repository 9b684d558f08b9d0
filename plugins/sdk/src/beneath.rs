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

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use oxibot_proto::CallContext;
use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::{ToolError, workspace};

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

/// Why a path could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The path leads outside a restricted workspace (found before or while opening it).
    #[error(
        "path '{shown}' is outside the workspace {} and access outside it is restricted; use a path inside the workspace",
        .root.display()
    )]
    Outside {
        /// The path as the model wrote it.
        shown: String,
        /// The workspace root.
        root: PathBuf,
    },
    /// The workspace root itself cannot be opened.
    #[error("cannot open the workspace {}: {source}", .root.display())]
    Workspace {
        /// The workspace root.
        root: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Any other failure, as the system reported it.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl AccessError {
    /// The kind of a system error, `None` for the other variants.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            AccessError::Io(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// Whether this is "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        self.io_kind() == Some(io::ErrorKind::NotFound)
    }
}

impl From<Errno> for AccessError {
    fn from(errno: Errno) -> AccessError {
        AccessError::Io(errno.into())
    }
}

impl From<AccessError> for ToolError {
    fn from(error: AccessError) -> ToolError {
        ToolError::new(error.to_string())
    }
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

/// Which resolver [`RESOLVER_ENV`] asks for.
fn configured_resolver() -> Resolver {
    match std::env::var_os(RESOLVER_ENV) {
        Some(value) if value == "walk" => Resolver::Walk,
        _ => Resolver::Openat2,
    }
}

/// Whether this kernel (and any seccomp filter) lets `openat2` through; asked once.
fn openat2_works(handle: &OwnedFd) -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        !matches!(
            openat2(handle, Path::new("."), PATH_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()),
            Err(Errno::NOSYS | Errno::PERM)
        )
    })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn openat2(handle: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    rustix::fs::openat2(handle, rel, flags, mode, ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn openat2(_: &OwnedFd, _: &Path, _: OFlags, _: Mode) -> rustix::io::Result<OwnedFd> {
    Err(Errno::NOSYS)
}

/// One resolution by walking: component by component from the root handle, never letting
/// the kernel follow a symlink.
struct Walk<'a> {
    dir: &'a WorkspaceDir,
    root: BorrowedFd<'a>,
    /// The path as the model wrote it, for the refusal.
    shown: &'a str,
}

impl Walk<'_> {
    /// Opens `rel` (below the root) with `flags`, following symlinks that stay beneath the root.
    fn open(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, AccessError> {
        // Handles of the directories entered so far; the root when empty.
        let mut entered: Vec<OwnedFd> = Vec::new();
        let mut pending: VecDeque<OsString> = rel.iter().map(OsStr::to_os_string).collect();
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            if links > MAX_LINKS {
                return Err(Errno::LOOP.into());
            }
            let here = entered.last().map_or(self.root, |fd| fd.as_fd());
            match part.as_bytes() {
                b"" | b"." | b"/" => continue,
                b".." => {
                    if entered.pop().is_none() {
                        return Err(self.dir.outside(self.shown));
                    }
                    continue;
                }
                _ => {}
            }
            let last = pending.is_empty();
            match rustix::fs::readlinkat(here, part.as_os_str(), Vec::new()) {
                Ok(link) => {
                    links += 1;
                    let link = PathBuf::from(OsString::from_vec(link.into_bytes()));
                    let rest = if link.is_absolute() {
                        entered.clear();
                        self.inside_part(&link)?
                    } else {
                        link
                    };
                    for part in rest.iter().rev() {
                        pending.push_front(part.to_os_string());
                    }
                }
                Err(Errno::INVAL | Errno::NOENT) if last => {
                    match self.open_plain(here, &part, flags | OFlags::NOFOLLOW, mode)? {
                        Some(fd) => return Ok(fd),
                        // It became a symlink after it was read: read it again.
                        None => {
                            links += 1;
                            pending.push_front(part);
                        }
                    }
                }
                Err(Errno::INVAL) => {
                    let dir_flags = PATH_ONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    match self.open_plain(here, &part, dir_flags, Mode::empty())? {
                        Some(fd) => entered.push(fd),
                        None => {
                            links += 1;
                            pending.push_front(part);
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        // The path ended in `.` or `..`: open the directory reached.
        let here = entered.last().map_or(self.root, |fd| fd.as_fd());
        Ok(rustix::fs::openat(here, ".", flags, mode)?)
    }

    /// The part of an absolute symlink target below the root, or the refusal.
    fn inside_part(&self, link: &Path) -> Result<PathBuf, AccessError> {
        [&self.dir.real_root, &self.dir.root]
            .iter()
            .find_map(|root| link.strip_prefix(root).ok().map(Path::to_path_buf))
            .ok_or_else(|| self.dir.outside(self.shown))
    }

    /// Opens `name` in `here` without following a symlink; `None` when a symlink is there now.
    fn open_plain(
        &self,
        here: BorrowedFd<'_>,
        name: &OsStr,
        flags: OFlags,
        mode: Mode,
    ) -> Result<Option<OwnedFd>, AccessError> {
        match rustix::fs::openat(here, name, flags, mode) {
            // `O_PATH | O_NOFOLLOW` opens a symlink itself rather than failing.
            Ok(fd) if rustix::fs::fstat(&fd).is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink) => {
                Ok(None)
            }
            Ok(fd) => Ok(Some(fd)),
            Err(e @ (Errno::LOOP | Errno::NOTDIR | Errno::MLINK)) => {
                let now_link = rustix::fs::readlinkat(here, name, Vec::new()).is_ok();
                if now_link { Ok(None) } else { Err(e.into()) }
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// An open directory inside the workspace; names are opened and renamed relative to it.
#[derive(Debug)]
pub struct DirHandle {
    /// The directory, opened for reading.
    fd: OwnedFd,
    /// Where it was opened from.
    at: Target,
}

impl DirHandle {
    /// The path it was opened through.
    pub fn target(&self) -> &Target {
        &self.at
    }

    /// The entries, except `.` and `..`, in no particular order.
    pub fn entries(&self) -> Result<Vec<DirEntry>, AccessError> {
        let mut entries = Vec::new();
        for entry in Dir::read_from(&self.fd)? {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|s| FileType::from_raw_mode(s.st_mode))
                    .unwrap_or(FileType::Unknown),
                known => known,
            };
            entries.push(DirEntry { name: name.to_os_string(), kind: EntryKind::from(kind) });
        }
        Ok(entries)
    }

    /// Metadata of the entry `name`, a symlink described rather than followed.
    pub fn symlink_metadata(&self, name: &OsStr) -> Result<Metadata, AccessError> {
        let fd = rustix::fs::openat(&self.fd, name, PATH_ONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
        Ok(File::from(fd).metadata()?)
    }

    /// Opens the subdirectory `name`; a symlink there is refused (`ELOOP` or `ENOTDIR`).
    pub fn open_subdir(&self, name: &OsStr) -> Result<DirHandle, AccessError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        Ok(DirHandle { fd, at: self.at.child(name) })
    }

    /// Opens the file `name` for reading (non-blocking); a symlink there is refused (`ELOOP`).
    pub fn open_file(&self, name: &OsStr) -> Result<File, AccessError> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&self.fd, name, flags, Mode::empty())?))
    }

    /// Creates the file `name` for writing; fails if anything, even a symlink, is there.
    pub fn create_new(&self, name: &OsStr) -> Result<File, AccessError> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o666))?))
    }

    /// Renames `from` to `to` within this directory (atomically replacing `to`).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> Result<(), AccessError> {
        Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Removes the file (or symlink) `name`.
    pub fn remove_file(&self, name: &OsStr) -> Result<(), AccessError> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Flushes the directory's entries (a rename in it) to disk.
    pub fn sync(&self) -> Result<(), AccessError> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }
}

/// What kind of thing a directory entry is (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink.
    Symlink,
    /// A device, FIFO, socket, or something the system did not say.
    Other,
}

impl From<FileType> for EntryKind {
    fn from(kind: FileType) -> EntryKind {
        match kind {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Dir,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        }
    }
}

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name.
    pub name: OsString,
    /// What it is.
    pub kind: EntryKind,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const RESOLVERS: [Resolver; 2] = [Resolver::Openat2, Resolver::Walk];

    /// A workspace `ws/` and a sibling `out/` holding `secret.txt`, under a fresh temp dir.
    struct Scene(PathBuf);

    impl Scene {
        fn new(label: &str) -> Scene {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("oxibot-beneath-{label}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("ws/sub")).unwrap();
            std::fs::create_dir_all(dir.join("out/dir")).unwrap();
            std::fs::write(dir.join("ws/inside.txt"), "inside").unwrap();
            std::fs::write(dir.join("out/secret.txt"), "secret").unwrap();
            Scene(dir.canonicalize().unwrap())
        }

        fn ws(&self) -> PathBuf {
            self.0.join("ws")
        }

        fn out(&self) -> PathBuf {
            self.0.join("out")
        }

        fn link(&self, target: impl AsRef<Path>, name: &str) {
            symlink(target, self.ws().join(name)).unwrap();
        }

        fn dir(&self, restricted: bool, resolver: Resolver) -> WorkspaceDir {
            let ctx = CallContext {
                workspace: self.ws().display().to_string(),
                restrict_to_workspace: restricted,
                ..CallContext::default()
            };
            WorkspaceDir::open_with(&ctx, resolver).unwrap()
        }
    }

    impl Drop for Scene {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn read(dir: &WorkspaceDir, path: &str) -> Result<String, AccessError> {
        let mut text = String::new();
        dir.open_read(&dir.resolve(path)?)?.read_to_string(&mut text)?;
        Ok(text)
    }

    fn is_outside<T: std::fmt::Debug>(result: Result<T, AccessError>) -> bool {
        matches!(result, Err(AccessError::Outside { .. }))
    }

    #[test]
    fn paths_inside_open_and_links_that_stay_inside_are_followed() {
        let scene = Scene::new("inside");
        scene.link("inside.txt", "rel-link");
        scene.link(scene.ws().join("inside.txt"), "abs-link");
        scene.link("../inside.txt", "sub/up-link");
        scene.link(scene.ws().join("sub"), "abs-dir");
        for resolver in RESOLVERS {
            let dir = scene.dir(true, resolver);
            for path in ["inside.txt", "./sub/../inside.txt", "rel-link", "abs-link", "sub/up-link", "abs-dir/up-link"]
            {
                assert_eq!(read(&dir, path).unwrap(), "inside", "{path} with {resolver:?}");
            }
            let absolute = scene.ws().join("inside.txt").display().to_string();
            assert_eq!(read(&dir, &absolute).unwrap(), "inside");
            assert!(dir.metadata(&dir.resolve(".").unwrap()).unwrap().is_dir());
        }
    }

    #[test]
    fn every_escape_is_refused_as_outside_the_workspace() {
        let scene = Scene::new("escapes");
        scene.link("/etc", "etc");
        scene.link(scene.out(), "mid");
        scene.link("../out/secret.txt", "rel-out");
        scene.link("rel-out", "chain-2");
        scene.link(scene.ws().join("chain-2"), "chain-1");
        scene.link("/proc/self/root/etc/passwd", "magic");
        for resolver in RESOLVERS {
            let dir = scene.dir(true, resolver);
            for path in ["../out/secret.txt", "sub/../../out/secret.txt", "/etc/passwd"] {
                assert!(is_outside(dir.resolve(path)), "{path} with {resolver:?}");
            }
            for path in ["etc/passwd", "mid/secret.txt", "rel-out", "chain-1", "magic"] {
                let err = read(&dir, path).unwrap_err();
                assert!(matches!(err, AccessError::Outside { .. }), "{path} with {resolver:?}: {err}");
                assert!(err.to_string().starts_with(&format!("path '{path}' is outside the workspace")), "{err}");
            }
            assert!(is_outside(dir.create_dir_all(&dir.resolve("mid/new/deeper").unwrap())));
            assert!(is_outside(dir.replace_slot(&dir.resolve("rel-out").unwrap())));
            assert!(is_outside(dir.open_write(&dir.resolve("mid/new.txt").unwrap())));
        }
        assert!(!scene.out().join("new").exists() && !scene.out().join("new.txt").exists());
    }

    #[test]
    fn without_the_restriction_paths_open_anywhere() {
        let scene = Scene::new("unrestricted");
        scene.link(scene.out(), "mid");
        let dir = scene.dir(false, Resolver::Openat2);
        assert_eq!(read(&dir, "mid/secret.txt").unwrap(), "secret");
        assert_eq!(read(&dir, "../out/secret.txt").unwrap(), "secret");
        assert!(read(&dir, "/etc/passwd").unwrap().contains("root"));
    }

    #[test]
    fn a_symlink_loop_is_a_plain_error_not_an_escape() {
        let scene = Scene::new("loop");
        scene.link("loop-b", "loop-a");
        scene.link("loop-a", "loop-b");
        for resolver in RESOLVERS {
            let err = read(&scene.dir(true, resolver), "loop-a").unwrap_err();
            assert!(
                matches!(&err, AccessError::Io(e) if e.raw_os_error() == Some(Errno::LOOP.raw_os_error())),
                "{err}"
            );
        }
    }

    #[test]
    fn directories_are_created_listed_and_written_through_handles() {
        let scene = Scene::new("write");
        for resolver in RESOLVERS {
            let dir = scene.dir(true, resolver);
            let made = dir.create_dir_all(&dir.resolve(&format!("new-{resolver:?}/a/b")).unwrap()).unwrap();
            made.create_new(OsStr::new("f.tmp")).unwrap().write_all(b"x").unwrap();
            made.rename(OsStr::new("f.tmp"), OsStr::new("f")).unwrap();
            made.sync().unwrap();
            let entries = dir.read_dir(made.target()).unwrap();
            assert_eq!(entries, [DirEntry { name: "f".into(), kind: EntryKind::File }]);
            assert!(made.create_new(OsStr::new("f")).is_err(), "create_new never opens what exists");
            let mut file = dir.open_write(&dir.resolve(&format!("new-{resolver:?}/g")).unwrap()).unwrap();
            file.write_all(b"g").unwrap();
        }
        assert_eq!(std::fs::read_to_string(scene.ws().join("new-Walk/a/b/f")).unwrap(), "x");
        assert_eq!(std::fs::read_to_string(scene.ws().join("new-Openat2/g")).unwrap(), "g");
    }

    #[test]
    fn a_replace_slot_follows_a_link_inside_and_replaces_a_dangling_one() {
        let scene = Scene::new("slot");
        scene.link(scene.ws().join("sub/../inside.txt"), "alias");
        scene.link("missing.txt", "dangling");
        for resolver in RESOLVERS {
            let dir = scene.dir(true, resolver);
            let (slot, name) = dir.replace_slot(&dir.resolve("alias").unwrap()).unwrap();
            assert_eq!((slot.target().path(), name.as_os_str()), (scene.ws().as_path(), OsStr::new("inside.txt")));
            let (slot, name) = dir.replace_slot(&dir.resolve("dangling").unwrap()).unwrap();
            assert_eq!((slot.target().path(), name.as_os_str()), (scene.ws().as_path(), OsStr::new("dangling")));
            assert!(dir.symlink_metadata(&dir.resolve("dangling").unwrap()).unwrap().is_symlink());
        }
    }

    /// Swaps `ws/swapped` between an inside and an outside target until stopped; the reads
    /// in between must only ever see the inside.
    #[test]
    fn a_symlink_swapped_in_a_loop_never_leads_outside() {
        let scene = Scene::new("race");
        scene.link("inside.txt", "swapped");
        let (stop, swaps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let swapper = std::thread::spawn({
            let (stop, swaps, ws, out) = (stop.clone(), swaps.clone(), scene.ws(), scene.out());
            move || {
                let targets = [PathBuf::from("inside.txt"), out.join("secret.txt")];
                while !stop.load(Ordering::Relaxed) {
                    for target in &targets {
                        let _ = std::fs::remove_file(ws.join(".spare"));
                        symlink(target, ws.join(".spare")).unwrap();
                        std::fs::rename(ws.join(".spare"), ws.join("swapped")).unwrap();
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        // The reads are quick: let the swapping start first, or they would all see one target.
        while swaps.load(Ordering::Relaxed) < 2 {
            std::thread::yield_now();
        }
        let mut seen = Vec::new();
        for resolver in RESOLVERS {
            let dir = scene.dir(true, resolver);
            for _ in 0..500 {
                seen.push(read(&dir, "swapped").unwrap_or_else(|e| format!("refused: {e}")));
                // A read takes microseconds: without a yield, all of them can fit in one time
                // slice of this thread while the swapper waits, and see only one target.
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(!seen.iter().any(|s| s == "secret"), "the outside file was read");
        assert!(seen.iter().any(|s| s == "inside"), "the race never let the inside through");
    }
}
