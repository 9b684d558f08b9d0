//! `oxibot status`: where things are, which model and providers, and plugin health.

use std::process::ExitCode;

use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_proto::PeerKind;

use super::kernel::{Setup, WorkspaceDefault};
use super::CommonArgs;

/// Prints the status report.
pub fn run(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let config_path = common.config.clone().unwrap_or_else(paths::default_config_path);
    let setup = Setup::load_with(common, WorkspaceDefault::Configured)?;
    let defaults = &setup.config.agents.defaults;
    let exists = |p: &std::path::Path| if p.exists() { "" } else { " (missing; run `oxibot onboard`)" };
    println!("config:    {}{}", config_path.display(), exists(&config_path));
    println!("workspace: {}", setup.workspace.display());
    println!("data dir:  {}", paths::data_dir().display());
    let provider = match Provider::from_config(&setup.config) {
        Ok(provider) => format!("{} (sends model '{}')", provider.name(), provider.wire_model()),
        Err(error) => format!("not usable: {error}"),
    };
    println!("model:     {} via {provider}", defaults.model);
    let configured: Vec<&str> = setup
        .config
        .providers
        .iter()
        .filter(|(_, p)| p.api_key.as_deref().is_some_and(|k| !k.is_empty()) || p.api_base.as_deref().is_some_and(|b| !b.is_empty()))
        .map(|(name, _)| name.as_str())
        .collect();
    println!("providers: {}", if configured.is_empty() { "none configured".to_owned() } else { configured.join(", ") });
    let statuses = actix::System::new().block_on(async {
        let host = setup.start_host()?;
        host.wait_settled(setup.startup_wait()).await;
        let statuses = host.statuses();
        host.shutdown().await;
        anyhow::Ok(statuses)
    })?;
    println!("plugins:");
    for status in statuses {
        let detail = status.reason.map(|r| format!(" — {r}")).unwrap_or_default();
        let offers = match status.kind {
            PeerKind::Channel => "channel".to_owned(),
            _ => format!("{} tool{}", status.tools.len(), if status.tools.len() == 1 { "" } else { "s" }),
        };
        println!("  {:<12} {:<10} {offers}{detail}", status.name, status.state);
    }
    Ok(ExitCode::SUCCESS)
}
