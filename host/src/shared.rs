//! What the host shares with its plugin actors (`HostShared`) and how it runs plugins
//! (`HostConfig`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::broken::BrokenPlugins;
use super::claims::ReservedNames;
use super::events::EventBus;
use super::manifest_cache::ManifestCache;
use super::policy::RestartPolicy;
use super::registry::ToolRegistry;
use super::rundir::RunDir;

/// How the host runs plugins.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The `oxibot` binary used as launcher (see `launcher.rs`); `None` spawns plugins
    /// directly, without the guarantee that they die with the kernel.
    pub launcher: Option<PathBuf>,
    /// How long a plugin has to connect, say hello and send its manifest.
    pub handshake_timeout: Duration,
    /// Timeout of a call to a tool whose manifest gives none.
    pub default_call_timeout: Duration,
    /// Backoff and restart limits.
    pub restart: RestartPolicy,
    /// Where manifests of `static_manifest` plugins are remembered; with one, such a plugin
    /// starts on its first call instead of with the host. `None` starts every plugin at once.
    pub manifest_cache: Option<ManifestCache>,
    /// Tool names only the kernel or a bundled plugin (or a plugin replacing it) may offer.
    pub reserved: ReservedNames,
    /// Where plugins that failed to start are remembered; with one that skips, such a plugin
    /// is reported failed at once instead of being tried again. `None` remembers nothing.
    pub broken: Option<BrokenPlugins>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            launcher: None,
            handshake_timeout: Duration::from_secs(5),
            default_call_timeout: Duration::from_secs(120),
            restart: RestartPolicy::default(),
            manifest_cache: None,
            reserved: ReservedNames::default(),
            broken: None,
        }
    }
}

/// State shared by the host and its plugin actors.
pub struct HostShared {
    /// Private directory for the one-shot sockets.
    pub run_dir: RunDir,
    /// Timeouts and policy.
    pub config: HostConfig,
    /// Tool name → plugin.
    pub registry: ToolRegistry,
    /// Unsolicited events (channel messages, starts and deaths) for the gateway.
    pub events: Arc<EventBus>,
}
