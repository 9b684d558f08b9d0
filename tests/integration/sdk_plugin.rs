//! The Rust SDK's own promises, checked through a real SDK plugin (`plugins/sdk/examples/
//! sdk_demo.rs`) and the real host: answers, panics become error results followed by a clean
//! exit and a restart, and a cancelled call stops its handler.

use oxibot_kernel::plugin::{Origin, PluginSpec};
use oxibot_tests::wait::eventually;
use oxibot_tests::{TempDir, bin_dir, context, start_host};
use serde_json::json;

fn sdk_demo() -> PluginSpec {
    let path = bin_dir().join("examples/sdk_demo");
    assert!(path.exists(), "{} is missing; `cargo test --workspace` builds it", path.display());
    PluginSpec::for_executable(path, Origin::Config)
}

#[actix_rt::test]
async fn an_sdk_plugin_answers_calls() {
    let host = start_host(vec![sdk_demo()]).await;
    let result = host.call("shout", json!({"text": "quiet"}), context(&std::env::temp_dir()), None).await.unwrap();
    assert_eq!(result.content, "QUIET");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_panicking_handler_becomes_an_error_result_then_the_plugin_restarts() {
    let host = start_host(vec![sdk_demo()]).await;
    let pid = host.statuses()[0].pid.unwrap();
    let result = host.call("crash", json!({}), context(&std::env::temp_dir()), None).await.unwrap();
    assert!(result.is_error);
    assert!(result.content.contains("the crash tool always panics"), "{}", result.content);
    let next = host.call("shout", json!({"text": "again"}), context(&std::env::temp_dir()), None).await.unwrap();
    assert_eq!(next.content, "AGAIN");
    assert_ne!(host.statuses()[0].pid.unwrap(), pid, "the plugin exits after a panic and is replaced");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_cancelled_call_stops_its_handler() {
    let dir = TempDir::new("sdk-cancel");
    let marker = dir.path().join("marker");
    let (started, dropped) = (dir.path().join("started"), dir.path().join("dropped"));
    let host = start_host(vec![sdk_demo()]).await;
    // A ten-minute nap: only a cancel can end its handler within the test.
    let args = json!({"ms": 600_000, "marker": marker, "started": started, "dropped": dropped});
    let call = host.call("nap", args, context(dir.path()), None);
    // The caller stops waiting once the handler runs; dropping the call sends the cancel.
    tokio::select! {
        outcome = call => panic!("the nap cannot have finished: {outcome:?}"),
        () = eventually("the nap handler started", || started.exists()) => {}
    }
    eventually("the cancelled handler was dropped", || dropped.exists()).await;
    assert!(!marker.exists(), "the handler kept running after cancel");
    let finished = host.call("nap", json!({"ms": 10, "marker": marker}), context(dir.path()), None).await.unwrap();
    assert_eq!(finished.content, "rested");
    assert!(marker.exists(), "an uncancelled nap leaves its marker");
    host.shutdown().await;
}
