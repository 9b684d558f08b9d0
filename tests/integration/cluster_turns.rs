//! Durable turns across a cluster failover (issue 31): gateways on one NATS server sharing the
//! data dir, the workspace and one loopback channel; the gateway that owns a session is
//! SIGKILLed in the middle of a tool call, and the gateway that takes the session over does not
//! run a call that may have acted again (it tells the model so), asks the model with a call's
//! recorded result instead of running it again, and the chat gets one reply. A cron job's turn
//! killed the same way on its scheduler fires once and runs its call once.

use std::time::{Duration, Instant};

use oxibot_tests::channels::{LineClient, free_port};
use oxibot_tests::http::gateway_health;
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use serde_json::{Value, json};

use super::cluster::{ClusterGateway, SharedDataDir, line_starting, owned_sessions, runs_the_channel};

/// Two gateways sharing one loopback channel (run by the first), with `exec` approved.
fn two_gateways_sharing_a_channel() -> (SharedDataDir, Vec<ClusterGateway>, u16) {
    let port = free_port();
    let cluster = SharedDataDir { shared_channel_port: Some(port), approve_every_call: true, ..SharedDataDir::new() };
    let a = cluster.start("a");
    assert!(wait_until(Duration::from_secs(10), || runs_the_channel(a.http_port)), "kernel a never ran the channel");
    let b = cluster.start("b");
    (cluster, vec![a, b], port)
}

/// SIGKILLs the gateway that owns session `key`; answers the node letters of the killed
/// gateway and of the one left.
fn kill_the_owner(
    cluster: &SharedDataDir,
    gateways: &mut Vec<ClusterGateway>,
    key: &str,
) -> (&'static str, &'static str) {
    let owner = gateways.iter().position(|g| owned_sessions(g.http_port).iter().any(|s| s == key));
    let owner = owner.unwrap_or_else(|| panic!("no gateway owns {key}: {}\n{}", cluster.log("a"), cluster.log("b")));
    let mut killed = gateways.remove(owner);
    killed.child.kill().unwrap();
    let _ = killed.child.wait();
    [("a", "b"), ("b", "a")][owner]
}

/// The `OUT <chat> …` lines the chat gets within `limit` (reconnecting when the gateway that ran
/// the channel died), waiting `settle` after the first for a second one.
async fn replies_to(port: u16, mut client: LineClient, chat: &str, limit: Duration, settle: Duration) -> Vec<String> {
    let prefix = format!("OUT {chat} ");
    let started = Instant::now();
    let mut replies: Vec<String> = Vec::new();
    let mut first_at: Option<Instant> = None;
    while started.elapsed() < limit && first_at.is_none_or(|at| at.elapsed() < settle) {
        match tokio::time::timeout(Duration::from_millis(200), client.next_line()).await {
            Ok(Some(line)) if line.starts_with(&prefix) => {
                replies.push(line);
                first_at.get_or_insert_with(Instant::now);
            }
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => client = LineClient::connect(port).await,
        }
    }
    replies
}

/// The contents of the tool messages of the model's last request.
fn tool_results_of_last_request(cluster: &SharedDataDir) -> Vec<String> {
    let requests = cluster.llm.requests();
    let last = requests.last().expect("the model was asked");
    let messages = last["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// How many lines file `name` of the cluster's workspace holds.
fn lines_in(cluster: &SharedDataDir, name: &str) -> usize {
    std::fs::read_to_string(cluster.workspace().join(name)).map_or(0, |text| text.lines().count())
}

/// An `exec` call of `command`, as the model asks for it.
fn exec_call(command: &str) -> Reply {
    Reply::ToolCalls(vec![("exec".into(), json!({"command": command}).to_string())])
}

#[tokio::test]
async fn a_call_that_may_have_acted_when_its_gateway_was_killed_is_reported_to_the_model_and_not_run_again_by_the_next_owner()
 {
    let (cluster, mut gateways, port) = two_gateways_sharing_a_channel();
    cluster.llm.push(exec_call("echo x >> runs.txt; sleep 60"));
    let mut client = LineClient::connect(port).await;
    client.send("alice:chat1:append a line").await;
    line_starting(&mut client, "ACCEPTED", Duration::from_secs(10)).await.expect("the message was not accepted");
    let ran = wait_until(Duration::from_secs(20), || lines_in(&cluster, "runs.txt") == 1);
    assert!(ran, "the command never ran: {}", cluster.log("a"));

    cluster.llm.push(Reply::Text("I will check first".into()));
    let (_, survivor) = kill_the_owner(&cluster, &mut gateways, "loopback:chat1");
    let replies = replies_to(port, client, "chat1", Duration::from_secs(30), Duration::from_secs(3)).await;
    assert_eq!(replies, ["OUT chat1 I will check first"], "{}", cluster.log(survivor));
    assert_eq!(lines_in(&cluster, "runs.txt"), 1, "the command ran again on the next owner");
    let told = tool_results_of_last_request(&cluster).last().cloned().unwrap_or_default();
    assert!(told.contains("interrupted") && told.contains("outcome is unknown"), "{told}");
    assert!(told.contains("echo x >> runs.txt"), "the model sees what the call asked for: {told}");
    assert_eq!(cluster.llm.requests().len(), 2, "the model was asked more than once after the kill");
    let texts = cluster.conversation("loopback:chat1");
    assert_eq!(texts.iter().filter(|t| t.as_str() == "I will check first").count(), 1, "{texts:?}");
}

#[tokio::test]
async fn a_call_that_finished_before_its_gateway_was_killed_is_not_run_again_and_its_result_reaches_the_model() {
    let (cluster, mut gateways, port) = two_gateways_sharing_a_channel();
    cluster.llm.push(exec_call("echo y >> done.txt; echo the call finished"));
    cluster.llm.push(Reply::SlowFirstToken { delay_ms: 60_000, text: "never sent".into() });
    let mut client = LineClient::connect(port).await;
    client.send("alice:chat2:append a line and tell me").await;
    line_starting(&mut client, "ACCEPTED", Duration::from_secs(10)).await.expect("the message was not accepted");
    let asked_again = wait_until(Duration::from_secs(20), || cluster.llm.requests().len() == 2);
    assert!(asked_again, "the model never got the call's result: {}", cluster.log("a"));
    assert_eq!(lines_in(&cluster, "done.txt"), 1);

    cluster.llm.push(Reply::Text("it is done".into()));
    let (_, survivor) = kill_the_owner(&cluster, &mut gateways, "loopback:chat2");
    let replies = replies_to(port, client, "chat2", Duration::from_secs(30), Duration::from_secs(3)).await;
    assert_eq!(replies, ["OUT chat2 it is done"], "{}", cluster.log(survivor));
    assert_eq!(lines_in(&cluster, "done.txt"), 1, "the command ran again on the next owner");
    let results = tool_results_of_last_request(&cluster);
    assert_eq!(results.len(), 1, "one tool result, recorded before the kill: {results:?}");
    assert!(results[0].contains("the call finished"), "{results:?}");
    assert_eq!(cluster.llm.requests().len(), 3);
    let last: &Value = &cluster.llm.requests()[2];
    assert!(last.to_string().contains("append a line and tell me"), "{last}");
}

/// The wall clock in milliseconds since the Unix epoch.
fn unix_ms_now() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// The model's requests whose last message holds `marker` (turns started by it, not resumed).
fn turns_started_by(cluster: &SharedDataDir, marker: &str) -> usize {
    let requests = cluster.llm.requests();
    let last_holds =
        |r: &Value| r["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m.to_string().contains(marker));
    requests.iter().filter(|r| last_holds(r)).count()
}

#[tokio::test]
async fn a_job_whose_scheduler_is_killed_in_the_middle_of_its_call_fires_once_and_runs_the_call_once() {
    let cluster = SharedDataDir { approve_every_call: true, ..SharedDataDir::new() };
    let now_ms = unix_ms_now();
    let jobs = json!({"version": 1, "jobs": [{
        "id": "d1d2d3d4", "name": "daily", "enabled": true,
        "schedule": {"kind": "every", "everyMs": 3_600_000},
        "payload": {"kind": "agent_turn", "message": "append the daily line", "sessionKey": "loopback:daily"},
        "state": {"nextRunAtMs": now_ms + 5_000}, "createdAtMs": now_ms, "updatedAtMs": now_ms
    }]});
    std::fs::create_dir_all(cluster.workspace().join("cron")).unwrap();
    std::fs::write(cluster.workspace().join("cron/jobs.json"), jobs.to_string()).unwrap();
    cluster.llm.push(exec_call("echo x >> daily.txt; sleep 60"));
    let mut gateways = vec![cluster.start("a"), cluster.start("b")];
    let ran = wait_until(Duration::from_secs(30), || lines_in(&cluster, "daily.txt") == 1);
    assert!(ran, "the job never ran its call: {}\n{}", cluster.log("a"), cluster.log("b"));

    cluster.llm.push(Reply::Text("the line may be there already".into()));
    let scheduler = gateway_health(gateways[0].http_port).unwrap_or_default()["cluster"]["scheduler"].clone();
    let (killed, survivor) = kill_the_owner(&cluster, &mut gateways, "loopback:daily");
    assert_eq!(scheduler, json!(format!("kernel-{killed}")), "the job's turn ran on a kernel that does not schedule");
    let answered = || cluster.conversation("loopback:daily").iter().any(|t| t == "the line may be there already");
    assert!(
        wait_until(Duration::from_secs(30), answered),
        "the job's turn was never taken up: {}",
        cluster.log(survivor)
    );
    std::thread::sleep(Duration::from_secs(3)); // a second firing or a second answer shows here
    assert_eq!(lines_in(&cluster, "daily.txt"), 1, "the call ran again on the next scheduler");
    assert_eq!(turns_started_by(&cluster, "append the daily line"), 1, "the job fired again for its due time");
    assert_eq!(cluster.llm.requests().len(), 2, "{:?}", cluster.llm.requests());
    let told = tool_results_of_last_request(&cluster).last().cloned().unwrap_or_default();
    assert!(told.contains("interrupted") && told.contains("outcome is unknown"), "{told}");
    let texts = cluster.conversation("loopback:daily");
    assert_eq!(texts.iter().filter(|t| t.as_str() == "the line may be there already").count(), 1, "{texts:?}");
}
