//! Signing in: with the configured access token, or with the password, reusing the session of
//! an earlier login (kept in `session.json` of the media directory, like nanobot's
//! `matrix-store/session.json`) so a restart does not make a new device each time.

use std::path::{Path, PathBuf};

use oxibot_plugin::chat::write_atomically;
use oxibot_plugin::{info, warn};
use serde_json::{Value, json};

use oxibot_plugin::chat::http::Refusal;

use crate::api::{ApiError, ClientApi, Login};
use crate::config::{Config, Credentials};
use crate::error::MatrixError;
use crate::sync::BACKOFF;

/// The session file's name inside the media directory.
pub const SESSION_FILE: &str = "session.json";

/// A client signed in as `config.user_id`, once the homeserver confirmed who the token is.
pub async fn sign_in(anonymous: &ClientApi, config: &Config) -> Result<ClientApi, MatrixError> {
    let password = match &config.credentials {
        Credentials::Token(token) => {
            let api = anonymous.with_token(token).map_err(MatrixError::Setup)?;
            identify(&api, &config.user_id).await?;
            return Ok(api);
        }
        Credentials::Password(password) => password,
    };
    let sessions = SessionFile::new(&config.media_dir, &config.user_id);
    let saved = sessions.load();
    if let Some(saved) = &saved {
        let api = anonymous.with_token(&saved.access_token).map_err(MatrixError::Setup)?;
        match identify(&api, &config.user_id).await {
            Ok(()) => return Ok(api),
            Err(MatrixError::Token(error)) => warn!("the saved session was refused ({error}); logging in again"),
            Err(other) => return Err(other),
        }
    }
    let device = saved.as_ref().map(|saved| saved.device_id.as_str()).or(Some(config.device_id.as_str()));
    let login = login(anonymous, &config.user_id, password, device).await?;
    info!("logged in with the password as device {}", login.device_id);
    if let Err(error) = sessions.save(&login) {
        warn!("cannot keep the session in {}: {error}; the next start logs in again", sessions.path.display());
    }
    let api = anonymous.with_token(&login.access_token).map_err(MatrixError::Setup)?;
    identify(&api, &config.user_id).await?;
    Ok(api)
}

/// `whoami` until it answers; a refused token, or one of another account, is an error.
async fn identify(api: &ClientApi, user_id: &str) -> Result<(), MatrixError> {
    let mut backoff = BACKOFF;
    loop {
        match api.whoami().await {
            Ok(actual) if actual == user_id => return Ok(()),
            Ok(actual) => return Err(MatrixError::WrongUser { configured: user_id.to_owned(), actual }),
            Err(error) if error.is_token_problem() => return Err(MatrixError::Token(error)),
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("{error}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// `login` until it answers; a refused password ends the channel.
async fn login(api: &ClientApi, user_id: &str, password: &str, device: Option<&str>) -> Result<Login, MatrixError> {
    let mut backoff = BACKOFF;
    loop {
        match api.login(user_id, password, device).await {
            Ok(login) => return Ok(login),
            Err(error @ ApiError::Refused(Refusal { status: 400..=499, .. })) => {
                return Err(MatrixError::Password(error));
            }
            Err(error) => {
                let wait = backoff.next_wait();
                warn!("{error}; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The session of a password login, kept for the next start.
struct SessionFile {
    path: PathBuf,
    user_id: String,
}

impl SessionFile {
    fn new(dir: &Path, user_id: &str) -> SessionFile {
        SessionFile { path: dir.join(SESSION_FILE), user_id: user_id.to_owned() }
    }

    /// The saved session of this account, if any.
    fn load(&self) -> Option<Login> {
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&self.path).ok()?).ok()?;
        if saved["user_id"] != self.user_id.as_str() {
            return None;
        }
        let field = |key: &str| saved[key].as_str().filter(|value| !value.is_empty()).map(str::to_owned);
        Some(Login { access_token: field("access_token")?, device_id: field("device_id").unwrap_or_default() })
    }

    /// Keeps `login` (readable by the owner only: it is a credential).
    fn save(&self, login: &Login) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let text = json!({"user_id": self.user_id, "access_token": login.access_token, "device_id": login.device_id});
        write_atomically(&self.path, text.to_string().as_bytes())?;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_session_is_read_back_for_its_account_only() {
        let dir = std::env::temp_dir().join(format!("oxibot-matrix-session-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = SessionFile::new(&dir, "@bot:h");
        assert_eq!(file.load(), None);
        let login = Login { access_token: "syt_1".into(), device_id: "DEV".into() };
        file.save(&login).unwrap();
        assert_eq!(SessionFile::new(&dir, "@bot:h").load(), Some(login));
        assert_eq!(SessionFile::new(&dir, "@other:h").load(), None);
        let mode = std::fs::metadata(dir.join(SESSION_FILE)).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
