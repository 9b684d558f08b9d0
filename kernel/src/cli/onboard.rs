//! `oxibot onboard`: a default config and a workspace, never overwriting what exists.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use oxibot_kernel::config::Config;
use oxibot_kernel::paths;
use serde_json::json;

use super::CommonArgs;

/// Writes `config.json` (if missing) and the workspace templates (only missing files).
pub fn run(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let config_path = common.config.clone().unwrap_or_else(paths::default_config_path);
    if config_path.exists() {
        println!("config: {} (kept as it is)", config_path.display());
    } else {
        write_default_config(&config_path)?;
        println!("config: {} (created; add an API key under providers)", config_path.display());
    }
    let config = Config::load(&config_path)?;
    let workspace = common.workspace.clone().map(|w| paths::expand_tilde(&w)).unwrap_or_else(|| config.workspace());
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("cannot create the workspace {}", workspace.display()))?;
    let written = oxibot_kernel::context::write_missing_templates(&workspace)
        .with_context(|| format!("cannot write templates into {}", workspace.display()))?;
    println!(
        "workspace: {} ({} new file{})",
        workspace.display(),
        written.len(),
        if written.len() == 1 { "" } else { "s" }
    );
    for file in written {
        println!("  + {}", file.strip_prefix(&workspace).unwrap_or(&file).display());
    }
    println!("\nnext: put an API key in the config, then run `oxibot agent`");
    Ok(ExitCode::SUCCESS)
}

fn write_default_config(path: &Path) -> anyhow::Result<()> {
    let defaults = oxibot_kernel::config::AgentDefaults::default();
    let config = json!({
        "agents": {"defaults": {
            "workspace": defaults.workspace,
            "model": "anthropic/claude-opus-4-5",
            "provider": "auto",
            "maxTokens": 8192,
            "contextWindowTokens": 65536,
            "temperature": 0.1,
            "maxToolIterations": 40
        }},
        "providers": {
            "anthropic": {"apiKey": ""},
            "openai": {"apiKey": ""},
            "openrouter": {"apiKey": ""},
            "custom": {"apiKey": "", "apiBase": ""}
        },
        "tools": {"restrictToWorkspace": true, "exec": {"timeout": 60}},
        "channels": {},
        "gateway": {"host": "127.0.0.1", "port": 18790}
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&config)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
