//! Small files a channel keeps between runs (a sync position, a session, a resume point),
//! replaced whole: written beside the old one, flushed to the disk, then renamed over it, so a
//! crash at any moment leaves the old content or the new one, never a mix.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Replaces the file at `path` with `bytes`, creating its directory when missing.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&temporary, path)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_nothing_is_left_beside_it() {
        let dir = std::env::temp_dir().join(format!("oxibot-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("nested/position.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.join("nested")).unwrap().count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_write_that_fails_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("oxibot-state-fail-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("taken")).unwrap();
        // A directory stands where the file should go: the rename fails.
        assert!(write_atomically(&dir.join("taken"), b"x").is_err());
        assert!(!dir.join("taken.tmp").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
