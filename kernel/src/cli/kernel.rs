//! Shared set-up for commands that need the kernel: config, workspace, plugin host.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use oxibot_kernel::config::Config;
use oxibot_kernel::memory::schedule::DreamSettings;
use oxibot_kernel::plugin::{
    BrokenPlugins, HostConfig, ManifestCache, PluginHost, PluginSources, PluginSpec, PluginStatus, ReservedNames,
    configure_web, discover,
};
use oxibot_kernel::session::location;
use oxibot_kernel::settings::Settings;
use oxibot_kernel::{paths, plugin_specs};

use super::CommonArgs;

/// Set by a command that reports the config's problems itself (`oxibot status`), so they
/// are not said twice.
pub static QUIET_CONFIG_WARNINGS: AtomicBool = AtomicBool::new(false);

/// One line on stderr per unknown key of the config (likely a typo; the key is kept).
fn warn_of_unknown_keys(config: &Config, path: &std::path::Path) {
    let file = path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned());
    for unknown in &config.unknown_keys {
        eprintln!("warning: {file}: {unknown}");
    }
}

/// What a kernel command runs with.
pub struct Setup {
    /// The loaded config (defaults when no file exists), read into its typed sections.
    pub settings: Settings,
    /// The workspace tools work in (absolute).
    pub workspace: PathBuf,
    /// The plugins to start.
    pub plugins: Vec<PluginSpec>,
    /// How to run them.
    pub host: HostConfig,
    /// The config file read (it may not exist).
    pub config_path: PathBuf,
}

/// The kernel's built-in tools, whose names no plugin may offer.
const BUILTIN_TOOLS: [&str; 4] = [
    oxibot_kernel::automation::message::NAME,
    oxibot_kernel::automation::spawn::NAME,
    oxibot_kernel::cron::tool::NAME,
    oxibot_kernel::memory::recall::tool::NAME,
];

/// The names no plugin takes without saying so: the built-ins and the bundled plugins' tools.
fn reserved_names() -> ReservedNames {
    ReservedNames { builtins: BUILTIN_TOOLS.map(str::to_owned).to_vec(), ..ReservedNames::default() }
}

/// What a command does with a workspace that does not exist yet. Every command finds the
/// workspace the same way: `--workspace`, else `agents.defaults.workspace` of the config
/// (default `$OXIBOT_HOME/workspace`, i.e. `~/.oxibot/workspace`), with or without a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MissingWorkspace {
    /// Create it and write the templates (commands that work in it).
    Create,
    /// Leave it missing (`oxibot status` only reads).
    Leave,
}

impl Setup {
    /// Loads config, resolves the workspace (created with its templates if missing) and
    /// discovers plugins.
    pub fn load(common: &CommonArgs) -> anyhow::Result<Setup> {
        Setup::load_with(common, MissingWorkspace::Create)
    }

    /// Like [`Setup::load`], but writes nothing: a missing workspace stays missing.
    pub fn load_read_only(common: &CommonArgs) -> anyhow::Result<Setup> {
        Setup::load_with(common, MissingWorkspace::Leave)
    }

    fn load_with(common: &CommonArgs, missing: MissingWorkspace) -> anyhow::Result<Setup> {
        let config_path = common.config.clone().unwrap_or_else(paths::default_config_path);
        if common.config.is_some() && !config_path.exists() {
            anyhow::bail!("config file {} does not exist", config_path.display());
        }
        let config = Config::load(&config_path)?;
        if !QUIET_CONFIG_WARNINGS.load(Ordering::Relaxed) {
            warn_of_unknown_keys(&config, &config_path);
        }
        DreamSettings::from_config(&config.agents.defaults.dream)
            .map_err(|error| anyhow::anyhow!("{}: {error}", config_path.display()))?;
        let settings = Settings::new(config);
        if let Err(error) = &settings.memory {
            anyhow::bail!("{}: {error}", config_path.display());
        }
        oxibot_kernel::budget::budgets(settings.config.agents.defaults.extra.get("budgets"))
            .map_err(|error| anyhow::anyhow!("{}: {error}", config_path.display()))?;
        let config = &settings.config;
        let workspace = common.workspace.as_deref().map_or_else(|| config.workspace(), paths::expand_tilde);
        if missing == MissingWorkspace::Create && !workspace.exists() {
            std::fs::create_dir_all(&workspace)
                .with_context(|| format!("cannot create the workspace {}", workspace.display()))?;
            oxibot_kernel::context::write_missing_templates(&workspace)
                .with_context(|| format!("cannot write templates into {}", workspace.display()))?;
        }
        let workspace =
            std::path::absolute(&workspace).with_context(|| format!("bad workspace path {}", workspace.display()))?;
        if !workspace.is_dir() && (missing == MissingWorkspace::Create || workspace.exists()) {
            anyhow::bail!("workspace {} is not a directory (create it, or pass --workspace)", workspace.display());
        }
        let exe = std::env::current_exe().context("cannot locate the oxibot binary")?;
        let mut configured = plugin_specs::plugin_specs(config);
        configured.extend(plugin_specs::mcp_specs(config, &exe));
        let sources = PluginSources { kernel: Some(exe.clone()), plugin_dir: Some(paths::plugins_dir()), configured };
        let mut plugins = discover(&sources);
        configure_web(&mut plugins, &config.tools.extra, |name| std::env::var(name).ok());
        // Plugins that announce `static_manifest` start on their first call once their tools
        // are remembered here.
        let manifest_cache = Some(ManifestCache::new(paths::data_dir().join("cache").join("manifests")));
        // Plugins that failed to start lately are not tried again by the next commands.
        let broken = Some(BrokenPlugins::new(paths::data_dir().join("cache").join("broken")));
        let host = HostConfig {
            launcher: Some(exe),
            manifest_cache,
            reserved: reserved_names(),
            broken,
            ..HostConfig::default()
        };
        Ok(Setup { settings, workspace, plugins, host, config_path })
    }

    /// Starts the plugin host (inside the running actix system), every plugin confined to the
    /// workspace by the launcher's sandbox while the restriction is on.
    pub fn start_host(&self) -> anyhow::Result<PluginHost> {
        let workspace = self.settings.config.tools.restrict_to_workspace.then_some(self.workspace.as_path());
        let plugins = self.plugins.iter().cloned().map(|spec| spec.confined_to(workspace)).collect();
        PluginHost::start(plugins, self.host.clone()).context("cannot start the plugin host")
    }

    /// Where nanobot 0.3 keeps this workspace's sessions, when the config file is nanobot's
    /// (`<config dir>/sessions/<workspace id>/`): sessions oxibot has no file of are copied
    /// from there on first load.
    pub fn nanobot_sessions(&self) -> Option<PathBuf> {
        location::nanobot_dir(self.config_path.parent()?, &self.workspace)
    }

    /// Starts OpenTelemetry export when the config's `telemetry.otlpEndpoint` or a standard
    /// `OTEL_EXPORTER_OTLP_*` variable names an endpoint; the guard flushes it when dropped.
    pub fn start_telemetry(&self) -> Option<oxibot_kernel::telemetry::Telemetry> {
        let section = self.settings.config.extra.get("telemetry");
        oxibot_kernel::telemetry::start(&oxibot_kernel::telemetry::TelemetrySettings::from_config(section))
    }

    /// How long to wait for plugins to finish starting.
    pub fn startup_wait(&self) -> Duration {
        let longest = self.plugins.iter().filter_map(|spec| spec.startup_timeout).max().unwrap_or_default();
        self.host.handshake_timeout.max(longest) + Duration::from_secs(1)
    }

    /// Starts every plugin, waits for them to settle, stops them, and returns how each did.
    pub fn plugin_statuses(&self) -> anyhow::Result<Vec<PluginStatus>> {
        actix::System::new().block_on(async {
            let host = self.start_host()?;
            host.wait_settled(self.startup_wait()).await;
            let statuses = host.statuses();
            host.shutdown().await;
            anyhow::Ok(statuses)
        })
    }
}
