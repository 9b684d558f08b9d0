//! Noticing edits of one file by other processes (`cron/jobs.json` changed by `oxibot cron
//! add`, `config.json` changed in an editor) without polling: inotify on the file's directory
//! (so a file replaced by a rename is still seen), read through tokio's reactor, so an idle
//! watcher sleeps in the kernel.

use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

/// An inotify watch on one file of a directory.
pub struct DirWatch {
    /// The inotify descriptor, registered with the runtime's reactor.
    fd: AsyncFd<OwnedFd>,
    /// The file whose changes count.
    name: OsString,
}

impl DirWatch {
    /// Watches `dir` for `name` written, moved in or out, or deleted. Must be called inside a
    /// tokio runtime with I/O enabled (every actix system has one).
    pub fn new(dir: &Path, name: impl Into<OsString>) -> io::Result<DirWatch> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        let flags = WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_TO
            | WatchFlags::MOVED_FROM
            | WatchFlags::DELETE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(&fd, dir, flags)?;
        // `new` is deprecated for descriptors the `AsyncFd` does not own; this one is an
        // `OwnedFd` moved in, so it stays open and the same until the `AsyncFd` drops, which is
        // what the unsafe `register` would ask us to promise (and this crate forbids `unsafe`).
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd)?;
        Ok(DirWatch { fd, name: name.into() })
    }

    /// Waits for the next batch of events that may have changed the file: `Ok(true)`
    /// when it may have, `Ok(false)` when the watch ended (the directory was removed or
    /// moved).
    pub async fn changed(&self) -> io::Result<bool> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(self.fd.get_ref(), &mut buf);
            let mut relevant = false;
            loop {
                match reader.next() {
                    Ok(event) => {
                        let flags = event.events();
                        if flags.intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                            return Ok(false);
                        }
                        let ours = event.file_name().is_some_and(|name| name.to_bytes() == self.name.as_bytes());
                        relevant |= ours || flags.contains(ReadFlags::QUEUE_OVERFLOW);
                    }
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            guard.clear_ready();
            if relevant {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::TempDir;

    #[tokio::test]
    async fn a_write_of_the_watched_file_is_noticed_and_other_files_are_not() {
        let dir = TempDir::new("watch");
        let watch = DirWatch::new(dir.path(), "jobs.json").unwrap();
        dir.write("jobs.json.lock", "");
        dir.write("notes.txt", "x");
        let quiet = tokio::time::timeout(Duration::from_millis(100), watch.changed()).await;
        assert!(quiet.is_err(), "no event for other files");
        // Written aside and renamed into place, as every writer of a watched file does.
        std::fs::write(dir.path().join("jobs.json.tmp"), b"{}").unwrap();
        std::fs::rename(dir.path().join("jobs.json.tmp"), dir.path().join("jobs.json")).unwrap();
        let noticed = tokio::time::timeout(Duration::from_secs(5), watch.changed()).await;
        assert!(matches!(noticed, Ok(Ok(true))), "{noticed:?}");
    }
}
