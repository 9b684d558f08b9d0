//! `oxibot onboard`: a default config and a workspace, never overwriting what exists.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use oxibot_kernel::config::Config;
use oxibot_kernel::paths;
use serde_json::{Value, json};

use super::CommonArgs;
use super::local_server::LocalServer;

/// Writes `config.json` (if missing) and the workspace templates (only missing files);
/// offers a local model server when no provider is usable (`local`: uses it).
pub fn run(common: &CommonArgs, local: bool) -> anyhow::Result<ExitCode> {
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
    if offer_local_server(&config_path, &config, local)? {
        println!("\nnext: run `oxibot agent`");
    } else {
        println!("\nnext: put an API key in the config, then run `oxibot agent`");
    }
    Ok(ExitCode::SUCCESS)
}

/// With `--local`, or when no provider is usable, looks for a local model server; uses it
/// when `local` is given or the person says yes at the terminal, never silently. Returns
/// whether the config now uses one.
fn offer_local_server(config_path: &Path, config: &Config, local: bool) -> anyhow::Result<bool> {
    if !local && oxibot_kernel::provider::Provider::from_config(&config.llm()).is_ok() {
        return Ok(false);
    }
    let Some(server) = super::local_server::find().into_iter().next() else {
        if local {
            println!(
                "local: no model server answers on 127.0.0.1 (looked for Ollama on 11434, llama.cpp's server on \
                 8080, LM Studio on 1234, vLLM on 8000); start one, then run `oxibot onboard --local` again"
            );
        }
        return Ok(false);
    };
    let agreed =
        local || (std::io::stdin().is_terminal() && ask(&format!("found {}; use it? [y/N] ", server.describe()))?);
    if !agreed {
        println!("local: found {}; run `oxibot onboard --local` to use it", server.describe());
        return Ok(false);
    }
    use_local_server(config_path, &server)?;
    println!("local: {} now uses {}", config_path.display(), server.describe());
    Ok(true)
}

/// Asks a yes-or-no question on the terminal.
fn ask(question: &str) -> anyhow::Result<bool> {
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

/// Points the config's model at `server` through the `custom` provider, keeping the rest.
fn use_local_server(path: &Path, server: &LocalServer) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut config: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Some(root) = config.as_object_mut() else { anyhow::bail!("{} is not a JSON object", path.display()) };
    let defaults = root.entry("agents").or_insert_with(|| json!({}));
    let defaults = &mut defaults["defaults"];
    if !defaults.is_object() {
        *defaults = json!({});
    }
    defaults["provider"] = json!("custom");
    defaults["model"] = json!(server.model);
    let providers = root.entry("providers").or_insert_with(|| json!({}));
    let custom = &mut providers["custom"];
    if !custom.is_object() {
        *custom = json!({});
    }
    custom["apiBase"] = json!(server.api_base);
    let text = serde_json::to_string_pretty(&config)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn write_default_config(path: &Path) -> anyhow::Result<()> {
    let config = oxibot_kernel::config::fresh::onboard_config();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&config)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
