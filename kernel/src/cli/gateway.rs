//! `oxibot gateway` (the daemon serving chat channels), `oxibot ui` (a login link for its web
//! UI) and `oxibot pairing` (approving new senders).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use oxibot_kernel::bundled::channel_spec;
use oxibot_kernel::config::Config;
use oxibot_kernel::gateway::ClusterMember;
use oxibot_kernel::gateway::access::Access;
use oxibot_kernel::gateway::local_secrets::{self, Filled, LocalSecrets};
use oxibot_kernel::gateway::reload::ConfigReload;
use oxibot_kernel::gateway::settings::GatewaySettings;
use oxibot_kernel::gateway::web::login::{LoginCodes, login_url};
use oxibot_kernel::paths;
use oxibot_kernel::plugin::{BrokenPlugins, ChannelSpecError};
use oxibot_kernel::provider::Provider;
use oxibot_kernel::services::Services;

use super::CommonArgs;
use super::kernel::Setup;

/// The pairing store of this data dir.
fn pairing_path() -> PathBuf {
    paths::data_dir().join("pairing.json")
}

/// Loads the gateway settings, naming the config file on error.
pub fn settings(common: &CommonArgs, setup: &Setup) -> anyhow::Result<GatewaySettings> {
    let config_path = common.config.clone().unwrap_or_else(paths::default_config_path);
    GatewaySettings::from_config(&setup.settings.config)
        .map_err(|error| anyhow::anyhow!("{}: {error}", config_path.display()))
}

/// The gateway settings of `setup`'s config, when they are valid.
pub fn settings_of(setup: &Setup) -> Option<GatewaySettings> {
    GatewaySettings::from_config(&setup.settings.config).ok()
}

/// Runs the gateway until SIGTERM or SIGINT.
pub fn run(common: &CommonArgs, port: Option<u16>) -> anyhow::Result<ExitCode> {
    let mut setup = Setup::load(common)?;
    // The gateway starts rarely and runs for long: it tries every plugin, however it did.
    setup.host.broken = setup.host.broken.take().map(BrokenPlugins::recording_only);
    let _telemetry = setup.start_telemetry();
    let mut settings = settings(common, &setup)?;
    if let Some(port) = port {
        settings.port = port;
    }
    let secrets = LocalSecrets::new(&paths::data_dir());
    let filled = local_secrets::fill(&mut settings, &secrets)?;
    let exe = std::env::current_exe().context("cannot locate the oxibot binary")?;
    let mut missing = Vec::new();
    // In a cluster, a channel not run by every kernel starts where it is owned (see below).
    let cluster_config = setup.settings.config.cluster.clone();
    let mut exclusive = Vec::new();
    for channel in &settings.channels {
        match channel_spec(&exe, &channel.name, &channel.raw) {
            Ok(spec) if cluster_config.as_ref().is_some_and(|c| !c.local_channels.contains(&channel.name)) => {
                exclusive.push(spec);
            }
            Ok(spec) => setup.plugins.push(spec),
            // A channel this version does not have (a nanobot config may enable one) or this
            // build left out: the others run, and the gap is said plainly.
            Err(error @ (ChannelSpecError::Unknown(_) | ChannelSpecError::NotBuiltIn(_))) => {
                eprintln!("warning: channels.{}: {error}; the gateway runs without it", channel.name);
                missing.push(channel.name.clone());
            }
            Err(error) => {
                return Err(anyhow::Error::new(error).context(format!("cannot start channel {}", channel.name)));
            }
        }
    }
    settings.channels.retain(|channel| !missing.contains(&channel.name));
    if settings.channels.is_empty() {
        eprintln!("note: no channel is enabled (set channels.<name>.enabled in the config); serving /health only");
    }
    print_web_ui(&settings)?;
    print_api(&settings, &filled, &secrets);
    let provider = super::agent::with_retry_override(
        Provider::from_config(&setup.settings.config.llm()).context("cannot use the configured model")?,
    )?;
    actix::System::new().block_on(async move {
        let cluster = join_cluster(&setup).await?;
        own_channels(cluster.as_ref(), exclusive, cluster_config.map(|c| c.local_channels).unwrap_or_default());
        let host = setup.start_host()?;
        let services =
            Services::new(setup.settings.clone(), setup.workspace.clone(), &paths::data_dir(), provider, host, true)
                .with_nanobot_sessions(setup.nanobot_sessions());
        let services = Arc::new(in_cluster(services, cluster.as_ref()));
        let config_file = common.config.clone().unwrap_or_else(paths::default_config_path);
        let reload = std::path::absolute(&config_file).ok().filter(|path| path.exists()).map(|path| ConfigReload {
            path,
            kernel: exe.clone(),
            secrets: secrets.clone(),
            provider: Box::new(|config: &Config| {
                let provider = Provider::from_config(&config.llm()).map_err(|error| error.to_string())?;
                super::agent::with_retry_override(provider).map_err(|error| format!("{error:#}"))
            }),
        });
        let access = Access::open(&pairing_path());
        oxibot_kernel::gateway::run(services, settings, access, delivery_delays()?, reload, cluster).await?;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

/// Joins the cluster of the config's `cluster` section, if there is one; without it no NATS
/// code runs.
async fn join_cluster(setup: &Setup) -> anyhow::Result<Option<ClusterMember>> {
    let Some(config) = &setup.settings.config.cluster else { return Ok(None) };
    #[cfg(feature = "cluster")]
    {
        let member = oxibot_kernel::cluster::Member::join(config).await.context("cannot join the cluster")?;
        Ok(Some(member))
    }
    #[cfg(not(feature = "cluster"))]
    anyhow::bail!(
        "this oxibot was built without cluster mode (the `cluster` feature); remove `cluster` from the config ({} servers)",
        config.nats
    )
}

/// Hands the channels run on one kernel at a time to the cluster's claims (the gateway starts
/// each where it is owned); `local` ones run on every kernel.
fn own_channels(
    cluster: Option<&ClusterMember>,
    exclusive: Vec<oxibot_kernel::plugin::PluginSpec>,
    local: Vec<String>,
) {
    #[cfg(feature = "cluster")]
    if let Some(member) = cluster {
        member.channels().configure(exclusive, &local);
    }
    #[cfg(not(feature = "cluster"))]
    let _ = (cluster, exclusive, local);
}

/// `services` as one kernel of `cluster`: sessions claimed before their turns and written only
/// while owned.
fn in_cluster(services: Services, cluster: Option<&ClusterMember>) -> Services {
    #[cfg(feature = "cluster")]
    if let Some(member) = cluster {
        let files = oxibot_kernel::session::SessionStore::clone(services.session_files());
        let fences = files.dir().join(".fences");
        let fenced = oxibot_kernel::cluster::FencedSessions::new(files, member.node().clone(), fences);
        return services.in_cluster(Arc::new(fenced), member.claims());
    }
    #[cfg(not(feature = "cluster"))]
    let _ = cluster;
    services
}

/// Tells where the web UI is, with a one-time login link.
fn print_web_ui(settings: &GatewaySettings) -> anyhow::Result<()> {
    if !settings.web_ui {
        return Ok(());
    }
    let page = oxibot_kernel::gateway::web::url(&settings.host, settings.port);
    let code = LoginCodes::new(&paths::data_dir()).mint()?;
    println!("Web UI: {} (a one-time login link; `oxibot ui` prints another)", login_url(&page, &code));
    if settings.channel("websocket").is_none() {
        println!("        (its chat needs the websocket channel: set channels.websocket.enabled to true)");
    }
    Ok(())
}

/// Tells where the `api` channel is and, the one time it was made, its key.
fn print_api(settings: &GatewaySettings, filled: &Filled, secrets: &LocalSecrets) {
    let Some(api) = settings.channel("api") else { return };
    let host = api.raw.get("host").and_then(serde_json::Value::as_str).unwrap_or("127.0.0.1");
    let port = api.raw.get("port").and_then(serde_json::Value::as_u64).unwrap_or(18791);
    let base = oxibot_kernel::gateway::web::url(host, port as u16);
    match &filled.new_api_key {
        Some(key) => println!("API: {base}v1, key {key} (shown this once; kept in {})", secrets.path().display()),
        None => println!("API: {base}v1, key in channels.api.apiKey or else \"api\" in {}", secrets.path().display()),
    }
}

/// `oxibot ui`: prints a one-time login link for the gateway's web UI.
pub fn ui(common: &CommonArgs, port: Option<u16>) -> anyhow::Result<ExitCode> {
    let setup = Setup::load(common)?;
    let mut settings = settings(common, &setup)?;
    if let Some(port) = port {
        settings.port = port;
    }
    if !settings.web_ui {
        eprintln!("the web UI is off (gateway.webUi is false)");
        return Ok(ExitCode::FAILURE);
    }
    let page = oxibot_kernel::gateway::web::url(&settings.host, settings.port);
    let code = LoginCodes::new(&paths::data_dir()).mint()?;
    println!("{}", login_url(&page, &code));
    eprintln!("Open this link once, within an hour, in the browser to sign in; a cookie keeps you signed in.");
    let address = page.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let answers =
        std::net::ToSocketAddrs::to_socket_addrs(&address).ok().and_then(|mut all| all.next()).is_some_and(|socket| {
            std::net::TcpStream::connect_timeout(&socket, std::time::Duration::from_millis(500)).is_ok()
        });
    if !answers {
        eprintln!("note: no gateway answers on {address} yet; start it with `oxibot gateway`");
    }
    Ok(ExitCode::SUCCESS)
}

/// Environment variable replacing the 1-2-4 s waits after the first failed delivery attempts
/// (milliseconds, comma separated; the last one then repeats), for tests.
pub const DELIVERY_DELAYS_VAR: &str = "OXIBOT_DELIVERY_RETRY_DELAYS_MS";

fn delivery_delays() -> anyhow::Result<Option<Vec<std::time::Duration>>> {
    let Ok(text) = std::env::var(DELIVERY_DELAYS_VAR) else { return Ok(None) };
    let delays = text
        .split(',')
        .map(|part| part.trim().parse::<u64>().map(std::time::Duration::from_millis))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{DELIVERY_DELAYS_VAR} must be comma-separated milliseconds, got {text:?}"))?;
    Ok(Some(delays))
}

/// Approves a pairing code.
pub fn approve(code: &str) -> anyhow::Result<ExitCode> {
    let pending = Access::open(&pairing_path()).approve(code)?;
    println!("Approved {} on {}: their next message goes through.", pending.sender_id, pending.channel);
    Ok(ExitCode::SUCCESS)
}

/// Lists pending codes and approved senders.
pub fn list() -> anyhow::Result<ExitCode> {
    let access = Access::open(&pairing_path());
    let pending = access.pending();
    if pending.is_empty() {
        println!("No pairing requests are waiting.");
    }
    for (code, request) in pending {
        println!("{code}  {} sender {} (chat {})", request.channel, request.sender_id, request.chat_id);
    }
    for (channel, senders) in access.approved() {
        println!("approved on {channel}: {}", senders.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
