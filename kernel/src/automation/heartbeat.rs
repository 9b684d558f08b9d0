//! The heartbeat: every `gateway.heartbeat.intervalS` seconds the gateway reads
//! `HEARTBEAT.md`. Without an active task nothing else happens — no model call, so an idle
//! heartbeat costs nothing. With tasks, a turn runs them in the `heartbeat` session, then one
//! small model call decides whether the result is worth telling; if so it goes to the chat a
//! person wrote from most recently. Any failure stays silent (logged, never sent).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix::prelude::*;
use oxibot_proto::ToolSpec;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::dispatch::{Dispatcher, RunRequest, Target};
use crate::budget::{self, Breach};
use crate::message::{ChatMessage, Role};
use crate::provider::{ChatRequest, ChatResponse};
use crate::services::Services;
use crate::session::SessionKey;
use crate::telemetry::genai::{Attribution, traced_chat};
use crate::turn::Engine;
use crate::turn::builtin::TurnSource;
use crate::usage::{UsageEntry, UsageStore};

/// The session heartbeat turns run in.
pub const SESSION: &str = "heartbeat:direct";
/// How often the heartbeat comes by default (nanobot's 30 minutes).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// The message a heartbeat turn answers.
const RUN_PROMPT: &str = include_str!("../../../templates/agent/heartbeat.md");
/// System prompt of the notify-or-not decision.
const NOTIFY_PROMPT: &str = include_str!("../../../templates/agent/heartbeat_notify.md");
/// Most tokens of the decision's answer.
const DECISION_TOKENS: u32 = 1024;

/// `gateway.heartbeat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSettings {
    /// Whether the heartbeat runs (`enabled`, default true).
    pub enabled: bool,
    /// Time between beats (`intervalS`, default 1800).
    pub interval: Duration,
    /// The model of the beat's turn and decision (`model`; default: the agent's), e.g. a
    /// cheaper one; the agent's fallback models follow it.
    pub model: Option<String>,
}

impl Default for HeartbeatSettings {
    fn default() -> Self {
        HeartbeatSettings { enabled: true, interval: DEFAULT_INTERVAL, model: None }
    }
}

impl HeartbeatSettings {
    /// Reads the `gateway.heartbeat` section (absent: the defaults); an error names the key.
    pub fn from_section(section: Option<&Value>) -> Result<HeartbeatSettings, (String, String)> {
        let mut settings = HeartbeatSettings::default();
        let Some(section) = section.filter(|s| !s.is_null()) else { return Ok(settings) };
        let problem = |key: &str, text: String| (format!("gateway.heartbeat.{key}"), text);
        let section =
            section.as_object().ok_or_else(|| ("gateway.heartbeat".to_owned(), "expected an object".into()))?;
        match section.get("enabled") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(on)) => settings.enabled = *on,
            Some(other) => return Err(problem("enabled", format!("expected true or false, got {other}"))),
        }
        match section.get("model") {
            None | Some(Value::Null) => {}
            Some(Value::String(model)) if !model.trim().is_empty() => settings.model = Some(model.trim().to_owned()),
            Some(other) => return Err(problem("model", format!("expected a model name, got {other}"))),
        }
        match section.get("intervalS").or_else(|| section.get("interval_s")) {
            None | Some(Value::Null) => {}
            Some(value) => match value.as_u64().filter(|s| *s >= 1) {
                Some(seconds) => settings.interval = Duration::from_secs(seconds),
                None => {
                    return Err(problem("intervalS", format!("expected a whole number of seconds ≥ 1, got {value}")));
                }
            },
        }
        Ok(settings)
    }
}

/// The active tasks of a `HEARTBEAT.md`: the list items under a heading that names tasks (or,
/// without such a heading, anywhere), minus empty and ticked-off (`[x]`) items and anything
/// inside `<!-- -->` comments.
pub fn active_tasks(text: &str) -> Vec<String> {
    let text = without_comments(text);
    let has_task_heading = text.lines().any(is_task_heading);
    let mut in_tasks = !has_task_heading;
    let mut tasks = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            in_tasks = !has_task_heading || is_task_heading(line);
            continue;
        }
        if !in_tasks {
            continue;
        }
        let Some(item) = list_item(trimmed) else { continue };
        let lowered = item.to_lowercase();
        if lowered.starts_with("[x]") {
            continue;
        }
        let item = item.strip_prefix("[ ]").unwrap_or(item).trim();
        if !item.is_empty() {
            tasks.push(item.to_owned());
        }
    }
    tasks
}

fn is_task_heading(line: &str) -> bool {
    let line = line.trim();
    line.starts_with('#') && line.trim_start_matches('#').trim().to_lowercase().contains("task")
}

/// The text of a Markdown list item (`- `, `* `, `+ `, `1. `), if `line` is one.
fn list_item(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest);
        }
    }
    if line == "-" || line == "*" || line == "+" {
        return Some("");
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        return line[digits..].strip_prefix(". ").or_else(|| line[digits..].strip_prefix(") "));
    }
    None
}

fn without_comments(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        kept.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    kept.push_str(rest);
    kept
}

/// Runs the heartbeat on its interval.
pub struct HeartbeatActor {
    workspace: PathBuf,
    interval: Duration,
    /// `gateway.heartbeat.model`, when set.
    model: Option<String>,
    engine: Arc<Engine>,
    dispatcher: Dispatcher,
    /// The usage log (the notify decision's tokens; the beat's turn records its own) and the
    /// budgets checked before a beat.
    services: Arc<Services>,
    /// Set while a beat runs: a slow beat is never overlapped by the next one.
    busy: Arc<AtomicBool>,
}

impl HeartbeatActor {
    /// A heartbeat over `workspace`'s `HEARTBEAT.md`, asking `dispatcher` for its turns.
    pub fn new(
        workspace: PathBuf,
        settings: &HeartbeatSettings,
        engine: Arc<Engine>,
        dispatcher: Dispatcher,
        services: Arc<Services>,
    ) -> HeartbeatActor {
        let (interval, model) = (settings.interval, settings.model.clone());
        HeartbeatActor { workspace, interval, model, engine, dispatcher, services, busy: Arc::default() }
    }
}

impl Handler<crate::cron::actor::Halt> for HeartbeatActor {
    type Result = ();

    fn handle(&mut self, _: crate::cron::actor::Halt, ctx: &mut Context<Self>) {
        tracing::info!("heartbeat stopped");
        ctx.stop();
    }
}

impl Actor for HeartbeatActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(every = ?self.interval, "heartbeat running");
        ctx.run_interval(self.interval, |actor, ctx| {
            if actor.busy.swap(true, Ordering::AcqRel) {
                return tracing::debug!("the previous heartbeat is still running; skipping this one");
            }
            let beat = Beat {
                file: actor.workspace.join("HEARTBEAT.md"),
                engine: actor.engine.clone(),
                dispatcher: actor.dispatcher.clone(),
                services: actor.services.clone(),
                model: actor.model.clone(),
            };
            let busy = actor.busy.clone();
            ctx.spawn(
                async move {
                    beat.run().await;
                    busy.store(false, Ordering::Release);
                }
                .into_actor(actor),
            );
        });
    }
}

/// One heartbeat.
struct Beat {
    file: PathBuf,
    engine: Arc<Engine>,
    dispatcher: Dispatcher,
    services: Arc<Services>,
    model: Option<String>,
}

impl Beat {
    async fn run(self) {
        let text = match tokio::fs::read_to_string(&self.file).await {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => return tracing::warn!(file = %self.file.display(), %error, "cannot read the heartbeat file"),
        };
        let tasks = active_tasks(&text);
        if tasks.is_empty() {
            return tracing::debug!("heartbeat: no active task");
        }
        tracing::info!(tasks = tasks.len(), "heartbeat: running the active tasks");
        if let Some(breach) = self.over_budget() {
            return self.tell_capped(&breach).await;
        }
        let list: String = tasks.iter().map(|t| format!("- {t}\n")).collect();
        let Some(report) = self.run_tasks(&list).await else { return };
        match self.decide(&list, &report).await {
            Ok(Some(message)) => {
                if let Err(error) = self.dispatcher.send(Target::LastActive, message, Vec::new(), None).await {
                    tracing::warn!(%error, "heartbeat: the notification was not delivered");
                }
            }
            Ok(None) => tracing::info!("heartbeat: nothing worth telling"),
            Err(error) => tracing::warn!(%error, "heartbeat: the notify decision failed; staying silent"),
        }
    }

    /// The heartbeat turn's report, or `None` (logged) when it failed.
    async fn run_tasks(&self, list: &str) -> Option<String> {
        let (done, answer) = oneshot::channel();
        let request = RunRequest {
            key: SessionKey::from(SESSION),
            text: RUN_PROMPT.replace("{tasks}", list.trim_end()),
            source: TurnSource::Heartbeat,
            job: None,
            model: self.model.clone(),
            deliver: false,
            done: Some(done),
        };
        if !self.dispatcher.run(request) {
            return None;
        }
        match answer.await {
            Ok(Ok(report)) if !report.trim().is_empty() => Some(report),
            Ok(Ok(_)) => None,
            Ok(Err(error)) => {
                tracing::warn!(%error, "heartbeat: the turn failed");
                None
            }
            Err(_) => None,
        }
    }

    /// Asks the model whether `report` is worth a message; the message when it is.
    async fn decide(&self, tasks: &str, report: &str) -> Result<Option<String>, String> {
        let request = ChatRequest {
            model: self.model.clone().unwrap_or_else(|| self.engine.spec().model.clone()),
            messages: crate::message::shared([
                ChatMessage::text(Role::System, NOTIFY_PROMPT),
                ChatMessage::text(Role::User, format!("Tasks checked:\n{tasks}\nResult:\n{report}")),
            ]),
            tools: vec![notify_tool()].into(),
            max_tokens: DECISION_TOKENS,
            temperature: self.engine.spec().temperature,
            reasoning_effort: None,
        };
        let started = std::time::Instant::now();
        let provider = self.engine.provider();
        let attribution = Attribution::new("heartbeat", SESSION);
        let mut no_stream = |_| {};
        let call = provider.chat(&request, false, &mut no_stream);
        let response = traced_chat(&attribution, &request.model, provider.name(), &request.messages, call)
            .await
            .map_err(|e| e.to_string())?;
        self.record_decision(&request.model, &response, started.elapsed());
        let Some(call) = response.tool_calls.iter().find(|c| c.function.name == "notify") else {
            return Err("the model answered without calling notify".to_owned());
        };
        let arguments: Value = serde_json::from_str(&call.function.arguments).map_err(|e| e.to_string())?;
        if arguments.get("notify").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        let message = arguments.get("message").and_then(Value::as_str).map(str::trim).filter(|m| !m.is_empty());
        Ok(Some(message.unwrap_or(report).to_owned()))
    }
}

impl Beat {
    /// The cap of `agents.defaults.budgets` the heartbeat has reached, if any.
    fn over_budget(&self) -> Option<Breach> {
        let settings = self.services.settings();
        let budgets = budget::budgets(settings.config.agents.defaults.extra.get("budgets")).ok()?;
        let today = chrono::Utc::now().date_naive();
        budgets.breach(&self.services.usage(), &settings.prices_or_none(), today, "heartbeat", None)
    }

    /// Tells the last active chat, once per cap and period, that the heartbeat is capped.
    async fn tell_capped(&self, breach: &Breach) {
        tracing::warn!(scope = %breach.scope, setting = breach.setting, "heartbeat: over budget; the model is not called");
        if breach.first_notice(self.services.data_dir())
            && let Err(error) = self.dispatcher.send(Target::LastActive, breach.message(), Vec::new(), None).await
        {
            tracing::warn!(%error, "heartbeat: the budget notice was not delivered");
        }
    }

    /// The notify decision's tokens, attributed to the heartbeat (a failure to write is logged).
    fn record_decision(&self, model: &str, response: &ChatResponse, took: Duration) {
        let now = chrono::Utc::now();
        let entry = UsageEntry {
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            session: SESSION.to_owned(),
            model: model.to_owned(),
            prompt: response.usage.prompt_tokens,
            cached: response.usage.cached_tokens,
            completion: response.usage.completion_tokens,
            reasoning: response.usage.reasoning_tokens,
            calls: 1,
            source: Some("heartbeat".to_owned()),
            ms: Some(crate::usage::millis(took)),
            call_ms: vec![crate::usage::millis(took)],
            ..UsageEntry::default()
        };
        if let Err(error) = self.services.usage().record(&entry, now) {
            tracing::warn!(%error, "heartbeat: cannot record token usage");
        }
    }
}

fn notify_tool() -> ToolSpec {
    ToolSpec {
        name: "notify".to_owned(),
        description: "Report whether the user should be told about this result, and what to say.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "notify": {"type": "boolean", "description": "true to send a message to the user, false to stay quiet"},
                "message": {"type": "string", "description": "The message to send (when notify is true)"}
            },
            "required": ["notify"]
        }),
        read_only: true,
        exclusive: false,
        timeout_secs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_onboarding_template_has_no_active_task() {
        let template = include_str!("../../../templates/HEARTBEAT.md");
        assert_eq!(active_tasks(template), Vec::<String>::new());
    }

    #[test]
    fn tasks_are_the_open_list_items_under_the_tasks_heading() {
        let text = "# Heartbeat\n\n- not a task: above the heading\n\n## Tasks\n\n- Check the disk\n* [ ] Water the plants\n- [x] Done already\n-\n<!-- - commented out -->\n1. Read the news\n\n## Notes\n- not a task either\n";
        assert_eq!(active_tasks(text), ["Check the disk", "Water the plants", "Read the news"]);
    }

    #[test]
    fn without_a_tasks_heading_every_open_item_counts() {
        assert_eq!(active_tasks("- ping the server\n- [X] old\n"), ["ping the server"]);
        assert!(active_tasks("Just some prose.\n\nNo list here.").is_empty());
    }

    #[test]
    fn settings_default_to_every_thirty_minutes_and_name_a_bad_key() {
        assert_eq!(HeartbeatSettings::from_section(None), Ok(HeartbeatSettings::default()));
        let settings = HeartbeatSettings::from_section(Some(&json!({"intervalS": 5, "enabled": false}))).unwrap();
        assert_eq!(settings, HeartbeatSettings { enabled: false, interval: Duration::from_secs(5), model: None });
        let (key, problem) = HeartbeatSettings::from_section(Some(&json!({"intervalS": "often"}))).unwrap_err();
        assert_eq!(key, "gateway.heartbeat.intervalS");
        assert!(problem.contains("whole number of seconds"), "{problem}");
    }
}
