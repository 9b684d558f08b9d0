//! Entry point of the MCP bridge (`oxibot __plugin mcp`): connect to the configured MCP
//! server, then serve its tools to the kernel until either side goes away.

use std::process::ExitCode;
use std::time::Duration;

use crate::bridge::Bridge;
use crate::config::ServerConfig;
use crate::media::MediaDir;
use oxibot_plugin::warn;
use oxibot_plugin::{CallContext, Plugin};
use serde_json::Value;

/// Exit status after the MCP server went away (EX_TEMPFAIL): the kernel restarts the bridge.
const SERVER_GONE_EXIT: i32 = 75;

/// Exit status when the bridge cannot start (EX_CONFIG).
const START_FAILED_EXIT: u8 = 78;

/// How long calls in flight get to report the server's loss before the process exits.
const REPORT_GRACE: Duration = Duration::from_millis(200);

/// Bridges the MCP server named in the environment to the kernel that started this process;
/// the entry `oxibot __plugin mcp` runs.
pub fn run() -> ExitCode {
    // reqwest is built without a default TLS provider; install ring's before any client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match ServerConfig::from_env() {
        Ok(config) => config,
        Err(error) => return fail(&error),
    };
    // The MCP client lives on its own runtime, next to the one the SDK serves calls on.
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    for key in &config.ignored_keys {
        warn!("oxibot-tool-mcp: {key} is not a key this version reads; ignored");
    }
    let server = config.name.clone();
    let plugin_name = format!("mcp-{}", crate::naming::plugin_suffix(&server));
    let connected = runtime.block_on(async {
        let bridge = Bridge::connect(config).await?;
        let tools = bridge.tools().await?;
        Ok::<_, crate::bridge::BridgeError>((bridge, tools))
    });
    let (bridge, tools) = match connected {
        Ok(connected) => connected,
        Err(error) => return fail(&error),
    };
    let caller = bridge.caller(MediaDir::from_env(&plugin_name));
    let revision = bridge.revision();
    runtime.spawn(async move {
        let reason = bridge.watch().await;
        warn!("oxibot-tool-mcp: MCP server '{server}' went away ({reason}); exiting so the kernel restarts it");
        tokio::time::sleep(REPORT_GRACE).await;
        std::process::exit(SERVER_GONE_EXIT);
    });
    let mut plugin = Plugin::new(plugin_name).detail(format!("MCP revision {revision}"));
    for bridged in tools {
        let caller = caller.clone();
        let mcp_name = bridged.mcp_name;
        plugin = plugin.tool(bridged.tool, move |ctx: CallContext, args: Value| {
            let caller = caller.clone();
            let mcp_name = mcp_name.clone();
            async move { caller.call(&mcp_name, args, ctx.idempotency_key.as_deref()).await }
        });
    }
    let code = plugin.run();
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

fn fail(error: &dyn std::error::Error) -> ExitCode {
    warn!("oxibot-tool-mcp: {error}");
    ExitCode::from(START_FAILED_EXIT)
}
