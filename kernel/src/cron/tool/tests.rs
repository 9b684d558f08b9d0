//! Tests of the `cron` tool: jobs bound to the calling chat, refusals the model can read,
//! and both ways of storing (through the file, through a scheduler in the same process).

use oxibot_proto::CallContext;
use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;

use super::*;
use crate::cron::actor::{CronActor, ListJobs};
use crate::cron::job::ScheduleKind;
use crate::cron::storage::JobStorage as _;
use crate::cron::store::JobStore;
use crate::testing::TempDir;

fn chat(key: &str) -> BuiltinContext {
    let (channel, chat_id) = key.split_once(':').unwrap();
    BuiltinContext {
        call: CallContext {
            session_key: Some(key.into()),
            channel: Some(channel.into()),
            chat_id: Some(chat_id.into()),
            ..CallContext::default()
        },
        source: TurnSource::User,
        ..BuiltinContext::default()
    }
}

fn tool(dir: &TempDir) -> CronTool {
    CronTool::new(CronHandle::new(dir.path(), chrono_tz::Europe::Berlin))
}

async fn call(tool: &CronTool, args: Value, context: &BuiltinContext) -> ToolReply {
    tool.call(args, context).await
}

fn id_in(reply: &ToolReply) -> String {
    let start = reply.content.find("id: ").unwrap() + 4;
    reply.content[start..start + 8].to_owned()
}

#[tokio::test]
async fn an_added_job_runs_in_the_calling_chat_and_can_be_listed_and_removed() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let telegram = chat("telegram:42");
    let args =
        json!({"action": "add", "message": "Remind me to stretch", "every_seconds": 3600, "cron_expr": "", "at": null});
    let added = call(&tool, args, &telegram).await;
    assert!(!added.is_error, "{}", added.content);
    assert!(added.content.contains("every 1h") && added.content.contains("next run"), "{}", added.content);
    let id = id_in(&added);
    let stored = JobStore::new(dir.path()).load().unwrap().jobs;
    let target = stored[0].payload.target().unwrap();
    assert_eq!(
        (target.session_key.as_str(), target.channel.as_str(), target.chat_id.as_str()),
        ("telegram:42", "telegram", "42")
    );
    assert_eq!(stored[0].name, "Remind me to stretch");
    let listed = call(&tool, json!({"action": "list"}), &telegram).await;
    assert!(listed.content.contains(&id) && listed.content.contains("every 1h"), "{}", listed.content);
    let removed = call(&tool, json!({"action": "remove", "job_id": id}), &telegram).await;
    assert!(!removed.is_error, "{}", removed.content);
    assert_eq!(call(&tool, json!({"action": "list"}), &telegram).await.content, "No scheduled jobs.");
}

#[tokio::test]
async fn a_chat_sees_and_removes_only_its_own_jobs() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let added = call(&tool, json!({"action": "add", "message": "mine", "every_seconds": 60}), &chat("slack:C1")).await;
    let id = id_in(&added);
    let other = chat("telegram:7");
    assert_eq!(call(&tool, json!({"action": "list"}), &other).await.content, "No scheduled jobs.");
    let refused = call(&tool, json!({"action": "remove", "job_id": id}), &other).await;
    assert!(refused.is_error && refused.content.contains("not found"), "{}", refused.content);
    assert_eq!(JobStore::new(dir.path()).load().unwrap().jobs.len(), 1);
}

#[tokio::test]
async fn a_one_shot_time_without_an_offset_is_read_in_the_configured_timezone_and_deleted_after_its_run() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let added =
        call(&tool, json!({"action": "add", "message": "call mum", "at": "2099-07-01T10:30:00"}), &chat("cli:direct"))
            .await;
    assert!(!added.is_error, "{}", added.content);
    let job = &JobStore::new(dir.path()).load().unwrap().jobs[0];
    assert_eq!(job.schedule.kind, ScheduleKind::At);
    let expected = chrono::DateTime::parse_from_rfc3339("2099-07-01T10:30:00+02:00").unwrap().timestamp_millis();
    assert_eq!(job.schedule.at_ms, Some(expected));
    assert!(job.delete_after_run);
    assert!(added.content.contains("2099-07-01 10:30 CEST"), "{}", added.content);
}

#[tokio::test]
async fn a_cron_expression_keeps_its_timezone_or_gets_the_configured_one() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let context = chat("cli:direct");
    call(
        &tool,
        json!({"action": "add", "message": "a", "cron_expr": "0 9 * * 1-5", "tz": "America/New_York"}),
        &context,
    )
    .await;
    call(&tool, json!({"action": "add", "message": "b", "cron_expr": "0 9 * * 1-5"}), &context).await;
    let zones: Vec<Option<String>> =
        JobStore::new(dir.path()).load().unwrap().jobs.into_iter().map(|j| j.schedule.tz).collect();
    assert_eq!(zones, [Some("America/New_York".into()), Some("Europe/Berlin".into())]);
}

#[tokio::test]
async fn bad_input_is_an_error_the_model_can_read_and_nothing_is_stored() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let context = chat("cli:direct");
    let cases = [
        (
            json!({"action": "add", "message": "x", "cron_expr": "0 9 * * *", "tz": "Mars/Base"}),
            "unknown timezone 'Mars/Base'",
        ),
        (json!({"action": "add", "message": "x", "cron_expr": "0 9 * *"}), "invalid cron expression"),
        (json!({"action": "add", "message": "x", "at": "2001-01-01T00:00:00"}), "in the past"),
        (json!({"action": "add", "message": "x", "at": "next tuesday"}), "not an ISO date-time"),
        (json!({"action": "add", "message": "x"}), "no schedule given"),
        (
            json!({"action": "add", "message": "x", "every_seconds": 60, "at": "2099-01-01T00:00:00"}),
            "several schedules",
        ),
        (json!({"action": "add", "message": "x", "in": "soon"}), "not a delay such as 30s"),
        (json!({"action": "add", "message": "x", "at": "2099-01-01T09:00", "tz": "Mars/Base"}), "unknown timezone"),
        (json!({"action": "add", "message": "x", "every_seconds": "often"}), "whole number of seconds"),
        (json!({"action": "add", "message": "  ", "every_seconds": 60}), "needs a non-empty 'message'"),
        (json!({"action": "remove"}), "needs 'job_id'"),
        (json!({"action": "pause"}), "unknown action 'pause'"),
        (json!({}), "'action' is required"),
    ];
    for (args, expected) in cases {
        let reply = call(&tool, args.clone(), &context).await;
        assert!(reply.is_error, "{args} was accepted: {}", reply.content);
        assert!(reply.content.starts_with("Error: ") && reply.content.contains(expected), "{args}: {}", reply.content);
    }
    assert!(JobStore::new(dir.path()).load().unwrap().jobs.is_empty());
}

#[tokio::test]
async fn no_job_is_added_from_inside_a_cron_run() {
    let dir = TempDir::new("cron-tool");
    let tool = tool(&dir);
    let mut context = chat("telegram:42");
    context.source = TurnSource::Cron;
    let reply = call(&tool, json!({"action": "add", "message": "again", "every_seconds": 60}), &context).await;
    assert!(reply.is_error);
    assert!(reply.content.contains("cannot schedule new jobs from inside a cron run"), "{}", reply.content);
    assert!(!call(&tool, json!({"action": "list"}), &context).await.is_error, "listing is fine");
}

#[test]
fn with_a_scheduler_in_the_process_the_tool_tells_it_directly() {
    actix::System::new().block_on(async {
        let dir = TempDir::new("cron-tool");
        let (fire, _fires) = unbounded_channel();
        let actor = CronActor::start(dir.path(), chrono_tz::UTC, fire);
        let tool = CronTool::new(CronHandle::new(dir.path(), chrono_tz::UTC).with_actor(actor.clone()));
        let reply =
            call(&tool, json!({"action": "add", "message": "hi", "every_seconds": 60}), &chat("cli:direct")).await;
        assert!(!reply.is_error, "{}", reply.content);
        let jobs = actor.send(ListJobs).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, id_in(&reply));
    });
}

#[test]
fn the_spec_carries_nanobots_name_and_parameters() {
    let dir = TempDir::new("cron-tool");
    let spec = tool(&dir).spec();
    assert_eq!(spec.name, "cron");
    let properties = spec.parameters["properties"].as_object().unwrap();
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["action", "at", "cron_expr", "every_seconds", "in", "job_id", "message", "name", "tz"]);
    assert!(spec.description.contains("Europe/Berlin"));
}
