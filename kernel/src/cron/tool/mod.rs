//! The `cron` built-in tool: nanobot's name and parameters (`action` add|list|remove,
//! `message`, `every_seconds`, `cron_expr`, `tz`, `at`, `job_id`, `name`), and `in` for a
//! delay (`2m`, `1h`). A job runs in the session that made it; a chat sees and removes only
//! its own jobs.

use oxibot_proto::ToolSpec;
use serde_json::{Value, json};

use super::handle::{CronHandle, NewJob};
use super::job::{CronJob, JobTarget};
use super::now_ms;
use super::timing::{ScheduleInput, describe, format_ms, schedule_zone};
use crate::turn::builtin::{BuiltinContext, BuiltinTool, ToolFuture, ToolReply, TurnSource};

/// The tool's name.
pub const NAME: &str = "cron";

/// The `cron` tool over a [`CronHandle`].
pub struct CronTool {
    /// Where jobs are kept and scheduled.
    handle: CronHandle,
}

impl CronTool {
    /// The tool; give it a handle with the scheduler when one runs in this process.
    pub fn new(handle: CronHandle) -> CronTool {
        CronTool { handle }
    }

    async fn add(&self, args: &Value, context: &BuiltinContext) -> ToolReply {
        if context.source == TurnSource::Cron {
            return ToolReply::error("cannot schedule new jobs from inside a cron run");
        }
        let Some(message) = text(args, "message") else {
            return ToolReply::error(
                "action 'add' needs a non-empty 'message': the instruction to carry out when the job runs",
            );
        };
        let Some(target) = target(context) else {
            return ToolReply::error("jobs can only be scheduled from a chat session");
        };
        let every_seconds = match seconds(args) {
            Ok(seconds) => seconds,
            Err(problem) => return ToolReply::error(problem),
        };
        let input = ScheduleInput {
            every_seconds,
            cron_expr: text(args, "cron_expr"),
            tz: text(args, "tz"),
            at: text(args, "at"),
            delay: text(args, "in"),
        };
        let schedule = match input.build(now_ms(), self.handle.timezone()) {
            Ok(schedule) => schedule,
            Err(error) => {
                return ToolReply::error(format!(
                    "{error} (parameters: every_seconds, cron_expr, at or in, with optional tz)"
                ));
            }
        };
        let one_shot = input.at.is_some() || input.delay.is_some();
        let new = NewJob {
            name: text(args, "name").map(str::to_owned),
            message: message.to_owned(),
            schedule,
            target,
            delete_after_run: one_shot,
            missed: None,
        };
        match self.handle.add(new).await {
            Ok(job) => ToolReply::ok(format!(
                "Created job '{}' (id: {}, {}); next run {}.",
                job.name,
                job.id,
                describe(&job.schedule, self.handle.timezone()),
                self.when(&job, job.state.next_run_at_ms)
            )),
            Err(error) => ToolReply::error(error),
        }
    }

    async fn list(&self, context: &BuiltinContext) -> ToolReply {
        let jobs = match self.handle.list().await {
            Ok(jobs) => jobs,
            Err(error) => return ToolReply::error(error),
        };
        let mine: Vec<CronJob> = jobs.into_iter().filter(|job| belongs(job, context)).collect();
        if mine.is_empty() {
            return ToolReply::ok("No scheduled jobs.");
        }
        let lines: Vec<String> = mine.iter().map(|job| self.line(job)).collect();
        ToolReply::ok(format!("Scheduled jobs:\n{}", lines.join("\n")))
    }

    async fn remove(&self, args: &Value, context: &BuiltinContext) -> ToolReply {
        let Some(id) = text(args, "job_id") else {
            return ToolReply::error("action 'remove' needs 'job_id' (see action 'list')");
        };
        let mine = match self.handle.list().await {
            Ok(jobs) => jobs.iter().any(|job| job.id == id && belongs(job, context)),
            Err(error) => return ToolReply::error(error),
        };
        if !mine {
            return ToolReply::error(format!("job {id} not found (see action 'list')"));
        }
        match self.handle.remove(id).await {
            Ok(job) => ToolReply::ok(format!("Removed job '{}' ({id}).", job.name)),
            Err(error) => ToolReply::error(error),
        }
    }

    fn line(&self, job: &CronJob) -> String {
        let tz = self.handle.timezone();
        let mut line = format!("- {} (id: {}, {})", job.name, job.id, describe(&job.schedule, tz));
        if !job.enabled {
            line.push_str(", disabled");
        }
        if let Some(next) = job.due_at() {
            line.push_str(&format!("\n  next run: {}", self.when(job, Some(next))));
        }
        if let (Some(last), Some(status)) = (job.state.last_run_at_ms, &job.state.last_status) {
            line.push_str(&format!("\n  last run: {} — {}", self.when(job, Some(last)), status.as_str()));
            if let Some(error) = &job.state.last_error {
                line.push_str(&format!(" ({error})"));
            }
        }
        line
    }

    /// A time in the job's own timezone (cron jobs) or the default one.
    fn when(&self, job: &CronJob, ms: Option<i64>) -> String {
        let tz = schedule_zone(&job.schedule, self.handle.timezone()).unwrap_or(self.handle.timezone());
        ms.map_or_else(|| "none".to_owned(), |ms| format_ms(ms, tz))
    }
}

impl BuiltinTool for CronTool {
    fn spec(&self) -> ToolSpec {
        let tz = self.handle.timezone();
        ToolSpec {
            name: NAME.to_owned(),
            description: format!(
                "Schedule a job here; when due, its message runs as a new turn (a note in a file never fires). add: \
                 message plus one of every_seconds, cron_expr, at (ISO time, {tz} unless tz) or in (delay: \"2m\", \"1h\"). \
                 remove: job_id."
            ),
            parameters: parameters(),
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        }
    }

    fn call<'a>(&'a self, arguments: Value, context: &'a BuiltinContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match text(&arguments, "action") {
                Some("add") => self.add(&arguments, context).await,
                Some("list") => self.list(context).await,
                Some("remove") => self.remove(&arguments, context).await,
                Some(other) => ToolReply::error(format!("unknown action '{other}'; use add, list or remove")),
                None => ToolReply::error("'action' is required: add, list or remove"),
            }
        })
    }
}

/// The JSON schema (flat, without `oneOf`, which some providers refuse at the root).
fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "list", "remove"]},
            "name": {"type": "string"},
            "message": {"type": "string"},
            "every_seconds": {"type": "integer"},
            "cron_expr": {"type": "string"},
            "tz": {"type": "string"},
            "at": {"type": "string"},
            "in": {"type": "string"},
            "job_id": {"type": "string"}
        },
        "required": ["action"]
    })
}

/// A non-empty string argument (models often send `""` for parameters they do not use).
fn text<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// `every_seconds` as a whole number; absent, `null`, `""` and `0` mean not given.
fn seconds(args: &Value) -> Result<Option<i64>, String> {
    let value = match args.get("every_seconds") {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let number = match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) if s.trim().is_empty() => return Ok(None),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match number {
        Some(0) => Ok(None),
        Some(n) => Ok(Some(n)),
        None => Err(format!("every_seconds must be a whole number of seconds, got {value}")),
    }
}

/// The session of the call, as a job target.
fn target(context: &BuiltinContext) -> Option<JobTarget> {
    let call = &context.call;
    let nonempty = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let key = nonempty(&call.session_key)
        .or_else(|| Some(format!("{}:{}", nonempty(&call.channel)?, nonempty(&call.chat_id)?)))?;
    let mut target = JobTarget::session(&key);
    if let Some(channel) = nonempty(&call.channel) {
        target.channel = channel;
    }
    if let Some(chat) = nonempty(&call.chat_id) {
        target.chat_id = chat;
    }
    Some(target)
}

/// Whether a job is the calling chat's (every job, when the call has no session).
fn belongs(job: &CronJob, context: &BuiltinContext) -> bool {
    match target(context) {
        Some(mine) => job.payload.target().is_some_and(|theirs| theirs.session_key == mine.session_key),
        None => true,
    }
}

#[cfg(test)]
mod tests;
