//! What spent the tokens and caps on it (issue 33), through the real `oxibot gateway` and the
//! scripted LLM: a cron job's and the heartbeat's turns attributed to them in the usage log and
//! in `oxibot usage --by source|job`; a job over its budget stops calling the model, its owner
//! is told once in the chat, and `oxibot status` says it is capped; the heartbeat's own model
//! serves the heartbeat only; a consolidation's call is counted as `consolidation`.

use futures_util::StreamExt;
use oxibot_tests::llm::{COMPLETION_TOKENS, PROMPT_TOKENS, Reply};
use oxibot_tests::procs::wait_until;
use oxibot_tests::wait::{DEADLINE, block_on};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::gateway::GatewayEnv;

/// Marks the heartbeat's notify-or-not decision (its system prompt).
const NOTIFY_DECISION: &str = "You decide whether the result of a scheduled background check";

/// A gateway with the websocket channel and a heartbeat every second.
fn gateway_env() -> GatewayEnv {
    let env =
        GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": oxibot_tests::channels::free_port()}}));
    env.edit_config(|config| config["gateway"]["heartbeat"] = json!({"intervalS": 1}));
    env
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Writes a one-shot job `id`, due a minute ago, into the workspace's jobs file.
fn write_due_job(env: &GatewayEnv, id: &str, message: &str) {
    let due = now_ms() - 60_000;
    write_job(
        env,
        json!({"id": id, "name": id, "enabled": true, "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": message, "sessionKey": "websocket:owner"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true}),
    );
}

fn write_job(env: &GatewayEnv, job: Value) {
    std::fs::create_dir_all(env.workspace().join("cron")).unwrap();
    std::fs::write(env.workspace().join("cron/jobs.json"), json!({"version": 1, "jobs": [job]}).to_string()).unwrap();
}

/// The text of the next message frame on `socket`.
async fn next_text<S>(socket: &mut S) -> String
where
    S: StreamExt<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout(DEADLINE, socket.next()).await.expect("a frame in time").unwrap().unwrap();
        let WsMessage::Text(text) = frame else { continue };
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["type"] == "message" {
            return frame["text"].as_str().unwrap_or_default().to_owned();
        }
    }
}

/// The row of `oxibot usage --by <by>` whose first column is `name`, split into columns.
fn usage_row(env: &GatewayEnv, by: &str, name: &str) -> Option<Vec<String>> {
    let out = env.command(&["usage", "--by", by]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .find(|columns| columns.first().is_some_and(|first| first == name))
}

#[test]
fn a_cron_jobs_and_the_heartbeats_tokens_are_attributed_to_them() {
    let env = gateway_env();
    write_due_job(&env, "stretch42", "Tell me to stretch");
    env.llm.push(Reply::Text("Time to stretch!".into()));
    let _gateway = env.start_with("websocket");
    assert!(wait_until(DEADLINE, || usage_row(&env, "job", "stretch42").is_some()), "the job's turn is not counted");
    let job = usage_row(&env, "job", "stretch42").unwrap();
    // JOB TURNS CALLS PROMPT CACHED COMPLETION COST HIT
    assert_eq!(job[1..4], ["1", "1", &PROMPT_TOKENS.to_string()], "{job:?}");
    assert_eq!(job[5], COMPLETION_TOKENS.to_string(), "{job:?}");

    env.llm.push(Reply::Text("The disk is fine.".into()));
    let quiet = json!({"notify": false});
    env.llm.route(NOTIFY_DECISION, Reply::ToolCalls(vec![("notify".into(), quiet.to_string())]));
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "## Tasks\n\n- Check the disk usage\n").unwrap();
    let counted = || usage_row(&env, "source", "heartbeat").is_some_and(|row| row[2] == "2");
    assert!(
        wait_until(DEADLINE, counted),
        "the heartbeat's turn and its decision: {:?}",
        usage_row(&env, "source", "heartbeat")
    );
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "## Tasks\n").unwrap();
    let cron = usage_row(&env, "source", "cron").unwrap();
    assert_eq!(cron[2], "1", "the job's one call, not the heartbeat's: {cron:?}");
    let user = usage_row(&env, "source", "user");
    assert!(user.is_none(), "nobody typed a message, yet a user turn is counted: {user:?}");
}

#[test]
fn a_job_over_its_budget_stops_calling_the_model_and_its_owner_is_told_once() {
    let port = oxibot_tests::channels::free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port}}));
    // One turn of the scripted LLM spends more than this.
    env.edit_config(|config| config["agents"]["defaults"]["budgets"] = json!({"job:stretch42": {"dailyTokens": 10}}));
    let first = now_ms() + 2_000;
    write_job(
        &env,
        json!({"id": "stretch42", "name": "stretch", "enabled": true,
        "schedule": {"kind": "every", "everyMs": 1000},
        "payload": {"kind": "agent_turn", "message": "Tell me to stretch", "sessionKey": "websocket:owner"},
        "state": {"nextRunAtMs": first}, "createdAtMs": first - 5000, "updatedAtMs": first - 5000}),
    );
    env.llm.push(Reply::Text("Time to stretch!".into()));
    env.llm.push(Reply::Text("A second stretch, which the budget forbids.".into()));
    let _gateway = env.start_with("websocket");
    block_on(async {
        let (mut owner, _) = tokio_tungstenite::connect_async(env.ws_url(port, "owner")).await.unwrap();
        assert_eq!(next_text(&mut owner).await, "Time to stretch!");
        let notice = next_text(&mut owner).await;
        assert!(notice.contains("job:stretch42 budget is spent") && notice.contains("dailyTokens"), "{notice}");
        // The job fires every second; the capped runs after the first notice are quiet.
        let more = tokio::time::timeout(std::time::Duration::from_millis(3_000), next_text(&mut owner)).await;
        assert!(more.is_err(), "the owner was told more than once: {more:?}");
        owner.close(None).await.ok();
    });
    assert_eq!(env.llm.requests().len(), 1, "the capped job called the model again");
    let status = env.command(&["status"]).output().unwrap();
    let report = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(report.lines().any(|line| line.contains("job:stretch42: CAPPED")), "{report}");
}

#[test]
fn the_heartbeats_own_model_serves_its_turn_and_decision_and_nothing_else() {
    let env = gateway_env();
    env.edit_config(|config| config["gateway"]["heartbeat"]["model"] = json!("cheap-model"));
    env.llm.push(Reply::Text("Hello.".into()));
    let _gateway = env.start_with("websocket");
    env.chat_once("owner", "hello");
    env.llm.push(Reply::Text("The disk is fine.".into()));
    let quiet = json!({"notify": false});
    env.llm.route(NOTIFY_DECISION, Reply::ToolCalls(vec![("notify".into(), quiet.to_string())]));
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "## Tasks\n\n- Check the disk usage\n").unwrap();
    let counted = || usage_row(&env, "model", "cheap-model").is_some_and(|row| row[2] == "2");
    assert!(wait_until(DEADLINE, counted), "{:?}", usage_row(&env, "model", "cheap-model"));
    std::fs::write(env.workspace().join("HEARTBEAT.md"), "## Tasks\n").unwrap();
    let models: Vec<String> =
        env.llm.requests().iter().map(|request| request["model"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(models, ["test-model", "cheap-model", "cheap-model"], "the user's turn, then the heartbeat's two calls");
    let user = usage_row(&env, "model", "test-model").unwrap();
    assert_eq!(user[2], "1", "{user:?}");
}

#[test]
fn a_consolidations_call_is_counted_as_consolidation_and_not_as_the_users_turn() {
    let env = crate::agent::AgentEnv::new();
    env.llm.push(Reply::Text("Hi Sam".into()));
    assert!(env.agent("my name is Sam").status.success());
    env.llm.route("keep the archive", Reply::Text("- user is called Sam".into()));
    assert!(env.agent("/new").status.success());
    let out = env.command(&["usage", "--by", "source"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |name: &str| {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
    };
    assert_eq!(row("consolidation").map(|columns| columns[2].clone()), Some("1".to_owned()), "{table}");
    assert_eq!(row("user").map(|columns| columns[2].clone()), Some("1".to_owned()), "{table}");
}
