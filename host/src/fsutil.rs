//! Whole-file replacement that a crash can never leave half-written: the plugin host keeps its
//! manifest cache and its list of broken plugins with it, and the kernel's stores use it too
//! (as `oxibot_kernel::fsutil::write_atomic`).

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with `bytes`: written to a hidden temporary file in the same directory,
/// flushed to disk, renamed over `path`, then the directory flushed. Readers see the old or
/// the new content, never a mix; a crash leaves at most a stray `.tmp` file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let temp = temp_path(dir, path);
    let written = write_synced(&temp, bytes).and_then(|()| fs::rename(&temp, path));
    if let Err(error) = written {
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    // The rename is durable only once the directory is; failing that is not worth an error.
    let _ = File::open(dir).and_then(|d| d.sync_all());
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create_new(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `.<name>.<pid>.<n>.tmp` next to `path`.
fn temp_path(dir: &Path, path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}
