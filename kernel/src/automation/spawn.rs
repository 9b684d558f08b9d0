//! The `spawn` built-in tool: background helpers (subagents). A helper is a separate turn on
//! one task, with a restricted tool set (no `spawn`, `message` or `cron`) and its own
//! iteration cap, run as a [`SupervisedJob`] so a helper that panics or hangs is reported and
//! never takes its session down. In the background (the default) its report comes back into
//! the session that started it as a kernel-written message, which starts a follow-up turn;
//! with `wait: true` the report is the tool's result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix::prelude::*;
use oxibot_proto::ToolSpec;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::dispatch::{Dispatcher, RunRequest};
use super::supervised::{JobFailure, StopJob, SupervisedJob, Work};
use crate::context::ContextBuilder;
use crate::message::{ChatMessage, Role};
use crate::meter::Meter;
use crate::session::SessionKey;
use crate::turn::Engine;
use crate::turn::builtin::{BuiltinContext, BuiltinTool, BuiltinTools, ToolFuture, ToolReply, TurnSource};
use crate::turn::hooks::{CompositeHook, StripThinking};
use crate::turn::runner::Turn;

/// The tool's name, as models know it.
pub const NAME: &str = "spawn";
/// Built-in tools a helper's turn never offers.
pub const NOT_FOR_HELPERS: [&str; 3] = ["spawn", "message", "cron"];
/// Longest a helper may run before it is stopped and reported as hung.
pub const HELPER_TIME_LIMIT: Duration = Duration::from_secs(30 * 60);

/// The helper's system prompt.
const HELPER_PROMPT: &str = include_str!("../../../templates/agent/subagent.md");
/// The message that brings a helper's report back into its session.
const RESULT_NOTICE: &str = include_str!("../../../templates/agent/subagent_result.md");
/// Characters of the task kept in a default label.
const LABEL_CHARS: usize = 30;

/// What every helper runs with.
pub struct HelperSettings {
    /// The model, the tools and the turn settings.
    pub engine: Arc<Engine>,
    /// Built-in tools a helper may use (already without [`NOT_FOR_HELPERS`]).
    pub tools: BuiltinTools,
    /// Most helpers running at once (others wait for a place).
    pub max_concurrent: usize,
    /// Where background reports go back into their sessions; without one, every helper
    /// runs as if `wait` were set.
    pub dispatcher: Option<Dispatcher>,
    /// The configured IANA timezone, for the time the helper is shown.
    pub timezone: Option<String>,
    /// The model helpers use instead of the agent's (`agents.defaults.subagentModel`).
    pub model: Option<String>,
    /// A meter for one helper's calls, given its parent session and model: caps checked
    /// before each call, each call written to the usage log as `subagent`.
    pub meter: MeterFor,
}

/// Makes the meter of one helper from its parent session and its model.
pub type MeterFor = Arc<dyn Fn(&str, &str) -> Meter + Send + Sync>;

/// The `spawn` tool and the helpers it runs.
pub struct SpawnTool {
    shared: Arc<Helpers>,
}

struct Helpers {
    settings: HelperSettings,
    places: Arc<Semaphore>,
    /// Running helpers by the session that started them.
    running: Mutex<HashMap<String, Vec<RunningHelper>>>,
    next_id: AtomicU64,
    limit: Duration,
}

/// A running helper: its id and its job.
type RunningHelper = (u64, Addr<SupervisedJob>);

/// One helper's task, as the model gave it.
#[derive(Debug)]
struct Task {
    text: String,
    label: String,
    wait: bool,
}

impl SpawnTool {
    /// A tool running helpers with `settings`.
    pub fn new(settings: HelperSettings) -> SpawnTool {
        SpawnTool::with_limit(settings, HELPER_TIME_LIMIT)
    }

    /// Like [`SpawnTool::new`] with another time limit per helper.
    pub fn with_limit(settings: HelperSettings, limit: Duration) -> SpawnTool {
        let places = Arc::new(Semaphore::new(settings.max_concurrent.max(1)));
        let helpers = Helpers { settings, places, running: Mutex::default(), next_id: AtomicU64::new(1), limit };
        SpawnTool { shared: Arc::new(helpers) }
    }

    async fn spawn(&self, arguments: Value, context: &BuiltinContext) -> ToolReply {
        if context.source == TurnSource::Subagent {
            return ToolReply::error("a helper cannot start helpers of its own");
        }
        let task = match Task::from_arguments(&arguments) {
            Ok(task) => task,
            Err(problem) => return ToolReply::error(problem),
        };
        let session = context.call.session_key.clone().unwrap_or_else(|| "cli:direct".to_owned());
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let work = self.shared.work(&task, context);
        let (job, outcome) = SupervisedJob::start(work, self.shared.limit);
        self.shared.register(&session, id, job);
        tracing::info!(helper = id, label = %task.label, %session, "helper started");
        let background = !task.wait && self.shared.settings.dispatcher.is_some();
        if !background {
            let result = outcome.await.unwrap_or(Err(JobFailure::Failed("the helper vanished".to_owned())));
            self.shared.unregister(&session, id);
            return match result {
                Ok(report) => ToolReply::ok(report),
                Err(failure) => ToolReply::error(format!("the helper '{}' did not finish: {failure}", task.label)),
            };
        }
        let shared = self.shared.clone();
        let label = task.label.clone();
        actix::spawn(async move {
            let result = outcome.await.unwrap_or(Err(JobFailure::Failed("the helper vanished".to_owned())));
            shared.unregister(&session, id);
            shared.report(&session, &task, result);
        });
        ToolReply::ok(format!(
            "Helper '{label}' started (id {id}). Its report comes back into this conversation when it is done; \
             you do not need to wait for it."
        ))
    }
}

impl Task {
    fn from_arguments(arguments: &Value) -> Result<Task, String> {
        let text = match arguments.get("task").and_then(Value::as_str).map(str::trim) {
            Some(text) if !text.is_empty() => text.to_owned(),
            _ => return Err("`task` is required: what the helper should do, with everything it needs to know".into()),
        };
        let label = match arguments.get("label").and_then(Value::as_str).map(str::trim) {
            Some(label) if !label.is_empty() => label.to_owned(),
            _ if text.chars().count() > LABEL_CHARS => {
                format!("{}…", text.chars().take(LABEL_CHARS).collect::<String>())
            }
            _ => text.clone(),
        };
        let wait = match arguments.get("wait") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(wait)) => *wait,
            Some(_) => return Err("`wait` must be true or false".into()),
        };
        Ok(Task { text, label, wait })
    }
}

impl Helpers {
    /// The helper's turn, waiting first for a free place.
    fn work(&self, task: &Task, context: &BuiltinContext) -> Work {
        let engine = self.settings.engine.clone();
        let model = self.settings.model.clone().unwrap_or_else(|| engine.spec().model.clone());
        let parent = context.call.session_key.clone().unwrap_or_else(|| "cli:direct".to_owned());
        let meter = (self.settings.meter)(&parent, &model);
        let attribution = meter.attribution();
        let tools = self.settings.tools.clone();
        let places = self.places.clone();
        let mut call = context.call.clone();
        call.session_key = call.session_key.or_else(|| Some("cli:direct".to_owned()));
        let workspace = call.workspace.clone();
        let channel = call.channel.clone().unwrap_or_else(|| "cli".to_owned());
        let chat_id = call.chat_id.clone().unwrap_or_else(|| "direct".to_owned());
        let runtime =
            ContextBuilder::runtime_context(&channel, &chat_id, self.settings.timezone.as_deref(), chrono::Utc::now());
        let messages = crate::message::shared([
            ChatMessage::text(Role::System, HELPER_PROMPT.replace("{workspace}", &workspace)),
            ChatMessage::text(Role::User, ContextBuilder::merge_runtime(&task.text, &runtime)),
        ]);
        Box::pin(async move {
            let _place = places.acquire_owned().await.map_err(|_| "the kernel is shutting down".to_owned())?;
            let spec = crate::turn::runner::RunSpec { model, stream: false, ..(*engine.spec()).clone() };
            let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
            let provider = engine.provider();
            let turn = Turn {
                provider: &provider,
                host: engine.host(),
                spec: &spec,
                tools: engine.offered_tools(&tools),
                context: BuiltinContext { call, source: TurnSource::Subagent, ..BuiltinContext::default() },
                builtins: tools,
                hooks: CompositeHook::new(vec![Box::new(meter), Box::new(StripThinking)]),
                events,
                // A helper's steps are not part of any conversation; its report is.
                checkpoint: Box::new(|_| Ok(())),
                journal: None,
                gate: None,
                approvals: Some(std::sync::Arc::clone(engine.approvals())),
                compact_on_overflow: false,
                session: None,
            };
            let outcome = attribution.run(turn.run(messages)).await;
            outcome.map(|outcome| outcome.content).map_err(|error| error.to_string())
        })
    }

    fn register(&self, session: &str, id: u64, job: Addr<SupervisedJob>) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(session.to_owned())
            .or_default()
            .push((id, job));
    }

    fn unregister(&self, session: &str, id: u64) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(jobs) = running.get_mut(session) {
            jobs.retain(|(job_id, _)| *job_id != id);
            if jobs.is_empty() {
                running.remove(session);
            }
        }
    }

    /// Brings a background helper's report back into its session (a stopped helper says
    /// nothing: the user asked for the stop).
    fn report(&self, session: &str, task: &Task, result: Result<String, JobFailure>) {
        let (status, text) = match result {
            Ok(report) => ("finished", report),
            Err(JobFailure::Stopped) => return tracing::info!(%session, label = %task.label, "helper stopped"),
            Err(failure) => {
                tracing::warn!(%session, label = %task.label, %failure, "helper failed");
                ("failed", format!("The helper did not finish: {failure}"))
            }
        };
        let notice = RESULT_NOTICE
            .replace("{status}", status)
            .replace("{label}", &task.label)
            .replace("{task}", &task.text)
            .replace("{result}", &text);
        let Some(dispatcher) = &self.settings.dispatcher else { return };
        let request = RunRequest {
            key: SessionKey::from(session),
            text: notice,
            source: TurnSource::System,
            job: None,
            model: None,
            deliver: true,
            done: None,
        };
        if !dispatcher.run(request) {
            tracing::warn!(%session, label = %task.label, "the helper's report arrived after shutdown began");
        }
    }
}

impl BuiltinTool for SpawnTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_owned(),
            description: "Run a task in a background helper with file, shell and web tools; it knows nothing of this \
                          chat. Its report comes here later (wait=true: as the result); tell the user."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string"},
                    "label": {"type": "string"},
                    "wait": {"type": "boolean"}
                },
                "required": ["task"]
            }),
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        }
    }

    fn call<'a>(&'a self, arguments: Value, context: &'a BuiltinContext) -> ToolFuture<'a> {
        Box::pin(self.spawn(arguments, context))
    }

    fn stop_session(&self, session_key: &str) -> usize {
        let jobs = self.shared.running.lock().unwrap_or_else(PoisonError::into_inner).remove(session_key);
        let jobs = jobs.unwrap_or_default();
        for (_, job) in &jobs {
            job.do_send(StopJob);
        }
        jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_needs_its_text_and_gets_a_short_label() {
        let task =
            Task::from_arguments(&json!({"task": "Read every file under notes/ and list open questions"})).unwrap();
        assert_eq!(task.label, "Read every file under notes/ a…");
        assert!(!task.wait);
        assert!(Task::from_arguments(&json!({"task": " "})).unwrap_err().contains("`task` is required"));
        assert!(Task::from_arguments(&json!({"task": "x", "wait": "yes"})).unwrap_err().contains("`wait`"));
        assert!(Task::from_arguments(&json!({"task": "x", "wait": true})).unwrap().wait);
    }
}
