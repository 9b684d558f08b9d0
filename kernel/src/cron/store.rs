//! `<workspace>/cron/jobs.json` on disk, the one [`JobStorage`] today: a write (by the
//! scheduler, the CLI, the `cron` tool of another process) happens under an advisory lock on
//! `cron/jobs.json.lock` and only if the file is still the version the writer read (its
//! identity and times), so no edit is lost, not even one an editor made without the lock;
//! writes replace the file atomically, so no reader sees half of one; a file that does not
//! parse is moved aside and never written over.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use super::job::JobsFile;
pub use super::storage::StoreError;
use super::storage::{JobStorage, Lease, Version};
use crate::fsutil::{self, CorruptFile, write_atomic};

/// The file's name in the `cron/` directory.
pub const FILE_NAME: &str = "jobs.json";
/// The lock file's name in the `cron/` directory.
pub const LOCK_NAME: &str = "jobs.json.lock";
/// The lock file the workspace's one running scheduler holds.
pub const SCHEDULER_LOCK_NAME: &str = "scheduler.lock";
/// How a copy moved aside is named: `jobs.json.corrupt-<unix seconds>` (see
/// [`fsutil::parse_state`]).
pub const CORRUPT_PREFIX: &str = "jobs.json.corrupt-";

/// Identifies one version of the file (inode, size, times): a write by anyone changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }
}

/// The jobs file of one workspace.
#[derive(Debug, Clone)]
pub struct JobStore {
    /// `<workspace>/cron`.
    dir: PathBuf,
    /// `<workspace>/cron/jobs.json`.
    path: PathBuf,
}

/// The held lock; released when dropped.
#[derive(Debug)]
struct StoreLock {
    /// The locked lock file (closing it releases the lock).
    _file: File,
}

impl JobStore {
    /// The store of `workspace` (`<workspace>/cron/jobs.json`).
    pub fn new(workspace: &Path) -> JobStore {
        let dir = workspace.join("cron");
        JobStore { path: dir.join(FILE_NAME), dir }
    }

    /// The jobs file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `cron/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
        let path = path.to_path_buf();
        move |source| StoreError::Io { action, path, source }
    }

    /// Takes the lock every writer holds while it reads, edits and writes (blocking until
    /// the holder, perhaps another process, lets go).
    fn lock(&self) -> Result<StoreLock, StoreError> {
        let (file, path) = self.lock_file(LOCK_NAME)?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| self.io("lock", &path)(io::Error::from(e)))?;
        Ok(StoreLock { _file: file })
    }

    /// The lock only the workspace's one scheduler holds, for as long as it runs; `None`
    /// when another process (a gateway, an interactive agent) holds it already.
    fn try_scheduler_lock(&self) -> Result<Option<StoreLock>, StoreError> {
        let (file, path) = self.lock_file(SCHEDULER_LOCK_NAME)?;
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(StoreLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(error) => Err(self.io("lock", &path)(io::Error::from(error))),
        }
    }

    /// Opens (creating it and `cron/` when missing) the lock file `name`.
    fn lock_file(&self, name: &str) -> Result<(File, PathBuf), StoreError> {
        std::fs::create_dir_all(&self.dir).map_err(self.io("create", &self.dir))?;
        let path = self.dir.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(self.io("open the lock file", &path))?;
        Ok((file, path))
    }

    /// Whether a scheduler runs for this workspace (in this or another process).
    fn scheduler_lock_held(&self) -> bool {
        let path = self.dir.join(SCHEDULER_LOCK_NAME);
        let Ok(file) = OpenOptions::new().write(true).open(&path) else { return false };
        // A shared lock is refused only while the scheduler holds its exclusive one.
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => false,
            Err(error) => error == rustix::io::Errno::WOULDBLOCK,
        }
    }

    /// The current version's stamp; `None` when there is no file.
    fn stamp(&self) -> Option<FileStamp> {
        std::fs::metadata(&self.path).ok().map(|meta| FileStamp::of(&meta))
    }

    /// Reads the file (`None` when there is none). A file that does not parse is moved to
    /// `jobs.json.corrupt-<unix seconds>` (never over an existing file) and reported.
    fn read_locked(&self, _lock: &StoreLock) -> Result<Option<(JobsFile, FileStamp)>, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io("open", &self.path)(e)),
        };
        let stamp = FileStamp::of(&file.metadata().map_err(self.io("inspect", &self.path))?);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(self.io("read", &self.path))?;
        let jobs = fsutil::parse_state::<JobsFile>(&self.path, &bytes).map_err(|corrupt| match corrupt {
            CorruptFile::MovedAside { path, backup, reason } => StoreError::Corrupt { path, backup, reason },
            CorruptFile::LeftInPlace { path, reason, source } => StoreError::CorruptInPlace { path, reason, source },
        })?;
        Ok(Some((jobs, stamp)))
    }

    /// Replaces the file with `jobs` (atomically: readers see the old or the new file).
    fn write_locked(&self, _lock: &StoreLock, jobs: &JobsFile) -> Result<FileStamp, StoreError> {
        let bytes = serde_json::to_vec_pretty(jobs)
            .map_err(|e| self.io("encode", &self.path)(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        write_atomic(&self.path, &bytes).map_err(self.io("write", &self.path))?;
        self.stamp().ok_or_else(|| self.io("inspect", &self.path)(io::ErrorKind::NotFound.into()))
    }

    /// Copies of unreadable files moved aside, oldest first.
    pub fn corrupt_copies(&self) -> Vec<PathBuf> {
        fsutil::corrupt_copies(&self.path)
    }
}

impl FileStamp {
    fn version(&self) -> Version {
        let FileStamp { device, inode, size, modified_ns, changed_ns } = self;
        Version::new(format!("{device}:{inode}:{size}:{modified_ns}:{changed_ns}"))
    }
}

impl JobStorage for JobStore {
    fn read(&self) -> Result<Option<(JobsFile, Version)>, StoreError> {
        let lock = self.lock()?;
        Ok(self.read_locked(&lock)?.map(|(jobs, stamp)| (jobs, stamp.version())))
    }

    fn version(&self) -> Option<Version> {
        self.stamp().map(|stamp| stamp.version())
    }

    fn replace(&self, expected: Option<&Version>, jobs: &JobsFile) -> Result<Version, StoreError> {
        let lock = self.lock()?;
        if self.version().as_ref() != expected {
            return Err(StoreError::Conflict);
        }
        Ok(self.write_locked(&lock, jobs)?.version())
    }

    fn try_scheduler_lease(&self) -> Result<Option<Lease>, StoreError> {
        Ok(self.try_scheduler_lock()?.map(|lock| Lease::new(Box::new(lock))))
    }

    fn scheduler_running(&self) -> bool {
        self.scheduler_lock_held()
    }

    fn watched_file(&self) -> Option<(PathBuf, &'static str)> {
        Some((self.dir.clone(), FILE_NAME))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::cron::change::{Applied, Change};
    use crate::cron::storage::bucket::job;
    use crate::testing::TempDir;

    #[test]
    fn a_missing_file_is_an_empty_list_and_the_first_write_creates_it() {
        let dir = TempDir::new("cron-store");
        let store = JobStore::new(dir.path());
        assert!(store.load().unwrap().jobs.is_empty());
        assert!(!store.path().exists(), "reading creates no file");
        store.apply(&Change::Add(Box::new(job("a"))), chrono_tz::UTC).unwrap();
        let text = dir.read("cron/jobs.json");
        assert!(text.contains("\"everyMs\": 60000") && text.contains("\"version\": 1"), "{text}");
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_reported_and_never_written_over() {
        let dir = TempDir::new("cron-store");
        let garbage = "{\"version\": 1, \"jobs\": [ {\"id\": ";
        dir.write("cron/jobs.json", garbage);
        let store = JobStore::new(dir.path());
        let error = store.load().unwrap_err();
        let StoreError::Corrupt { backup, .. } = &error else { panic!("{error}") };
        assert!(error.to_string().contains("moved to"), "{error}");
        assert_eq!(std::fs::read_to_string(backup).unwrap(), garbage);
        assert!(!store.path().exists());
        store.apply(&Change::Add(Box::new(job("a"))), chrono_tz::UTC).unwrap();
        assert_eq!(std::fs::read_to_string(backup).unwrap(), garbage, "the copy is kept as it was");
        assert_eq!(store.corrupt_copies(), vec![backup.clone()]);
        dir.write("cron/jobs.json", "[]");
        let second = store.load().unwrap_err();
        let StoreError::Corrupt { backup: second_backup, .. } = &second else { panic!("{second}") };
        assert_ne!(second_backup, backup, "a second bad file gets its own name");
        assert_eq!(std::fs::read_to_string(backup).unwrap(), garbage);
    }

    #[test]
    fn only_one_scheduler_holds_a_workspace_and_others_can_see_it_runs() {
        let dir = TempDir::new("cron-scheduler-lock");
        let store = JobStore::new(dir.path());
        assert!(!store.scheduler_running());
        let held = store.try_scheduler_lease().unwrap().expect("the first scheduler gets the lease");
        assert!(store.try_scheduler_lease().unwrap().is_none(), "a second scheduler does not start");
        assert!(store.scheduler_running());
        drop(held);
        assert!(!store.scheduler_running(), "the lease goes with its holder");
        assert!(store.try_scheduler_lease().unwrap().is_some());
    }

    #[test]
    fn a_failed_edit_changes_nothing() {
        let dir = TempDir::new("cron-store");
        let store = JobStore::new(dir.path());
        store.apply(&Change::Add(Box::new(job("a"))), chrono_tz::UTC).unwrap();
        let before = store.stamp();
        assert_eq!(store.apply(&Change::Remove { id: "b".into() }, chrono_tz::UTC).unwrap(), Applied::NotFound);
        assert_eq!(store.stamp(), before, "nothing was written");
    }

    #[test]
    fn concurrent_writers_under_the_lock_lose_no_edit() {
        let dir = TempDir::new("cron-store");
        let workspace = Arc::new(dir.path().to_path_buf());
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let workspace = workspace.clone();
                std::thread::spawn(move || {
                    // A store per thread: separate lock-file descriptors, as separate processes have.
                    let store = JobStore::new(&workspace);
                    for i in 0..25 {
                        store.apply(&Change::Add(Box::new(job(&format!("w{w}-{i}")))), chrono_tz::UTC).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let jobs = JobStore::new(&workspace).load().unwrap().jobs;
        assert_eq!(jobs.len(), 100);
        let leftovers: Vec<_> = std::fs::read_dir(workspace.join("cron"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name != FILE_NAME && name != LOCK_NAME && name != SCHEDULER_LOCK_NAME)
            .collect();
        assert!(leftovers.is_empty(), "no temporary files left: {leftovers:?}");
    }

    #[test]
    fn a_write_from_a_stale_read_is_refused_when_an_editor_changed_the_file_meanwhile() {
        let dir = TempDir::new("cron-store");
        let store = JobStore::new(dir.path());
        store.apply(&Change::Add(Box::new(job("a"))), chrono_tz::UTC).unwrap();
        let (mut jobs, version) = store.read().unwrap().unwrap();
        // An editor saves the file without taking the lock.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let edited = dir.read("cron/jobs.json").replace("\"name\": \"a\"", "\"name\": \"renamed\"");
        dir.write("cron/jobs.json", &edited);
        jobs.jobs.push(job("b"));
        assert!(matches!(store.replace(Some(&version), &jobs), Err(StoreError::Conflict)));
        assert!(dir.read("cron/jobs.json").contains("renamed"), "the editor's change is kept");
        store.apply(&Change::Add(Box::new(job("b"))), chrono_tz::UTC).unwrap();
        let names: Vec<String> = store.load().unwrap().jobs.into_iter().map(|job| job.name).collect();
        assert_eq!(names, ["renamed", "b"], "an edit through the store reads again and keeps both");
    }

    #[test]
    fn a_file_with_unknown_keys_keeps_them_through_an_edit() {
        let dir = TempDir::new("cron-store");
        let original = json!({"version": 1, "jobs": [{"id": "a", "name": "a", "schedule": {"kind": "every", "everyMs": 1000}, "owner": "bob"}], "note": "hi"});
        dir.write("cron/jobs.json", &original.to_string());
        let store = JobStore::new(dir.path());
        store.apply(&Change::SetEnabled { id: "a".into(), enabled: false, now_ms: 5 }, chrono_tz::UTC).unwrap();
        let saved: serde_json::Value = serde_json::from_str(&dir.read("cron/jobs.json")).unwrap();
        assert_eq!((saved["note"].clone(), saved["jobs"][0]["owner"].clone()), (json!("hi"), json!("bob")));
        assert_eq!(saved["jobs"][0]["enabled"], json!(false));
    }
}
