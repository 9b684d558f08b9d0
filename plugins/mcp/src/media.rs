//! [`MediaDir`]: where the bridge saves what a result carries that the model cannot read as
//! text (images, audio, binary resources), so the model gets a path it can hand on instead of
//! base64 it cannot see.
//!
//! The kernel passes the directory in `OXIBOT_MEDIA_DIR` (`<data dir>/media/mcp-<server>`,
//! created and, while the workspace is restricted, the one place outside the workspace the
//! bridge may write); a bridge started by hand falls back to the same place.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use oxibot_proto::ENV_MEDIA_DIR;

/// The directory saved files go to.
#[derive(Debug)]
pub struct MediaDir {
    /// The directory; created on the first save.
    dir: PathBuf,
    /// Numbers files saved in the same millisecond apart.
    counter: AtomicU32,
}

impl MediaDir {
    /// A media directory at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> MediaDir {
        MediaDir { dir: dir.into(), counter: AtomicU32::new(0) }
    }

    /// `OXIBOT_MEDIA_DIR`, else `<data dir>/media/<plugin>`.
    pub fn from_env(plugin: &str) -> MediaDir {
        match std::env::var_os(ENV_MEDIA_DIR).filter(|dir| !dir.is_empty()) {
            Some(dir) => MediaDir::new(dir),
            None => MediaDir::new(oxibot_plugin::chat::media_dir(plugin)),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Saves `bytes` as a new file `<stem>-<milliseconds>-<n>.<extension of mime>` and returns
    /// its path; an existing file is never overwritten.
    pub fn save(&self, stem: &str, mime: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let stem: String = stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
        let extension = extension(mime);
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let path = self.dir.join(format!("{stem}-{millis}-{n}.{extension}"));
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    file.write_all(bytes)?;
                    return Ok(path);
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

/// The file extension for a MIME type: the common ones by name, else a short alphanumeric
/// subtype, else `bin`.
pub fn extension(mime: &str) -> &str {
    let mime = mime.split(';').next().unwrap_or_default().trim();
    match mime {
        "image/jpeg" | "image/jpg" => "jpg",
        "image/svg+xml" => "svg",
        "audio/mpeg" => "mp3",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "text/plain" => "txt",
        "text/markdown" => "md",
        _ => {
            let subtype = mime.split_once('/').map(|(_, subtype)| subtype).unwrap_or_default();
            let short = !subtype.is_empty() && subtype.len() <= 5;
            if short && subtype.chars().all(|c| c.is_ascii_alphanumeric()) { subtype } else { "bin" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_follow_the_mime_type() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("image/jpeg"), "jpg");
        assert_eq!(extension("image/svg+xml"), "svg");
        assert_eq!(extension("audio/wav; rate=8000"), "wav");
        assert_eq!(extension("application/vnd.ms-excel"), "bin");
        assert_eq!(extension(""), "bin");
    }

    #[test]
    fn saved_files_never_overwrite_each_other() {
        let dir = std::env::temp_dir().join(format!("oxibot-mcp-media-{}", std::process::id()));
        let media = MediaDir::new(dir.join("nested"));
        let first = media.save("mcp_s/shot", "image/png", b"one").unwrap();
        let second = media.save("mcp_s/shot", "image/png", b"two").unwrap();
        assert_ne!(first, second);
        assert!(first.file_name().unwrap().to_str().unwrap().starts_with("mcp_s_shot-"), "{}", first.display());
        assert_eq!(std::fs::read(&first).unwrap(), b"one");
        assert_eq!(std::fs::read(&second).unwrap(), b"two");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
