//! Entry point of `oxibot-tool-web`: the TLS provider, the config from the kernel, the plugin.

use std::process::ExitCode;
use std::sync::Arc;

use oxibot_plugin::warn;
use oxibot_tool_web::config::WebConfig;
use oxibot_tool_web::{Web, plugin};

fn main() -> ExitCode {
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
