//! `oxibot tools list` and `oxibot tools call`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use oxibot_kernel::plugin::PluginStatus;
use oxibot_proto::CallContext;
use serde_json::{Value, json};

use super::CommonArgs;
use super::kernel::Setup;

/// Starts every plugin, waits for them to settle, prints their status.
pub fn list(common: &CommonArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let setup = Setup::load(common)?;
    for warning in super::plugin_hints::not_executable_warnings() {
        eprintln!("warning: {warning}");
    }
    let statuses = setup.plugin_statuses()?;
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(&statuses_json(&statuses))?)?;
    } else {
        write_table(&mut out, &statuses)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one call and prints its content; exit status 1 on a tool error.
pub fn call(common: &CommonArgs, tool: &str, args: &str, timeout: Option<f64>) -> anyhow::Result<ExitCode> {
    let arguments: Value = serde_json::from_str(args).with_context(|| format!("--args is not valid JSON: {args}"))?;
    anyhow::ensure!(arguments.is_object(), "--args must be a JSON object, e.g. '{{\"path\": \"README.md\"}}'");
    let timeout = timeout
        .map(Duration::try_from_secs_f64)
        .transpose()
        .context("--timeout must be a positive number of seconds")?;
    let setup = Setup::load(common)?;
    let context = CallContext {
        session_key: Some("cli:tools".into()),
        channel: Some("cli".into()),
        chat_id: Some("tools".into()),
        workspace: setup.workspace.display().to_string(),
        restrict_to_workspace: setup.settings.config.tools.restrict_to_workspace,
        idempotency_key: None,
    };
    let outcome = actix::System::new().block_on(async {
        let host = setup.start_host()?;
        let outcome = host.call(tool, arguments, context, timeout).await;
        host.shutdown().await;
        anyhow::Ok(outcome)
    })?;
    match outcome {
        Ok(result) if !result.is_error => {
            let mut out = std::io::stdout().lock();
            out.write_all(result.content.as_bytes())?;
            if !result.content.ends_with('\n') {
                out.write_all(b"\n")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Ok(result) => {
            eprintln!("{}", result.content);
            Ok(ExitCode::FAILURE)
        }
        Err(error) => {
            eprintln!("error: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn write_table(out: &mut impl Write, statuses: &[PluginStatus]) -> std::io::Result<()> {
    if statuses.is_empty() {
        writeln!(
            out,
            "no plugins found (looked next to the oxibot binary, in the plugins directory and in config.json)"
        )?;
        return Ok(());
    }
    let width = statuses.iter().map(|s| s.display_name().chars().count()).max().unwrap_or(6).max(6);
    writeln!(out, "{:<width$}  {:<10}  {:>7}  {:<7}  TOOLS", "PLUGIN", "STATE", "PID", "KIND")?;
    for status in statuses {
        let pid = status.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let tools = if status.tools.is_empty() { "-".to_owned() } else { status.tools.join(", ") };
        let kind = String::from(status.kind.clone());
        let name = status.display_name();
        writeln!(out, "{name:<width$}  {:<10}  {:>7}  {kind:<7}  {tools}", status.state, pid)?;
        for refused in &status.refused {
            writeln!(out, "{:<width$}  refused: {refused}", "")?;
        }
        if let Some(detail) = &status.detail {
            writeln!(out, "{:<width$}  {detail}", "")?;
        }
        if let Some(reason) = &status.reason {
            writeln!(out, "{:<width$}  reason: {reason}", "")?;
        }
    }
    Ok(())
}

fn statuses_json(statuses: &[PluginStatus]) -> Value {
    Value::Array(
        statuses
            .iter()
            .map(|s| {
                json!({
                    "name": s.name, "announced": s.announced, "kind": String::from(s.kind.clone()), "state": s.state, "reason": s.reason, "pid": s.pid,
                    "tools": s.tools, "refused": s.refused, "command": s.command, "origin": s.origin, "detail": s.detail,
                })
            })
            .collect(),
    )
}
