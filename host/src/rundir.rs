//! The kernel's private run directory (mode 0700) holding one-shot plugin sockets.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

const PREFIX: &str = "oxibot-run-";

/// A private directory for this kernel's sockets, made when the first plugin starts (a run
/// that starts none, such as a one-shot whose plugins' manifests are remembered, touches
/// nothing) and removed when dropped.
///
/// Only the kernel's user can enter it, so only processes of that user can connect to a
/// socket before the plugin does; the one-time token covers the rest.
#[derive(Debug, Default)]
pub struct RunDir {
    /// The directory, once made.
    path: Mutex<Option<PathBuf>>,
    /// Counter that makes every socket name unique within this run.
    next_socket: AtomicU64,
}

impl RunDir {
    /// A run directory not made yet.
    pub fn new() -> RunDir {
        RunDir::default()
    }

    /// The directory, made under the system temp dir on first use, after removing directories
    /// left behind by kernels that are no longer running.
    pub fn path(&self) -> io::Result<PathBuf> {
        let mut path = self.path.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(path) = path.as_ref() {
            return Ok(path.clone());
        }
        let base = std::env::temp_dir();
        sweep_stale(&base);
        let made = base.join(format!("{PREFIX}{}-{}", std::process::id(), random_hex(4)?));
        DirBuilder::new().mode(0o700).create(&made)?;
        Ok(path.insert(made).clone())
    }

    /// A socket path not used before in this run.
    pub fn socket_path(&self, plugin: &str) -> io::Result<PathBuf> {
        let n = self.next_socket.fetch_add(1, Ordering::Relaxed);
        let safe: String = plugin.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(24).collect();
        Ok(self.path()?.join(format!("{safe}-{n}.sock")))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Some(path) = self.path.get_mut().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Removes `oxibot-run-<pid>-*` directories whose kernel process is gone (e.g. killed by
/// SIGKILL, which runs no destructor).
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else { continue };
        if !process_alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn owner_pid(name: &str) -> Option<i32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

fn process_alive(pid: i32) -> bool {
    match rustix::process::Pid::from_raw(pid) {
        // EPERM means it exists but belongs to someone else; only ESRCH means gone.
        Some(pid) => !matches!(rustix::process::test_kill_process(pid), Err(e) if e == rustix::io::Errno::SRCH),
        None => false,
    }
}

/// `bytes` random bytes from the OS, as lowercase hex.
pub fn random_hex(bytes: usize) -> io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn run_dir_is_private_and_removed_on_drop() {
        let dir = RunDir::new();
        let path = dir.path().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn socket_paths_are_unique_and_short() {
        let dir = RunDir::new();
        let a = dir.socket_path("a very long plugin name with spaces and ünïcode").unwrap();
        let b = dir.socket_path("a very long plugin name with spaces and ünïcode").unwrap();
        assert_ne!(a, b);
        assert!(a.as_os_str().len() < 100, "unix socket paths must stay under 108 bytes");
    }

    #[test]
    fn nothing_is_made_on_disk_until_a_socket_is_asked_for() {
        let mine = |entry: &std::fs::DirEntry| {
            entry.file_name().to_str().and_then(owner_pid) == Some(std::process::id() as i32)
        };
        let count = || std::fs::read_dir(std::env::temp_dir()).unwrap().flatten().filter(mine).count();
        let before = count();
        let dir = RunDir::new();
        assert_eq!(count(), before, "a run directory was made before any plugin started");
        let socket = dir.socket_path("fs").unwrap();
        assert!(socket.parent().unwrap().is_dir());
        drop(dir);
        assert!(!socket.parent().unwrap().exists());
    }

    #[test]
    fn directories_of_dead_kernels_are_swept() {
        let base = std::env::temp_dir().join(format!("oxibot-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        // pid 0x7ffffff0 is far above pid_max, so no such process exists.
        let stale = base.join(format!("{PREFIX}{}-abcd", 0x7fff_fff0));
        let alive = base.join(format!("{PREFIX}{}-abcd", std::process::id()));
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::create_dir_all(&alive).unwrap();
        sweep_stale(&base);
        assert!(!stale.exists());
        assert!(alive.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
