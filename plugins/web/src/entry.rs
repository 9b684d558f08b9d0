//! Entry point of the web plugin (`oxibot __plugin web`): the TLS provider, the config from
//! the kernel, the plugin.

use std::process::ExitCode;
use std::sync::Arc;

use crate::config::WebConfig;
use crate::{Web, plugin};
use oxibot_plugin::warn;

/// Serves `web_fetch` and `web_search` to the kernel that started this process; the entry
/// `oxibot __plugin web` runs.
pub fn run() -> ExitCode {
    // reqwest is built without a default TLS provider; ring must be installed before any client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = WebConfig::from_env().unwrap_or_else(|error| {
        // The safe default: no search key, no whitelisted internal addresses.
        warn!("oxibot-tool-web: {error}; using the defaults");
        WebConfig::default()
    });
    let web = match Web::new(&config) {
        Ok(web) => web,
        Err(error) => {
            warn!("oxibot-tool-web: {error}");
            return ExitCode::from(2);
        }
    };
    plugin(Arc::new(web)).run()
}
