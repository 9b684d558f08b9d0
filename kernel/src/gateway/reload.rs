//! Config hot reload: the gateway watches its config file and applies what a running gateway
//! can — channels enabled or disabled (their plugins start or stop), a channel's settings
//! (its plugin restarts with the new section), each channel's `allowFrom` (the next message),
//! and the model settings (`agents.defaults` and `providers`: model, provider, keys, limits),
//! which the next turn uses. Each edit that loads becomes the services' new [`Settings`], so
//! the session actors and the Consolidator budget with the new context window too. An edit
//! that does not load is reported with the file and the key, and the settings in force stay;
//! changes that need a restart are named. In cluster mode a channel run on one kernel at a
//! time is not started by an edit (and restarted only where it runs): the cluster's claims
//! decide where it runs.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::local_secrets::{self, LocalSecrets};
use super::router::Router;
use super::settings::{ChannelChanges, ChannelSettings, GatewaySettings};
use crate::bundled::channel_spec;
use crate::config::Config;
use crate::plugin::PluginHost;
use crate::provider::Provider;
use crate::services::{Services, run_spec};
use crate::settings::Settings;
use crate::watch::DirWatch;

/// Makes the LLM client for an edited config (the CLI's choice of retry delays included).
pub type ProviderFactory = Box<dyn Fn(&Config) -> Result<Provider, String>>;

/// What the gateway reloads: its config file, and how to build a provider from it.
pub struct ConfigReload {
    /// The config file.
    pub path: PathBuf,
    /// Builds the LLM client for an edited config.
    pub provider: ProviderFactory,
    /// The kernel's own executable, which runs the bundled channels.
    pub kernel: PathBuf,
    /// The local surfaces' secrets, given to edited settings as to the first ones.
    pub secrets: LocalSecrets,
}

/// Editors write a file in steps (truncate, write, rename): wait this long after a change.
const SETTLE: Duration = Duration::from_millis(100);

/// Watches the config file until the gateway stops, applying each edit.
pub async fn watch_config(reload: ConfigReload, router: Rc<Router>, services: Arc<Services>) {
    let path = &reload.path;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let watch = match DirWatch::new(dir, name) {
        Ok(watch) => watch,
        Err(error) => {
            return tracing::warn!(file = %path.display(), %error, "cannot watch the config file; edits apply after a restart");
        }
    };
    let mut model = model_section(path);
    loop {
        match watch.changed().await {
            Ok(true) => {}
            Ok(false) => {
                return tracing::warn!(file = %path.display(), "the config directory went away; edits apply after a restart");
            }
            Err(error) => return tracing::warn!(file = %path.display(), %error, "watching the config file failed"),
        }
        tokio::time::sleep(SETTLE).await;
        let Some(config) = load(path) else { continue };
        apply_gateway_settings(&reload, &config, &router, services.host()).await;
        let edited = model_section(path);
        let settings = Settings::new(config);
        if edited == model {
            services.replace_settings(settings);
        } else if apply_model(&reload, settings, &services) {
            model = edited;
        }
    }
}

/// The edited config, or `None` (logged) when it does not load.
fn load(path: &Path) -> Option<Config> {
    match Config::load(path) {
        Ok(config) => {
            for unknown in &config.unknown_keys {
                tracing::warn!(file = %path.display(), "{unknown}");
            }
            Some(config)
        }
        Err(error) => {
            tracing::error!(%error, "the edited config does not load; the running settings stay");
            None
        }
    }
}

/// Applies the gateway and channel settings of the edited config.
async fn apply_gateway_settings(reload: &ConfigReload, config: &Config, router: &Router, host: &PluginHost) {
    let path = &reload.path;
    let mut settings = match GatewaySettings::from_config(config) {
        Ok(settings) => settings,
        Err(error) => {
            return tracing::error!(file = %path.display(), %error, "the edited config is invalid; the running settings stay");
        }
    };
    match local_secrets::fill(&mut settings, &reload.secrets) {
        Ok(filled) if filled.new_api_key.is_some() => {
            tracing::info!(file = %reload.secrets.path().display(), "the api channel's new key is in this file");
        }
        Ok(_) => {}
        Err(error) => {
            return tracing::error!(%error, "the edited config's secrets cannot be set up; the running settings stay");
        }
    }
    let (mut channels, mut pending) = router.apply_settings(settings);
    pending.extend(leave_to_the_cluster(config, &mut channels, host));
    apply_channel_changes(&reload.kernel, channels, router, host).await;
    if pending.is_empty() {
        tracing::info!(file = %path.display(), "config reloaded");
    } else {
        tracing::warn!(file = %path.display(), changes = ?pending, "config reloaded; these changes apply after a restart");
    }
}

/// In cluster mode, a channel run on one kernel at a time is started only where the cluster's
/// claims say (`gateway::cluster::serve_channel`): an edit does not start it here, and restarts
/// it only on the kernel running it. Returns what waits for a restart of the gateways.
fn leave_to_the_cluster(config: &Config, changes: &mut ChannelChanges, host: &PluginHost) -> Vec<String> {
    let Some(cluster) = &config.cluster else { return Vec::new() };
    let claimed = |channel: &ChannelSettings| !cluster.local_channels.contains(&channel.name);
    let runs_here = |channel: &ChannelSettings| host.statuses().iter().any(|status| status.name == channel.name);
    let mut pending = Vec::new();
    for channel in changes.started.iter().filter(|channel| claimed(channel)) {
        pending.push(format!("channels.{} (in a cluster it starts with the gateways)", channel.name));
    }
    changes.started.retain(|channel| !claimed(channel));
    for channel in changes.restarted.iter().filter(|channel| claimed(channel) && !runs_here(channel)) {
        pending.push(format!("channels.{} (another kernel of the cluster runs it)", channel.name));
    }
    changes.restarted.retain(|channel| !claimed(channel) || runs_here(channel));
    pending
}

/// Stops the plugins of disabled channels, restarts those whose section changed, and starts
/// newly enabled ones. A channel that cannot start is reported and left off.
async fn apply_channel_changes(kernel: &Path, changes: ChannelChanges, router: &Router, host: &PluginHost) {
    for name in &changes.stopped {
        host.remove(name).await;
        tracing::info!(channel = %name, "channel disabled; its plugin stopped");
    }
    for channel in &changes.restarted {
        host.remove(&channel.name).await;
        start_channel(kernel, channel, router, host, "channel settings changed; its plugin restarted");
    }
    for channel in &changes.started {
        start_channel(kernel, channel, router, host, "channel enabled; its plugin started");
    }
}

/// Starts one channel's plugin with its section, or forgets the channel (logged) when it cannot.
fn start_channel(kernel: &Path, channel: &ChannelSettings, router: &Router, host: &PluginHost, done: &str) {
    let started = channel_spec(kernel, &channel.name, &channel.raw)
        .map_err(|error| error.to_string())
        .and_then(|spec| host.add(spec).map_err(|error| error.to_string()));
    match started {
        Ok(()) => tracing::info!(channel = %channel.name, "{done}"),
        Err(error) => {
            tracing::error!(channel = %channel.name, %error, "cannot start the channel; it stays off");
            router.forget_channel(&channel.name);
        }
    }
}

/// A new LLM client and turn settings from the edited config, with the settings they come
/// from; turns under way keep theirs. Model settings that cannot be used leave the settings
/// in force as they are, so the turn settings and the budgets stay one set. Returns whether
/// they were applied.
fn apply_model(reload: &ConfigReload, settings: Settings, services: &Services) -> bool {
    match (reload.provider)(&settings.config) {
        Ok(provider) => {
            let spec = run_spec(&settings.config, services.spec().stream);
            let model = spec.model.clone();
            services.replace_settings(settings);
            services.engine().replace_model(provider, spec);
            tracing::info!(%model, "model settings applied; the next turn uses them");
            true
        }
        Err(error) => {
            tracing::error!(file = %reload.path.display(), %error, "the edited model settings cannot be used; the running ones stay");
            false
        }
    }
}

/// The parts of the file that decide the model: `agents.defaults` and `providers`, as written.
fn model_section(path: &Path) -> Value {
    let raw: Value =
        std::fs::read_to_string(path).ok().and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default();
    json!({"defaults": raw["agents"]["defaults"], "providers": raw["providers"]})
}
