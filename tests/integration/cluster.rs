//! Cluster mode over a real `nats-server` with JetStream (issue 31, first part): kernels'
//! session ownership and scheduler election against one server — one owner per session,
//! takeover after the TTL when the owner stops renewing, a stale owner's writes refused by the
//! fenced session store, one scheduler in the cluster — and a bad `cluster` section refused
//! with the file and the key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oxibot_kernel::cluster::{ClusterJobs, FencedSessions, Node};
use oxibot_kernel::config::cluster::ClusterConfig;
use oxibot_kernel::cron::storage::JobStorage;
use oxibot_kernel::cron::store::JobStore;
use oxibot_kernel::message::{ChatMessage, Role};
use oxibot_kernel::session::{SessionError, SessionStorage, SessionStore};
use oxibot_tests::nats::NatsServer;
use oxibot_tests::{TempDir, oxibot, stderr};
use serde_json::json;

/// The ownership TTL of these tests: short, so a takeover is quick to wait for.
const TTL_SECONDS: u64 = 2;

/// A kernel's view of the cluster on `server`, as node `name`.
async fn node(server: &NatsServer, name: &str) -> Arc<Node> {
    let config = ClusterConfig { nats: server.url(), node: name.to_owned(), ttl_seconds: TTL_SECONDS };
    Node::connect(&config).await.unwrap()
}

/// Tries every 50 ms until `node` takes session `key`; answers how long that took.
async fn claim_when_free(node: &Arc<Node>, key: &str) -> (oxibot_kernel::cluster::Claim, Duration) {
    let started = Instant::now();
    loop {
        if let Some(claim) = node.claim_session(key).await.unwrap() {
            return (claim, started.elapsed());
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{} never took {key}", node.name());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn two_kernels_claiming_the_same_session_get_exactly_one_owner() {
    let server = NatsServer::start();
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let held = a.claim_session("telegram:1").await.unwrap().expect("the first claim wins");
    assert!(b.claim_session("telegram:1").await.unwrap().is_none(), "a second owner was let in");
    assert_eq!(b.session_owner("telegram:1").await.unwrap().as_deref(), Some("kernel-a"));
    assert!(b.claim_session("telegram:2").await.unwrap().is_some(), "another session is free");
    assert!(held.token().is_some() && a.fencing_token("telegram:1").is_some());
    assert!(b.fencing_token("telegram:1").is_none());
}

#[tokio::test]
async fn an_owner_that_keeps_renewing_keeps_its_session_past_the_ttl() {
    let server = NatsServer::start();
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let held = a.claim_session("slack:C1").await.unwrap().unwrap();
    let first = held.token().unwrap().revision;
    tokio::time::sleep(Duration::from_secs(TTL_SECONDS * 2)).await;
    assert!(b.claim_session("slack:C1").await.unwrap().is_none(), "a live owner's session was taken");
    assert!(held.token().unwrap().revision > first, "renewals move the fencing token on");
}

#[tokio::test]
async fn a_session_whose_owner_stops_renewing_is_taken_by_another_kernel_within_ttl_plus_a_second() {
    let server = NatsServer::start();
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let held = a.claim_session("telegram:7").await.unwrap().unwrap();
    held.stop_renewing();
    let (taken, waited) = claim_when_free(&b, "telegram:7").await;
    eprintln!("taken over {waited:?} after the owner stopped renewing (TTL {TTL_SECONDS} s)");
    assert!(waited <= Duration::from_secs(TTL_SECONDS + 1), "takeover took {waited:?}");
    assert_eq!(a.session_owner("telegram:7").await.unwrap().as_deref(), Some("kernel-b"));
    assert!(taken.token().is_some());
}

#[tokio::test]
async fn a_released_session_is_free_at_once() {
    let server = NatsServer::start();
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let held = a.claim_session("cli:direct").await.unwrap().unwrap();
    held.release().await.unwrap();
    assert!(b.claim_session("cli:direct").await.unwrap().is_some(), "a released session stayed taken");
}

#[tokio::test]
async fn a_paused_owner_cannot_write_the_session_after_another_kernel_took_it() {
    let server = NatsServer::start();
    let shared = TempDir::new("cluster-sessions");
    let (a, b) = (node(&server, "kernel-a").await, node(&server, "kernel-b").await);
    let store_a = FencedSessions::new(SessionStore::in_dir(shared.path()), Arc::clone(&a));
    let store_b = FencedSessions::new(SessionStore::in_dir(shared.path()), Arc::clone(&b));
    let key = "telegram:42";

    let held = a.claim_session(key).await.unwrap().unwrap();
    let mut at_a = store_a.load(key).unwrap().session;
    store_a.append(&mut at_a, vec![ChatMessage::text(Role::User, "written by a")]).unwrap();
    let mut unowned = store_b.load(key).unwrap().session;
    let refused = store_b.append(&mut unowned, vec![ChatMessage::text(Role::User, "b before owning")]);
    assert!(matches!(refused, Err(SessionError::NotOwner { .. })), "{refused:?}");

    held.stop_renewing(); // kernel a hangs
    let (_taken, _) = claim_when_free(&b, key).await;
    let mut at_b = store_b.load(key).unwrap().session;
    store_b.append(&mut at_b, vec![ChatMessage::text(Role::Assistant, "written by b")]).unwrap();

    // Kernel a wakes up with its old session in memory and tries to go on.
    let late = store_a.append(&mut at_a, vec![ChatMessage::text(Role::Assistant, "a after the takeover")]);
    let error = late.expect_err("a stale owner wrote");
    assert!(error.to_string().contains("not owned by this kernel (node kernel-a)"), "{error}");
    let texts: Vec<String> =
        store_b.load(key).unwrap().session.messages.iter().map(ChatMessage::text_content).collect();
    assert_eq!(texts, ["written by a", "written by b"]);
}

#[tokio::test]
async fn only_one_kernel_of_the_cluster_schedules_and_another_takes_over_when_it_dies() {
    let server = NatsServer::start();
    // Two hosts: each kernel has its own workspace directory, so only the cluster keeps the
    // second scheduler out (the file lock would on one host).
    let (host_a, host_b) = (TempDir::new("cluster-host-a"), TempDir::new("cluster-host-b"));
    let jobs_a = ClusterJobs::new(JobStore::new(host_a.path()), node(&server, "kernel-a").await);
    let jobs_b = Arc::new(ClusterJobs::new(JobStore::new(host_b.path()), node(&server, "kernel-b").await));
    // The stores block on the cluster's runtime, as on a store thread.
    let lease_a = tokio::task::spawn_blocking(move || jobs_a.try_scheduler_lease().unwrap()).await.unwrap();
    assert!(lease_a.is_some(), "the first kernel did not become the scheduler");
    let b = Arc::clone(&jobs_b);
    let (second, running) =
        tokio::task::spawn_blocking(move || (b.try_scheduler_lease().unwrap(), b.scheduler_running())).await.unwrap();
    assert!(second.is_none(), "two schedulers in one cluster");
    assert!(running, "kernel b does not see kernel a's scheduler");

    drop(lease_a); // kernel a dies: its leader key is no longer renewed
    let started = Instant::now();
    let lease_b = tokio::task::spawn_blocking(move || {
        loop {
            if let Some(lease) = jobs_b.try_scheduler_lease().unwrap() {
                return lease;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no kernel took over scheduling");
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    let waited = started.elapsed();
    eprintln!("scheduler taken over after {waited:?} (TTL {TTL_SECONDS} s)");
    assert!(waited <= Duration::from_secs(TTL_SECONDS + 1), "takeover took {waited:?}");
    drop(lease_b);
}

#[test]
fn a_bad_cluster_section_is_refused_naming_the_file_and_the_key() {
    let home = TempDir::new("cluster-config");
    let config = json!({"agents": {"defaults": {"workspace": "."}}, "cluster": {"nats": "http://127.0.0.1:4222", "node": "kernel-a"}});
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let out = oxibot(home.path(), home.path(), &["status"]);
    assert!(!out.status.success(), "a bad cluster section was accepted");
    let text = stderr(&out);
    assert!(
        text.contains("config.json") && text.contains("cluster.nats") && text.contains("nats://host:port"),
        "{text}"
    );
}
