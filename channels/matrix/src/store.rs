//! Where `/sync` goes on from: the `next_batch` token of the last batch whose messages the
//! kernel all accepted, kept in a file of the channel's media directory (the one directory a
//! confined channel may write), written through a temporary file and a rename so a crash
//! leaves the old token or the new one, never half of one.

use std::io;
use std::path::{Path, PathBuf};

use oxibot_plugin::chat::write_atomically;
use oxibot_plugin::warn;
use serde_json::{Value, json};

/// The file's name inside the media directory.
pub const FILE_NAME: &str = "sync-position.json";

/// The saved sync position of one account.
#[derive(Debug, Clone)]
pub struct SyncStore {
    /// The file.
    path: PathBuf,
    /// The account the token belongs to: a token of another account is not used.
    user_id: String,
}

/// Why the position could not be saved.
#[derive(Debug, thiserror::Error)]
#[error("cannot save the sync position in {path}: {source}")]
pub struct StoreError {
    /// The file.
    pub path: String,
    /// What failed.
    #[source]
    pub source: io::Error,
}

impl SyncStore {
    /// The position of `user_id` kept in `dir`.
    pub fn new(dir: &Path, user_id: &str) -> SyncStore {
        SyncStore { path: dir.join(FILE_NAME), user_id: user_id.to_owned() }
    }

    /// The saved token, if there is one for this account; an unreadable file counts as none
    /// (the channel then starts from now, as on its first run).
    pub fn load(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let saved: Value = match serde_json::from_str(&text) {
            Ok(saved) => saved,
            Err(error) => {
                warn!("ignoring {}: {error}", self.path.display());
                return None;
            }
        };
        if saved["userId"] != self.user_id.as_str() {
            return None;
        }
        saved["since"].as_str().filter(|since| !since.is_empty()).map(str::to_owned)
    }

    /// Saves `since` for good.
    pub fn save(&self, since: &str) -> Result<(), StoreError> {
        let text = json!({"userId": self.user_id, "since": since}).to_string();
        write_atomically(&self.path, text.as_bytes())
            .map_err(|source| StoreError { path: self.path.display().to_string(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-matrix-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_saved_token_is_loaded_again_and_replaced_by_the_next() {
        let dir = temp_dir("roundtrip");
        let store = SyncStore::new(&dir, "@bot:h");
        assert_eq!(store.load(), None);
        store.save("s1").unwrap();
        store.save("s2").unwrap();
        assert_eq!(SyncStore::new(&dir, "@bot:h").load().as_deref(), Some("s2"));
        assert!(!dir.join("sync-position.json.tmp").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_token_of_another_account_or_a_corrupt_file_is_not_used() {
        let dir = temp_dir("other");
        SyncStore::new(&dir, "@old:h").save("s9").unwrap();
        assert_eq!(SyncStore::new(&dir, "@bot:h").load(), None);
        std::fs::write(dir.join(FILE_NAME), "{not json").unwrap();
        assert_eq!(SyncStore::new(&dir, "@old:h").load(), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
