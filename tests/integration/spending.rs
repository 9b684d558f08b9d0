//! What spent the tokens and caps on it (issue 33), through the real `oxibot gateway` and the
//! scripted LLM: a cron job's and the heartbeat's turns attributed to them in the usage log and
//! in `oxibot usage --by source|job`; a job over its budget stops calling the model, its owner
//! is told once in the chat, and `oxibot status` says it is capped; the heartbeat's own model
//! serves the heartbeat only and a cron job's its turn only; each call's time is shown; a
//! consolidation's call is counted as `consolidation`; Dream's calls per phase, a helper's for
//! its parent session, reasoning and cached tokens shown; a cap checked before every model
//! call (a tool loop stops there, a capped Dream tells the owner's last active chat); the
//! helpers' and consolidation's own models.

use futures_util::{SinkExt, StreamExt};
use oxibot_tests::llm::{CACHED_TOKENS, COMPLETION_TOKENS, PROMPT_TOKENS, REASONING_TOKENS, Reply};
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
    env.llm.push(Reply::SlowFirstToken { delay_ms: 400, text: "Time to stretch!".into() });
    let _gateway = env.start_with("websocket");
    assert!(wait_until(DEADLINE, || usage_row(&env, "job", "stretch42").is_some()), "the job's turn is not counted");
    let job = usage_row(&env, "job", "stretch42").unwrap();
    // JOB TURNS CALLS PROMPT CACHED COMPLETION COST HIT REASONING MS/CALL
    assert_eq!(job[1..4], ["1", "1", &PROMPT_TOKENS.to_string()], "{job:?}");
    assert_eq!(job[5], COMPLETION_TOKENS.to_string(), "{job:?}");
    let ms_per_call: u64 = job[9].parse().unwrap_or_else(|_| panic!("the model call's time: {job:?}"));
    assert!((400..5_000).contains(&ms_per_call), "the call waited 400 ms for its first token: {job:?}");

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
    let heartbeat = usage_row(&env, "source", "heartbeat").unwrap();
    assert!(heartbeat[9].parse::<u64>().is_ok(), "the heartbeat's calls are timed too: {heartbeat:?}");
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
fn a_jobs_own_model_serves_its_turn_and_nothing_else() {
    let env = gateway_env();
    let due = now_ms() - 60_000;
    write_job(
        &env,
        json!({"id": "digest7", "name": "digest", "enabled": true, "schedule": {"kind": "at", "atMs": due},
        "payload": {"kind": "agent_turn", "message": "Summarise the news", "sessionKey": "websocket:owner",
            "model": "job-model"},
        "state": {"nextRunAtMs": due}, "createdAtMs": due - 1000, "updatedAtMs": due - 1000, "deleteAfterRun": true}),
    );
    env.llm.push(Reply::Text("Nothing new.".into()));
    let _gateway = env.start_with("websocket");
    assert!(wait_until(DEADLINE, || usage_row(&env, "job", "digest7").is_some()), "the job's turn is not counted");
    env.llm.push(Reply::Text("Hello.".into()));
    env.chat_once("owner", "hello");
    let models: Vec<String> =
        env.llm.requests().iter().map(|request| request["model"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(models, ["job-model", "test-model"], "the job's turn, then the owner's own message");
    assert_eq!(usage_row(&env, "model", "job-model").unwrap()[2], "1", "the job's call counted for its model");
    assert_eq!(usage_row(&env, "model", "test-model").unwrap()[2], "1", "the owner's call counted for theirs");
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

/// Words of Dream's analysis prompt (templates/agent/dream_phase1.md).
const DREAM_PHASE1: &str = "maintain the long-term memory";
/// Words of Dream's editing prompt (templates/agent/dream_phase2.md).
const DREAM_PHASE2: &str = "apply a list of findings";
/// Words of a helper's system prompt (templates/agent/subagent.md).
const HELPER: &str = "The main assistant started you for one task";

/// The row of `oxibot usage --by <by>` of an agent's data dir whose first column is `name`.
/// Columns: NAME TURNS CALLS PROMPT CACHED COMPLETION COST HIT REASONING MS/CALL.
fn agent_usage_row(env: &crate::agent::AgentEnv, by: &str, name: &str) -> Option<Vec<String>> {
    let out = env.command(&["usage", "--by", by]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .find(|columns| columns.first().is_some_and(|first| first == name))
}

#[test]
fn a_dream_runs_calls_are_counted_per_phase_with_their_cached_and_reasoning_tokens() {
    let env = crate::agent::AgentEnv::new();
    env.write("memory/MEMORY.md", "# Memory\n");
    let entry = json!({"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "- Sam moved to Lyon"});
    env.write("memory/history.jsonl", &format!("{entry}\n"));
    env.llm.route(DREAM_PHASE1, Reply::Text("[USER] lives in Lyon".into()));
    let read = json!({"path": "memory/MEMORY.md"}).to_string();
    env.llm.route(DREAM_PHASE2, Reply::ToolCalls(vec![("read_file".into(), read)]));
    env.llm.route(DREAM_PHASE2, Reply::Text("Nothing to change after all.".into()));
    let out = env.agent("/dream");
    assert!(out.status.success(), "{}", oxibot_tests::stderr(&out));
    let analysis = agent_usage_row(&env, "source", "dream:analysis").expect("Dream's analysis is not counted");
    assert_eq!(analysis[2..6], ["1", &PROMPT_TOKENS.to_string(), &CACHED_TOKENS.to_string(), "5"], "{analysis:?}");
    assert_eq!(analysis[8], REASONING_TOKENS.to_string(), "{analysis:?}");
    let edit = agent_usage_row(&env, "source", "dream:edit").expect("Dream's editing turn is not counted");
    assert_eq!((edit[2].as_str(), edit[8].as_str()), ("2", &*(2 * REASONING_TOKENS).to_string()), "{edit:?}");
    assert!(agent_usage_row(&env, "source", "user").is_none(), "Dream's calls are not the user's");
    let status = oxibot_tests::stdout(&env.agent("/status"));
    assert!(status.contains("dream:analysis") && status.contains("reasoning"), "{status}");
}

#[test]
fn a_tool_loop_stops_at_its_cap_before_the_next_model_call_and_the_cap_is_the_reply() {
    // One model call of the scripted LLM spends more than this.
    let env = crate::agent::AgentEnv::with_defaults(json!({"budgets": {"user": {"dailyTokens": 10}}}));
    env.write("notes.md", "a note\n");
    let read = json!({"path": "notes.md"}).to_string();
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), read.clone())]));
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), read)]));
    env.llm.push(Reply::Text("The note says: a note.".into()));
    let out = env.agent("read my notes");
    let reply = oxibot_tests::stdout(&out);
    assert!(reply.contains("The user budget is spent") && reply.contains("dailyTokens"), "{reply}");
    assert_eq!(env.llm.requests().len(), 1, "the loop called the model past its cap");
    let user = agent_usage_row(&env, "source", "user").unwrap();
    assert_eq!(user[2], "1", "the one call made is counted: {user:?}");
}

#[test]
fn a_helpers_own_model_serves_helpers_only_and_its_calls_count_for_its_parent_session() {
    let env = crate::agent::AgentEnv::with_defaults(json!({"subagentModel": "helper-model"}));
    let spawn = json!({"task": "What is six times seven?", "wait": true});
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn.to_string())]));
    env.llm.route(HELPER, Reply::Text("42".into()));
    env.llm.push(Reply::Text("It is 42.".into()));
    let out = env.agent("six times seven?");
    assert!(oxibot_tests::stdout(&out).contains("It is 42."), "{}", oxibot_tests::stderr(&out));
    let models: Vec<(bool, String)> = env
        .llm
        .requests()
        .iter()
        .map(|request| {
            let system = request["messages"][0]["content"].as_str().unwrap_or_default();
            (system.contains(HELPER), request["model"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let expected = [(false, "test-model"), (true, "helper-model"), (false, "test-model")];
    assert_eq!(
        models,
        expected.map(|(helper, model)| (helper, model.to_owned())),
        "the session's, the helper's, the session's"
    );
    let helper = agent_usage_row(&env, "source", "subagent").expect("the helper's call is not counted");
    assert_eq!(helper[2], "1", "{helper:?}");
    assert_eq!(agent_usage_row(&env, "model", "helper-model").unwrap()[2], "1");
    let out = env.command(&["usage", "--by", "session"]).output().unwrap();
    let sessions = String::from_utf8_lossy(&out.stdout).into_owned();
    let parent = sessions.lines().find(|line| line.starts_with("cli:direct")).unwrap_or_default();
    assert_eq!(parent.split_whitespace().nth(2), Some("3"), "the helper's call counts for its parent: {sessions}");
}

#[test]
fn consolidation_uses_its_own_model_and_stops_at_its_cap() {
    let env = crate::agent::AgentEnv::with_defaults(json!({"consolidationModel": "summary-model"}));
    env.llm.push(Reply::Text("Hi Sam".into()));
    assert!(env.agent("my name is Sam").status.success());
    env.llm.route("keep the archive", Reply::Text("- user is called Sam".into()));
    assert!(env.agent("/new").status.success());
    let summaries: Vec<String> = env
        .llm
        .requests()
        .iter()
        .filter(|request| request["messages"][0]["content"].as_str().unwrap_or_default().contains("keep the archive"))
        .map(|request| request["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(summaries, ["summary-model"]);
    assert_eq!(agent_usage_row(&env, "model", "summary-model").unwrap()[2], "1");

    // Everything spent already is over this cap: the next summary is not asked for.
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("config.json")).unwrap()).unwrap();
    config["agents"]["defaults"]["budgets"] = json!({"consolidation": {"dailyTokens": 1}});
    env.write_config(&config);
    env.llm.push(Reply::Text("Hi again".into()));
    assert!(env.agent("I live in Lyon").status.success());
    let before = env.llm.requests().len();
    env.agent("/new");
    assert_eq!(env.llm.requests().len(), before, "a capped consolidation called the model");
    let status = oxibot_tests::stdout(&env.command(&["status"]).output().unwrap());
    assert!(status.lines().any(|line| line.contains("consolidation: CAPPED")), "{status}");
}

#[test]
fn a_capped_dream_tells_the_owners_last_active_chat_and_calls_no_model() {
    let port = oxibot_tests::channels::free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port}}));
    env.edit_config(|config| config["agents"]["defaults"]["budgets"] = json!({"dream": {"dailyTokens": 1}}));
    let entry = json!({"cursor": 1, "timestamp": "2026-04-03 10:00", "content": "- Sam moved to Lyon"});
    std::fs::create_dir_all(env.workspace().join("memory")).unwrap();
    std::fs::write(env.workspace().join("memory/history.jsonl"), format!("{entry}\n")).unwrap();
    // Dream spent some tokens earlier today, over its cap of one.
    let today = utc_today();
    let spent = json!({"at": format!("{today}T00:00:01Z"), "session": "system:dream", "model": "test-model",
        "prompt": 5, "cached": 0, "completion": 1, "calls": 1, "source": "dream", "phase": "analysis"});
    std::fs::create_dir_all(env.data_dir().join("usage")).unwrap();
    std::fs::write(env.data_dir().join(format!("usage/{today}.jsonl")), format!("{spent}\n")).unwrap();
    env.llm.push(Reply::Text("Hello.".into()));
    let _gateway = env.start_with("websocket");
    block_on(async {
        let (mut owner, _) = tokio_tungstenite::connect_async(env.ws_url(port, "owner")).await.unwrap();
        owner.send(WsMessage::text(json!({"type": "message", "text": "hello"}).to_string())).await.unwrap();
        assert_eq!(next_text(&mut owner).await, "Hello.");
        owner.send(WsMessage::text(json!({"type": "message", "text": "/dream"}).to_string())).await.unwrap();
        let mut told = Vec::new();
        for _ in 0..2 {
            let Ok(text) = tokio::time::timeout(std::time::Duration::from_secs(10), next_text(&mut owner)).await else {
                break;
            };
            told.push(text);
        }
        assert!(told.iter().any(|text| text.contains("The dream budget is spent")), "{told:?}");
        owner.close(None).await.ok();
    });
    let dream_calls = env.llm.requests().iter().filter(|r| r.to_string().contains(DREAM_PHASE1)).count();
    assert_eq!(dream_calls, 0, "a capped Dream called the model");
    let status = String::from_utf8_lossy(&env.command(&["status"]).output().unwrap().stdout).into_owned();
    assert!(status.lines().any(|line| line.contains("dream: CAPPED")), "{status}");
}

/// Today's UTC date, `YYYY-MM-DD`, as the usage log names its files.
fn utc_today() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%F"]).output().expect("date(1) runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn recalls_embedding_requests_are_counted_as_embedding() {
    let env = crate::agent::AgentEnv::new();
    env.write_config(&json!({
        "agents": {"defaults": {"workspace": env.workspace, "model": "test-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "test-key", "apiBase": env.llm.base_url()}},
        "memory": {"embedding": "test-embedding"},
    }));
    env.write("memory/MEMORY.md", "# Memory\n\n- The spare key is under the blue flowerpot\n");
    env.llm.push(Reply::Text("Under the blue flowerpot.".into()));
    let out = env.agent("where did I leave the spare key?");
    assert!(out.status.success(), "{}", oxibot_tests::stderr(&out));
    assert!(!env.llm.embedding_requests().is_empty(), "the query was not embedded");
    let row = agent_usage_row(&env, "source", "embedding").expect("the embedding requests are not counted");
    let calls: u64 = row[2].parse().unwrap();
    assert!(calls >= 1 && row[3] != "0", "{row:?}");
    assert_eq!(agent_usage_row(&env, "model", "test-embedding").map(|row| row[2].clone()), Some(row[2].clone()));
}

#[test]
fn a_cap_edited_while_the_gateway_runs_stops_the_next_helper_and_embedding_requests() {
    let port = oxibot_tests::channels::free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port}}));
    env.edit_config(|config| config["memory"] = json!({"embedding": "test-embedding"}));
    let spawn = json!({"task": "What is six times seven?", "wait": true}).to_string();
    env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn.clone())]));
    env.llm.route(HELPER, Reply::Text("42".into()));
    env.llm.push(Reply::Text("It is 42.".into()));
    let _gateway = env.start_with("websocket");
    let helper_calls = || env.llm.requests().iter().filter(|r| r.to_string().contains(HELPER)).count();
    let log = || std::fs::read_to_string(env.data_dir().join("gateway.log")).unwrap_or_default();
    block_on(async {
        let (mut owner, _) = tokio_tungstenite::connect_async(env.ws_url(port, "owner")).await.unwrap();
        owner.send(WsMessage::text(json!({"type": "message", "text": "six times seven?"}).to_string())).await.unwrap();
        assert_eq!(next_text(&mut owner).await, "It is 42.");
        assert_eq!(helper_calls(), 1, "the helper ran before any cap");
        assert!(!env.llm.embedding_requests().is_empty(), "nothing was embedded before any cap");

        // Everything the helper and recall spent today is over these caps.
        let caps = json!({"subagent": {"dailyTokens": 1}, "embedding": {"dailyTokens": 1}});
        env.edit_config(|config| config["agents"]["defaults"]["budgets"] = caps);
        assert!(wait_until(DEADLINE, || log().contains("model settings applied")), "{}", log());
        // An embedding already under way when the edit landed may still finish.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let embedded = env.llm.embedding_requests().len();
        env.llm.push(Reply::ToolCalls(vec![("spawn".into(), spawn)]));
        env.llm.route(HELPER, Reply::Text("72".into()));
        env.llm.push(Reply::Text("Done.".into()));
        let text = json!({"type": "message", "text": "and eight times nine, remember it?"}).to_string();
        owner.send(WsMessage::text(text)).await.unwrap();
        assert_eq!(next_text(&mut owner).await, "Done.");
        assert_eq!(env.llm.embedding_requests().len(), embedded, "recall embedded over its edited cap");
        assert_eq!(helper_calls(), 1, "a helper over its edited cap called the model");
        owner.close(None).await.ok();
    });
}
