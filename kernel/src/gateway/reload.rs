//! Config hot reload: the gateway watches its config file and applies what a running gateway
//! can (each running channel's `allowFrom`). An edit that does not load is reported with the
//! file and the key, and the settings in force stay; changes that need a restart are named.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use super::router::Router;
use super::settings::GatewaySettings;
use crate::config::Config;
use crate::watch::DirWatch;

/// Editors write a file in steps (truncate, write, rename): wait this long after a change.
const SETTLE: Duration = Duration::from_millis(100);

/// Watches `path` until the gateway stops, applying each edit through `router`.
pub async fn watch_config(path: PathBuf, router: Rc<Router>) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let watch = match DirWatch::new(dir, name) {
        Ok(watch) => watch,
        Err(error) => {
            return tracing::warn!(file = %path.display(), %error, "cannot watch the config file; edits apply after a restart");
        }
    };
    loop {
        match watch.changed().await {
            Ok(true) => {}
            Ok(false) => {
                return tracing::warn!(file = %path.display(), "the config directory went away; edits apply after a restart");
            }
            Err(error) => return tracing::warn!(file = %path.display(), %error, "watching the config file failed"),
        }
        tokio::time::sleep(SETTLE).await;
        reload(&path, &router);
    }
}

/// Loads the edited config and applies it.
fn reload(path: &Path, router: &Router) {
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(error) => return tracing::error!(%error, "the edited config does not load; the running settings stay"),
    };
    let settings = match GatewaySettings::from_config(&config) {
        Ok(settings) => settings,
        Err(error) => {
            return tracing::error!(file = %path.display(), %error, "the edited config is invalid; the running settings stay");
        }
    };
    let pending = router.apply_settings(settings);
    if pending.is_empty() {
        tracing::info!(file = %path.display(), "config reloaded");
    } else {
        tracing::warn!(file = %path.display(), changes = ?pending, "config reloaded; these changes apply after a restart");
    }
}
