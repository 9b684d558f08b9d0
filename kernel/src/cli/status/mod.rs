//! `oxibot status`: where things are, which model and providers, and plugin health.

use std::process::ExitCode;

use oxibot_kernel::gateway::local_secrets::LocalSecrets;
use oxibot_kernel::memory::recall::index::MemoryIndex;
use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_proto::PeerKind;

use super::CommonArgs;
use super::kernel::{QUIET_CONFIG_WARNINGS, Setup};

mod checks;

/// Prints the status report.
pub fn run(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let config_path = common.config.clone().unwrap_or_else(paths::default_config_path);
    // The config's problems are listed below, not as warnings on stderr.
    QUIET_CONFIG_WARNINGS.store(true, std::sync::atomic::Ordering::Relaxed);
    let setup = Setup::load_read_only(common)?;
    let defaults = &setup.settings.config.agents.defaults;
    let exists = |p: &std::path::Path| if p.exists() { "" } else { " (missing; run `oxibot onboard`)" };
    println!("config:    {}{}", config_path.display(), exists(&config_path));
    let missing =
        if setup.workspace.exists() { "" } else { " (missing; created by the first command that works in it)" };
    println!("workspace: {}{missing}", setup.workspace.display());
    println!("data dir:  {}", paths::data_dir().display());
    let provider = match Provider::from_config(&setup.settings.config.llm()) {
        Ok(provider) => format!("via {} (sends model '{}')", provider.name(), provider.wire_model()),
        Err(error) => format!("— no usable provider: {error}"),
    };
    println!("model:     {} {provider}", defaults.model);
    let configured: Vec<&str> = setup
        .settings
        .config
        .providers
        .iter()
        .filter(|(_, p)| {
            p.api_key.as_deref().is_some_and(|k| !k.is_empty()) || p.api_base.as_deref().is_some_and(|b| !b.is_empty())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    println!("providers: {}", if configured.is_empty() { "none configured".to_owned() } else { configured.join(", ") });
    println!("sandbox:   {}", sandbox_line(setup.settings.config.tools.restrict_to_workspace, &setup.workspace));
    if !setup.settings.config.tools.restrict_to_workspace {
        println!("{}", sandbox_off_warning(&config_path));
    }
    println!("approvals: {}", approvals_line(&setup.settings.config.tools.approval));
    println!("memory:    {}", memory_line(&setup));
    print_budgets(&setup);
    println!(
        "surfaces:  the web UI and the api and websocket channels require a secret, on loopback too (`oxibot ui` signs in; keys in {})",
        LocalSecrets::new(&paths::data_dir()).path().display()
    );
    let statuses = setup.plugin_statuses()?;
    println!("plugins:");
    for status in statuses {
        let confined = setup.settings.config.tools.restrict_to_workspace;
        let detail = status
            .reason
            .map(|r| format!(" — {}", super::plugin_hints::explain_failure(&r, confined)))
            .unwrap_or_default();
        let offers = match status.kind {
            PeerKind::Channel => "channel".to_owned(),
            _ => format!("{} tool{}", status.tools.len(), if status.tools.len() == 1 { "" } else { "s" }),
        };
        println!("  {:<12} {:<10} {offers}{detail}", status.name, status.state);
    }
    print_gateway(common, &setup);
    print_config_problems(&setup);
    Ok(ExitCode::SUCCESS)
}

/// Unknown keys, what the gateway would refuse and plugin files that are not executable,
/// one `warning:` line each.
fn print_config_problems(setup: &Setup) {
    let gateway_running = super::gateway::settings_of(setup)
        .is_some_and(|settings| fetch_health(&format!("{}:{}", settings.host, settings.port)).is_some());
    let plugin_files = super::plugin_hints::not_executable_warnings();
    for problem in checks::config_problems(setup, gateway_running).into_iter().chain(plugin_files) {
        println!("warning:   {problem}");
    }
}

/// Each cap of `agents.defaults.budgets`, with what was spent and `CAPPED` once reached.
fn print_budgets(setup: &Setup) {
    use oxibot_kernel::usage::UsageLog;
    let section = setup.settings.config.agents.defaults.extra.get("budgets");
    let Ok(budgets) = oxibot_kernel::budget::budgets(section) else { return };
    if budgets.is_empty() {
        return println!("budgets:   none (agents.defaults.budgets sets caps per day or month)");
    }
    let log = UsageLog::new(&paths::data_dir());
    let today = chrono::Utc::now().date_naive();
    println!("budgets:");
    for line in budgets.report(&log, &setup.settings.prices_or_none(), today) {
        println!("  {line}");
    }
}

/// How memory is searched, said plainly, and how big the index is.
fn memory_line(setup: &Setup) -> String {
    let settings = match setup.settings.memory.clone() {
        Ok(settings) => settings,
        Err(error) => return format!("not usable: {error}"),
    };
    let mut line = settings.describe();
    if let Some(model) = &settings.embedding
        && let Err(error) = oxibot_kernel::provider::Embedder::from_config(&setup.settings.config.llm(), model)
    {
        line = format!("keyword search (BM25) only — embeddings from '{model}' unavailable: {error}");
    }
    let path = MemoryIndex::location(&paths::data_dir(), &setup.workspace);
    if path.exists() {
        if let Ok(stats) = MemoryIndex::open(&path).and_then(|index| index.stats()) {
            line.push_str(&format!(
                "; index: {} chunk(s) of {} file(s), {} KiB",
                stats.chunks,
                stats.files,
                stats.bytes / 1024
            ));
        }
    } else {
        line.push_str("; index not built yet");
    }
    line
}

/// The loud line shown wherever a config with `tools.restrictToWorkspace: false` is used or
/// imported (nanobot's default is false, so an imported config often carries it).
pub fn sandbox_off_warning(config_path: &std::path::Path) -> String {
    format!(
        "WARNING: the sandbox is off: tools.restrictToWorkspace is false in {}, so exec and the file tools reach \
         the whole machine (every file and program your user can reach). Turn it on: set \
         \"tools\": {{\"restrictToWorkspace\": true}} in that file, or remove the key.",
        config_path.display()
    )
}

/// Which sandbox confines `exec` and the plugins, in one line.
/// The approval policy in one line: what asks, what is denied, the terminal, the timeout.
fn approvals_line(policy: &oxibot_kernel::config::approval::ApprovalPolicy) -> String {
    let source = if policy.is_default { "defaults" } else { "tools.approval" };
    let terminal = match policy.terminal {
        oxibot_kernel::config::approval::Outcome::Allow => "the terminal runs ask calls without asking",
        _ => "the terminal asks too",
    };
    format!(
        "{} ({source}); {terminal}; no answer in {} s = no; `oxibot approvals list` for standing approvals",
        policy.describe().join("; "),
        policy.timeout_secs
    )
}

/// Which sandbox confines `exec` and the plugins, in one line, then which layers are active.
fn sandbox_line(restricted: bool, workspace: &std::path::Path) -> String {
    let support = oxibot_sandbox::detect();
    let layers = layers_line(restricted, support.is_available());
    if !restricted {
        return format!(
            "{support}; not used: tools.restrictToWorkspace is false, exec and plugins run unconfined\n{layers}"
        );
    }
    if !support.is_available() {
        return format!(
            "{support} — exec refuses while restrictToWorkspace is on, and plugins run unconfined \
             (use a kernel with Landlock, or set tools.restrictToWorkspace to false)"
        );
    }
    let mut line = format!("{support}, exec and plugins confined to the workspace");
    let data = paths::data_dir();
    if data.starts_with(workspace) {
        line.push_str(&format!(
            " (warning: the data dir {} is inside the workspace, so the sandbox cannot keep config.json from tools)",
            data.display()
        ));
    }
    format!("{line}\n{layers}")
}

/// The `layers:` line: what confines an `exec` command (namespaces, seccomp, landlock,
/// rlimits) and whether plugins get their own PID namespaces.
fn layers_line(restricted: bool, landlock: bool) -> String {
    let namespaces = std::env::current_exe()
        .map_err(|error| format!("cannot locate the oxibot binary: {error}"))
        .and_then(|exe| oxibot_kernel::launcher::namespace_support(&exe));
    let plugins = match &namespaces {
        Ok(()) => "plugins: own PID namespace each (nothing they start outlives them)".to_owned(),
        Err(reason) => {
            format!("plugins: no PID namespaces ({reason}), what they start in a new session may outlive them")
        }
    };
    if !restricted {
        return format!("layers:    exec: none (unrestricted); {plugins}");
    }
    if !landlock {
        return format!("layers:    exec: none (refuses); {plugins}");
    }
    let exec = match &namespaces {
        Ok(()) => "namespaces (user, mount, pid, ipc, uts, net when off), seccomp, landlock, rlimits".to_owned(),
        Err(reason) => format!("namespaces off ({reason}), falling back to landlock only: seccomp, landlock, rlimits"),
    };
    format!("layers:    exec: {exec}; {plugins}")
}

/// The running gateway's channels, asked of its health endpoint.
fn print_gateway(common: &CommonArgs, setup: &Setup) {
    let Ok(settings) = super::gateway::settings(common, setup) else { return };
    let address = format!("{}:{}", settings.host, settings.port);
    match fetch_health(&address) {
        Some(health) => {
            println!("gateway:   running (pid {}) on {address}, up {}s", health["pid"], health["uptime_secs"]);
            for plugin in health["plugins"].as_array().into_iter().flatten().filter(|p| p["kind"] == "channel") {
                println!(
                    "  {:<12} {}",
                    plugin["name"].as_str().unwrap_or("?"),
                    plugin["state"].as_str().unwrap_or("?")
                );
            }
            print_cluster(&health["cluster"]);
        }
        None => {
            let names: Vec<&str> = settings.channels.iter().map(|c| c.name.as_str()).collect();
            let enabled = if names.is_empty() { "none enabled".to_owned() } else { names.join(", ") };
            println!("gateway:   not running (channels: {enabled}; start it with `oxibot gateway`)");
        }
    }
}

/// The gateway's cluster (cluster mode): this node, the NATS connection, the sessions it owns,
/// the scheduler's leader, the kernel running each channel, and every node with how many
/// sessions it owns. Nothing on a single host.
fn print_cluster(cluster: &serde_json::Value) {
    let Some(node) = cluster["node"].as_str() else { return };
    let sessions: Vec<&str> = cluster["sessions"].as_array().into_iter().flatten().filter_map(|s| s.as_str()).collect();
    println!(
        "cluster:   node {node}, NATS {} ({}), scheduler led by {}",
        cluster["nats"].as_str().unwrap_or("?"),
        cluster["connection"].as_str().unwrap_or("?"),
        cluster["scheduler"].as_str().unwrap_or("nobody yet")
    );
    println!(
        "  owns {} session(s){}",
        sessions.len(),
        if sessions.is_empty() { String::new() } else { format!(": {}", sessions.join(", ")) }
    );
    let channels: Vec<String> = cluster["channels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, node)| format!("{name} on {}", node.as_str().unwrap_or("no kernel yet")))
        .collect();
    if !channels.is_empty() {
        println!("  channels: {}", channels.join(", "));
    }
    let nodes = node_summaries(&cluster["nodes"]);
    if !nodes.is_empty() {
        println!("  nodes:    {}", nodes.join(", "));
    }
}

/// Each node of the cluster with how many sessions it owns: `kernel-a (12 sessions)`.
fn node_summaries(nodes: &serde_json::Value) -> Vec<String> {
    let nodes = nodes.as_array().into_iter().flatten();
    nodes
        .map(|node| {
            let sessions = node["sessions"].as_u64().unwrap_or(0);
            let noun = if sessions == 1 { "session" } else { "sessions" };
            format!("{} ({sessions} {noun})", node["node"].as_str().unwrap_or("?"))
        })
        .collect()
}

/// `GET /health` with a short timeout; `None` when nothing answers.
fn fetch_health(address: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let addr = std::net::ToSocketAddrs::to_socket_addrs(address).ok()?.next()?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(300)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: oxibot\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    serde_json::from_str(response.split("\r\n\r\n").nth(1)?).ok()
}
