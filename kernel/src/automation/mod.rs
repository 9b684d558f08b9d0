//! Automation: the assistant acting on its own — messages it sends unprompted, turns the
//! kernel starts itself (scheduled jobs, the heartbeat, helpers' results).
//!
//! Code map: [`dispatch`] is how tools and schedulers ask whoever runs the kernel (the
//! gateway, the interactive agent) to run a turn or send a message; [`message`] and
//! [`spawn`] are built-in tools (a helper runs as a [`supervised::SupervisedJob`]);
//! [`heartbeat`] is the periodic check of `HEARTBEAT.md`; [`scheduling`] runs due cron jobs
//! as turns. [`builtin_tools`] assembles the set a kernel offers, from what works where it
//! runs.

pub mod dispatch;
pub mod heartbeat;
pub mod message;
pub mod scheduling;
pub mod spawn;
pub mod supervised;

use std::sync::Arc;

use crate::meter::Meter;
use crate::paths;
use crate::services::Services;
use crate::turn::builtin::{BuiltinTool, BuiltinTools};
use dispatch::Dispatcher;
use message::MessageTool;
use spawn::{HelperSettings, SpawnTool};

/// What the kernel running the tools can do, which decides the built-ins it offers.
#[derive(Clone, Default)]
pub struct Reach {
    /// Runs turns the kernel starts itself (helpers' reports come back); without it, `spawn`
    /// always waits for its helper.
    pub dispatcher: Option<Dispatcher>,
    /// Chat channels can deliver (`message` is offered).
    pub channels: bool,
    /// More built-ins that run here (`cron`, when its jobs will run).
    pub extra: Vec<Arc<dyn BuiltinTool>>,
}

/// The `cron` tool, when a job added now will run: this process runs the workspace's
/// scheduler, or another one does (a gateway next to a one-shot `oxibot agent -m`).
pub fn cron_where_jobs_run(
    workspace: &std::path::Path,
    timezone: crate::cron::Tz,
    scheduler: Option<&scheduling::Scheduler>,
) -> Vec<Arc<dyn BuiltinTool>> {
    if scheduler.is_some() || scheduling::scheduler_running(workspace) {
        vec![scheduling::cron_tool(workspace, timezone, scheduler)]
    } else {
        Vec::new()
    }
}

/// The built-in tools of a kernel with `reach`: `message` where channels deliver, `spawn`
/// everywhere, then `reach.extra`. Helpers get those of `reach.extra` they may use (the
/// `memory` tool, never `cron`).
pub fn builtin_tools(services: &Services, reach: Reach) -> BuiltinTools {
    let mut tools: Vec<Arc<dyn BuiltinTool>> = Vec::new();
    if let (true, Some(dispatcher)) = (reach.channels, &reach.dispatcher) {
        tools.push(Arc::new(MessageTool::new(dispatcher.clone(), Some(paths::media_dir()))));
    }
    let helpers = HelperSettings {
        engine: services.engine().clone(),
        tools: BuiltinTools::new(reach.extra.clone()).without(&spawn::NOT_FOR_HELPERS),
        max_concurrent: services.settings().config.agents.defaults.max_concurrent_subagents,
        dispatcher: reach.dispatcher,
        timezone: services.timezone(),
        model: subagent_model(services),
        meter: helper_meter(services),
    };
    tools.push(Arc::new(SpawnTool::new(helpers)));
    tools.extend(reach.extra);
    BuiltinTools::new(tools)
}

/// `agents.defaults.subagentModel`, the model helpers use instead of the agent's.
fn subagent_model(services: &Services) -> Option<String> {
    let settings = services.settings();
    let model = settings.config.agents.defaults.extra.get("subagentModel").and_then(serde_json::Value::as_str);
    model.map(str::trim).filter(|model| !model.is_empty()).map(str::to_owned)
}

/// Meters for helpers, reading the caps and prices in force before each call.
fn helper_meter(services: &Services) -> spawn::MeterFor {
    let settings = services.settings_handle();
    let data_dir = services.data_dir().to_path_buf();
    Arc::new(move |parent: &str, model: &str| {
        Meter::per_call(&settings.current(), &data_dir, parent, model, "subagent").live(settings.clone())
    })
}
