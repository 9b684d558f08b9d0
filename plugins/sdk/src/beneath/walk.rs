//! Resolving a path beneath the root: `openat2` where the kernel has it, else a walk one
//! component at a time that never lets the kernel follow a symlink.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::*;

/// Which resolver [`RESOLVER_ENV`] asks for.
pub(super) fn configured_resolver() -> Resolver {
    match std::env::var_os(RESOLVER_ENV) {
        Some(value) if value == "walk" => Resolver::Walk,
        _ => Resolver::Openat2,
    }
}

/// Whether this kernel (and any seccomp filter) lets `openat2` through; asked once.
pub(super) fn openat2_works(handle: &OwnedFd) -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        !matches!(
            openat2(handle, Path::new("."), PATH_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()),
            Err(Errno::NOSYS | Errno::PERM)
        )
    })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn openat2(handle: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    rustix::fs::openat2(handle, rel, flags, mode, ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn openat2(_: &OwnedFd, _: &Path, _: OFlags, _: Mode) -> rustix::io::Result<OwnedFd> {
    Err(Errno::NOSYS)
}

/// One resolution by walking: component by component from the root handle, never letting
/// the kernel follow a symlink.
pub(super) struct Walk<'a> {
    pub(super) dir: &'a WorkspaceDir,
    pub(super) root: BorrowedFd<'a>,
    /// The path as the model wrote it, for the refusal.
    pub(super) shown: &'a str,
}

impl Walk<'_> {
    /// Opens `rel` (below the root) with `flags`, following symlinks that stay beneath the root.
    pub(super) fn open(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, AccessError> {
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
