//! What spent the tokens (issue 33), through the real `oxibot gateway` and the scripted LLM: a
//! cron job's and the heartbeat's turns attributed to them in the usage log and in
//! `oxibot usage --by source|job`.

use oxibot_tests::llm::{COMPLETION_TOKENS, PROMPT_TOKENS, Reply};
use oxibot_tests::procs::wait_until;
use oxibot_tests::wait::DEADLINE;
use serde_json::json;

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

/// Writes a one-shot job `id`, due a minute ago, into the workspace's jobs file.
fn write_due_job(env: &GatewayEnv, id: &str, message: &str) {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let due = now_ms - 60_000;
    let file = json!({"version": 1, "jobs": [{
        "id": id, "name": id, "enabled": true,
        "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": message, "sessionKey": "websocket:owner"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true
    }]});
    std::fs::create_dir_all(env.workspace().join("cron")).unwrap();
    std::fs::write(env.workspace().join("cron/jobs.json"), file.to_string()).unwrap();
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
    // JOB TURNS CALLS PROMPT CACHED HIT COMPLETION COST
    assert_eq!(job[1..4], ["1", "1", &PROMPT_TOKENS.to_string()], "{job:?}");
    assert_eq!(job[6], COMPLETION_TOKENS.to_string(), "{job:?}");

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
