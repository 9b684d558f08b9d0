//! The gateway: the long-running kernel that serves chat channels.
//!
//! Code map: [`settings`] reads `gateway` and `channels.<name>`; [`access`] decides who may
//! talk (`allowFrom`, pairing codes), over the approvals [`pairing_store`] keeps;
//! [`router::Router`] turns channel plugin events into session turns and replies (pending ones
//! kept across restarts by [`router::outbox_store`]); [`reload`] applies config edits while it runs; [`resume`] finds
//! messages a crash left unanswered; [`health`] builds the `GET /health` report; [`web`]
//! serves it and the web UI. [`run`] ties them together and owns the shutdown order: stop
//! taking messages, let running turns finish (they are checkpointed anyway), flush the
//! outbox (pending replies stay in it for the next start), say goodbye to the plugins, exit.

pub mod access;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod health;
pub mod local_secrets;
pub mod pairing_store;
pub mod reload;
pub mod resume;
pub mod router;
pub mod settings;
pub mod web;

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Actor as _;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use crate::agent::SessionManager;
use crate::automation::dispatch::{Dispatcher, Target};
use crate::automation::heartbeat::HeartbeatActor;
use crate::automation::scheduling::{self, Scheduler};
use crate::automation::{Reach, builtin_tools, cron_where_jobs_run};
use crate::cron::handle::CronHandle;
use crate::memory::dream_actor::StartSchedule;
use crate::services::Services;
use access::Access;
use local_secrets::Surface;
use router::Router;
use settings::GatewaySettings;

/// A cluster this gateway is a member of (cluster mode); without the `cluster` feature, no
/// value exists.
#[cfg(feature = "cluster")]
pub type ClusterMember = Arc<crate::cluster::Member>;
/// A cluster this gateway is a member of (cluster mode); without the `cluster` feature, no
/// value exists.
#[cfg(not(feature = "cluster"))]
pub type ClusterMember = std::convert::Infallible;

/// Longest wait for the plugins to start before answering messages left from a previous run.
const PLUGIN_START_LIMIT: Duration = Duration::from_secs(10);
/// Longest wait for running turns at shutdown.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// Why the gateway could not run.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The HTTP server's address (health endpoint and web UI) is taken or invalid.
    #[error(
        "cannot listen on {address} for the health endpoint ({source}); is another gateway running? (set gateway.port)"
    )]
    Listen {
        /// `host:port`.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// The web UI's secret could not be read or made.
    #[error("cannot set up the web UI's secret: {0}")]
    Secrets(#[from] local_secrets::SecretsError),
}

/// Runs the gateway over `services` (whose plugin host already runs the enabled channels) until
/// SIGTERM or SIGINT. Must run inside an actix system. `retry_waits` replaces the 1-2-4 s
/// waits after the first failed delivery attempts (the last of them then repeats).
pub async fn run(
    services: Arc<Services>,
    settings: GatewaySettings,
    access: Access,
    retry_waits: Option<Vec<Duration>>,
    reload: Option<reload::ConfigReload>,
    cluster: Option<ClusterMember>,
) -> Result<(), GatewayError> {
    let started = Instant::now();
    let address = format!("{}:{}", settings.host, settings.port);
    let listener = TcpListener::bind(&address)
        .await
        .map_err(|source| GatewayError::Listen { address: address.clone(), source })?;
    let mut terminate = signal(SignalKind::terminate()).map_err(GatewayError::Signals)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(GatewayError::Signals)?;

    let events = services.host().subscribe();
    let (dispatcher, requests) = Dispatcher::channel();
    let timezone = scheduling::timezone(services.timezone().as_deref());
    // Kept for the gateway's life: dropping it lets another process schedule the jobs. In a
    // cluster, the scheduler runs on the kernel that leads (see `cluster::lead_scheduling`).
    let scheduler = match &cluster {
        None => Scheduler::start(services.workspace(), timezone, dispatcher.clone()),
        Some(_) => None,
    };
    let manager = Rc::new(SessionManager::new(services.clone()));
    let mut extra = manager.memory().tools();
    match &cluster {
        None => extra.extend(cron_where_jobs_run(services.workspace(), timezone, scheduler.as_ref())),
        // The leader's scheduler notices jobs written to the file.
        Some(_) => extra.push(scheduling::cron_tool(services.workspace(), timezone, None)),
    }
    let reach = Reach { dispatcher: Some(dispatcher.clone()), channels: true, extra };
    services.install_builtins(builtin_tools(&services, reach));
    let notices = dispatcher.clone();
    services.install_owner_notice(Box::new(move |text| {
        notices.send_and_forget(Target::LastActive, text);
    }));
    manager.memory().dream.do_send(StartSchedule);
    #[cfg(feature = "cluster")]
    if let Some(member) = &cluster {
        let heartbeat = settings.heartbeat.enabled.then(|| settings.heartbeat.clone());
        let scheduling = cluster::Scheduling { timezone, dispatcher: dispatcher.clone(), heartbeat };
        actix::spawn(cluster::lead_scheduling(member.clone(), services.clone(), scheduling));
    }
    if settings.heartbeat.enabled && cluster.is_none() {
        let workspace = services.workspace().to_path_buf();
        let engine = services.engine().clone();
        HeartbeatActor::new(workspace, &settings.heartbeat, engine, dispatcher.clone(), services.clone()).start();
    }
    let channels: Vec<String> = settings.channels.iter().map(|c| c.name.clone()).collect();
    let (address_host, address_port, web_ui) = (settings.host.clone(), settings.port, settings.web_ui);
    let ui_secret = match (&settings.token, web_ui) {
        (Some(token), _) => token.clone(),
        (None, true) => local_secrets::LocalSecrets::new(services.data_dir()).get_or_create(Surface::WebUi)?.0,
        (None, false) => String::new(),
    };
    let outbox = router::outbox_file::OutboxFile::open(&services.data_dir().join(router::outbox_file::FILE_NAME));
    let router = Router::new(manager.clone(), services.clone(), settings, access, retry_waits, Box::new(outbox));
    actix::spawn(router.clone().run(events));
    #[cfg(feature = "cluster")]
    if let Some(member) = &cluster {
        let exclusive = member.channels().take_exclusive();
        // Only channels run on one kernel at a time go through the streams.
        if !exclusive.is_empty() {
            router.relay_through(Rc::new(cluster::ClusterRelay::new(member.clone())));
            actix::spawn(cluster::read_relayed_messages(member.clone(), router.clone()));
            actix::spawn(cluster::take_waiting_sessions(member.clone()));
        }
        for spec in exclusive {
            actix::spawn(cluster::serve_channel(member.clone(), services.clone(), router.clone(), spec));
        }
    }
    actix::spawn(router.clone().serve_requests(requests));
    actix::spawn(router.clone().tell_owner_of_refusals());
    if let Some(reload) = reload {
        actix::spawn(reload::watch_config(reload, router.clone(), services.clone()));
    }
    let health_services = services.clone();
    let cluster_report = cluster_report(cluster.as_ref());
    let health_cluster = cluster_report.clone();
    let report = move || {
        let mut report = health::report(health_services.host(), started);
        if let Some(cluster) = &health_cluster {
            report["cluster"] = cluster();
        }
        report
    };
    let source = health::HealthSource { report: Rc::new(report), started };
    let ui = web_ui.then(|| web::WebUi {
        services: services.clone(),
        router: router.clone(),
        guard: web::auth::Guard::new(
            &address_host,
            address_port,
            ui_secret,
            web::login::LoginCodes::new(services.data_dir()),
        ),
        cron: cron_handle(&services, timezone, scheduler.as_ref()),
        scheduler: scheduler.as_ref().map(|s| s.actor().clone()),
        cluster: cluster_report.clone(),
    });
    actix::spawn(web::serve(listener, source, ui));
    tracing::info!(%address, channels = ?channels, "gateway running; GET /health for its state");
    // Plugins first: a resumed turn may call tools, and its reply goes to a channel.
    services.host().wait_settled(PLUGIN_START_LIMIT).await;
    match &cluster {
        None => resume_unanswered(&services, &router, &channels),
        // Another kernel may own those sessions: they are taken over when nobody does.
        Some(_) => router.resumed(),
    }
    #[cfg(feature = "cluster")]
    if let Some(member) = &cluster {
        let orphans = cluster::take_over_orphans(member.clone(), services.clone(), router.clone(), channels.clone());
        actix::spawn(orphans);
    }
    router.resend_left_pending();

    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
    }
    router.stop_accepting();
    let deadline = Instant::now() + DRAIN_LIMIT;
    while router.in_flight() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if router.in_flight() > 0 {
        tracing::warn!(turns = router.in_flight(), "turns still running at shutdown; they resume on the next start");
    }
    #[cfg(feature = "cluster")]
    if let Some(member) = &cluster {
        member.leave().await;
        member.channels().stop_taking();
    }
    if router.undelivered() > 0 {
        tracing::warn!(replies = router.undelivered(), "replies not yet delivered are resent at the next start");
    }
    services.host().shutdown().await;
    // After the plugins stopped: another kernel starts them at once, never beside them.
    #[cfg(feature = "cluster")]
    if let Some(member) = &cluster {
        member.channels().release_all().await;
    }
    // After the plugins: an acknowledgement that came in while they stopped is on disk too.
    if let Ok(Err(error)) = router.outbox_flushed().await {
        tracing::warn!(%error, "the outbox's last changes may be lost; the next start may resend a delivered reply");
    }
    drop(scheduler);
    Ok(())
}

/// The cluster's part of `/health`, in cluster mode.
fn cluster_report(cluster: Option<&ClusterMember>) -> Option<Rc<dyn Fn() -> serde_json::Value>> {
    #[cfg(feature = "cluster")]
    {
        let member = cluster?.clone();
        Some(Rc::new(move || member.report()))
    }
    #[cfg(not(feature = "cluster"))]
    cluster.map(|never| match *never {})
}

/// The cron handle of the web UI: through the scheduler when this gateway runs it.
fn cron_handle(services: &Services, timezone: crate::cron::Tz, scheduler: Option<&Scheduler>) -> CronHandle {
    let handle = CronHandle::new(services.workspace(), timezone);
    match scheduler {
        Some(scheduler) => handle.with_actor(scheduler.actor().clone()),
        None => handle,
    }
}

/// Answers messages a previous run persisted but never answered.
fn resume_unanswered(services: &Services, router: &Rc<Router>, channels: &[String]) {
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    for key in resume::unanswered(services.sessions().as_ref(), &names) {
        router.resume_session(key);
    }
    router.resumed();
}
