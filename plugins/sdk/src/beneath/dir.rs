//! Open directories inside the workspace and their entries.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

use super::*;

/// An open directory inside the workspace; names are opened and renamed relative to it.
#[derive(Debug)]
pub struct DirHandle {
    /// The directory, opened for reading.
    pub(super) fd: OwnedFd,
    /// Where it was opened from.
    pub(super) at: Target,
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
