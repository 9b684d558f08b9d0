//! One-time login codes for the web UI, the way Jupyter hands out its link: `oxibot gateway`
//! and `oxibot ui` each mint a code and print `http://…/?code=<code>`; the first visit with
//! it trades the code for the UI's cookie, and the code is gone. A code never used expires
//! after [`CODE_LIFETIME`].
//!
//! Codes live in `<data dir>/ui-login/` (mode 0700) as empty files named by the code's
//! SHA-256, so a process that mints one (the CLI) and the gateway that redeems it need no
//! other channel, and removing the file is the one step that spends it: of two visits with
//! the same code, only one removes the file.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::gateway::local_secrets::{SecretsError, random_hex};

/// How long an unused code stays good.
pub const CODE_LIFETIME: Duration = Duration::from_secs(60 * 60);
/// The directory name inside the data dir.
const DIR_NAME: &str = "ui-login";

/// The login codes of one data dir.
#[derive(Debug, Clone)]
pub struct LoginCodes {
    dir: PathBuf,
}

impl LoginCodes {
    /// The codes kept in `data_dir`.
    pub fn new(data_dir: &Path) -> LoginCodes {
        LoginCodes { dir: data_dir.join(DIR_NAME) }
    }

    /// A new code, saved so the gateway can redeem it once; expired codes are swept away.
    pub fn mint(&self) -> Result<String, SecretsError> {
        let io = |source| SecretsError::Io { path: self.dir.display().to_string(), source };
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(io)?;
        self.sweep();
        let code = random_hex(16)?;
        std::fs::File::create(self.file_of(&code)).map_err(io)?;
        Ok(code)
    }

    /// Whether `code` was minted, has not expired, and was not used before; it is spent now.
    pub fn redeem(&self, code: &str) -> bool {
        if code.is_empty() || code.len() > 64 || !code.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
        let file = self.file_of(code);
        let fresh = std::fs::metadata(&file).and_then(|m| m.modified()).is_ok_and(|made| !expired(made));
        // Removing is the spending: a second visit with the same code finds no file.
        std::fs::remove_file(&file).is_ok() && fresh
    }

    /// Removes codes past their lifetime.
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(expired);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    fn file_of(&self, code: &str) -> PathBuf {
        let digest = ring::digest::digest(&ring::digest::SHA256, code.to_ascii_lowercase().as_bytes());
        self.dir.join(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

fn expired(made: SystemTime) -> bool {
    made.elapsed().is_ok_and(|age| age > CODE_LIFETIME)
}

/// The login URL for a gateway's page at `page_url` (`http://host:port/`).
pub fn login_url(page_url: &str, code: &str) -> String {
    format!("{page_url}?code={code}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_code_is_good_once_and_only_the_minted_one_is() {
        let dir = std::env::temp_dir().join(format!("oxibot-login-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let codes = LoginCodes::new(&dir);
        let code = codes.mint().unwrap();
        assert_eq!(code.len(), 32);
        assert!(!codes.redeem("00112233445566778899aabbccddeeff"));
        assert!(!codes.redeem("../local-secrets.json"));
        assert!(codes.redeem(&code));
        assert!(!codes.redeem(&code), "a code is spent by its first use");
        let mode = std::fs::metadata(dir.join(DIR_NAME)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
