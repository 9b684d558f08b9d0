//! Noticing edits of `cron/jobs.json` by other processes (`oxibot cron add`, a `cron` tool in
//! an `oxibot agent`, a person with an editor) without polling: inotify on the `cron/`
//! directory, read through tokio's reactor, so an idle scheduler sleeps in the kernel.

use std::io;
use std::mem::MaybeUninit;
use std::path::Path;

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

use super::store::FILE_NAME;

/// An inotify watch on one directory.
pub struct DirWatch {
    /// The inotify descriptor, registered with the runtime's reactor.
    fd: AsyncFd<OwnedFd>,
}

impl DirWatch {
    /// Watches `dir` for files written, moved in or out, or deleted. Must be called inside a
    /// tokio runtime with I/O enabled (every actix system has one).
    pub fn new(dir: &Path) -> io::Result<DirWatch> {
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
        Ok(DirWatch { fd })
    }

    /// Waits for the next batch of events that may have changed the jobs file: `Ok(true)`
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
                        let ours = event.file_name().is_some_and(|name| name.to_bytes() == FILE_NAME.as_bytes());
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
    async fn a_write_of_the_jobs_file_is_noticed_and_other_files_are_not() {
        let dir = TempDir::new("cron-watch");
        let watch = DirWatch::new(dir.path()).unwrap();
        dir.write("jobs.json.lock", "");
        dir.write("notes.txt", "x");
        let quiet = tokio::time::timeout(Duration::from_millis(100), watch.changed()).await;
        assert!(quiet.is_err(), "no event for other files");
        crate::fsutil::write_atomic(&dir.path().join(FILE_NAME), b"{}").unwrap();
        let noticed = tokio::time::timeout(Duration::from_secs(5), watch.changed()).await;
        assert!(matches!(noticed, Ok(Ok(true))), "{noticed:?}");
    }
}
