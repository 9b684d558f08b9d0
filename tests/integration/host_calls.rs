//! Normal operation of the plugin host: multiplexed calls, cancellation, name clashes, and a
//! real tool plugin replaced after SIGKILL.

use std::time::Duration;

use oxibot_kernel::plugin::PluginError;
use oxibot_tests::procs::sigkill;
use oxibot_tests::wait::{eventually, within_deadline};
use oxibot_tests::{TempDir, context, start_host, stress_spec, tool_spec};
use serde_json::json;

#[actix_rt::test]
async fn calls_are_multiplexed_so_fast_calls_overtake_a_slow_one() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let ws = TempDir::new("overtake");
    let gate = ws.path().join("gate");
    // The slow call is answered only once the gate file exists, and the test creates it only
    // after every echo call was answered: the echo calls can only finish by overtaking it.
    let slow = host.call("misbehave", json!({"action": "slow", "until_file": gate}), context(ws.path()), None);
    let fast = async {
        let calls = (0..16).map(|i| host.call("echo", json!({"text": format!("n{i}")}), context(ws.path()), None));
        let mut results = Vec::new();
        for call in calls {
            results.push(call.await.unwrap().content);
        }
        std::fs::write(&gate, "").unwrap();
        results
    };
    let (slow, fast) =
        within_deadline("echo calls waited behind the slow call", async { tokio::join!(slow, fast) }).await;
    assert_eq!(fast, (0..16).map(|i| format!("n{i}")).collect::<Vec<_>>());
    assert_eq!(slow.unwrap().content, "slow done");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_caller_that_stops_waiting_makes_the_kernel_send_cancel() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let ws = std::env::temp_dir();
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        host.call("misbehave", json!({"action": "hang"}), context(&ws), None),
    )
    .await;
    assert!(abandoned.is_err(), "the hanging call cannot have finished");
    // The cancel was queued on the connection before this call, and the plugin handles
    // cancels and echoes in the order they arrive: once the echo is answered, the plugin has
    // written "cancel <id>" to its stderr.
    let echoed = host.call("echo", json!({"text": "after the cancel"}), context(&ws), None).await.unwrap();
    assert_eq!(echoed.content, "after the cancel");
    // The stress plugin writes "cancel <id>" to stderr; a crash shows us its stderr tail.
    let error = host.call("misbehave", json!({"action": "panic"}), context(&ws), None).await.unwrap_err();
    let PluginError::PluginClosed { stderr_tail, .. } = &error else { panic!("{error}") };
    assert!(stderr_tail.iter().any(|l| l.starts_with("cancel ")), "no cancel seen by the plugin: {stderr_tail:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_tool_name_clash_disables_the_later_plugin_with_a_clear_reason() {
    let specs = vec![
        stress_spec("first", &[]),
        stress_spec("second", &[]),
        stress_spec("third", &[("OXIBOT_STRESS_PREFIX", "x_")]),
    ];
    let host = start_host(specs).await;
    let statuses = host.statuses();
    assert_eq!(statuses[0].state, "running");
    assert_eq!(statuses[1].state, "failed");
    let reason = statuses[1].reason.clone().unwrap();
    assert!(reason.contains("'first'") && reason.contains("rename or remove"), "{reason}");
    assert_eq!(statuses[2].state, "running", "a plugin without clashes is unaffected");
    let ws = std::env::temp_dir();
    assert_eq!(host.call("x_echo", json!({"text": "t"}), context(&ws), None).await.unwrap().content, "t");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_tool_with_an_invalid_name_is_refused_alone_and_the_plugin_keeps_its_other_tools() {
    let host = start_host(vec![stress_spec("odd", &[("OXIBOT_STRESS_EXTRA_TOOL", "fs.read file")])]).await;
    let status = &host.statuses()[0];
    assert_eq!(status.state, "running");
    assert_eq!(status.refused.len(), 1, "{:?}", status.refused);
    assert!(status.refused[0].contains("\"fs.read file\" is not valid"), "{}", status.refused[0]);
    assert!(!status.tools.iter().any(|t| t.contains(' ')), "{:?}", status.tools);
    assert!(host.tools().iter().all(|t| t.name != "fs.read file"), "the invalid name is never offered to the model");
    assert_eq!(
        host.call("echo", json!({"text": "t"}), context(&std::env::temp_dir()), None).await.unwrap().content,
        "t"
    );
    host.shutdown().await;
}

#[actix_rt::test]
async fn one_clashing_name_costs_only_that_tool_whichever_plugin_starts_first() {
    let specs = vec![
        stress_spec("builtin", &[("OXIBOT_STRESS_PREFIX", "a_"), ("OXIBOT_STRESS_EXTRA_TOOL", "b_echo")]),
        stress_spec("addon", &[("OXIBOT_STRESS_PREFIX", "b_")]),
    ];
    let host = start_host(specs).await;
    let statuses = host.statuses();
    assert_eq!((statuses[0].state, statuses[1].state), ("running", "running"));
    assert!(statuses[0].tools.contains(&"b_echo".to_owned()), "the plugin of higher precedence keeps the name");
    assert!(statuses[0].refused.is_empty(), "{:?}", statuses[0].refused);
    assert_eq!(statuses[1].refused.len(), 1, "{:?}", statuses[1].refused);
    assert!(statuses[1].refused[0].contains("'b_echo'") && statuses[1].refused[0].contains("'builtin'"));
    let ws = std::env::temp_dir();
    assert_eq!(host.call("b_echo", json!({"text": "t"}), context(&ws), None).await.unwrap().content, "");
    assert_eq!(host.call("b_noop", json!({}), context(&ws), None).await.unwrap().content, "", "addon's others work");
    assert_eq!(host.call("a_echo", json!({"text": "t"}), context(&ws), None).await.unwrap().content, "t");
    host.shutdown().await;
}

#[actix_rt::test]
async fn an_unknown_tool_gets_a_did_you_mean_hint() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let error = host.call("ecoh", json!({}), context(&std::env::temp_dir()), None).await.unwrap_err();
    assert_eq!(error.to_string(), "unknown tool 'ecoh' (did you mean 'echo'?)");
    host.shutdown().await;
}

#[actix_rt::test]
async fn the_fs_plugin_killed_with_sigkill_is_replaced_and_the_next_call_succeeds() {
    let ws = TempDir::new("sigkill-fs");
    ws.write("notes.md", "first line\nsecond line\n");
    let host = start_host(vec![tool_spec("fs")]).await;
    let read = || host.call("read_file", json!({"path": "notes.md"}), context(ws.path()), None);
    assert!(read().await.unwrap().content.contains("second line"));
    let pid = host.statuses()[0].pid.unwrap();
    sigkill(pid);
    // The plugin runs in its own PID namespace under the killed launcher: it and the
    // namespace end a moment later, and the host then starts a replacement.
    eventually("a replacement plugin", || host.statuses()[0].pid.is_some_and(|now| now != pid)).await;
    let result = read().await.expect("the replacement plugin must serve the call");
    assert!(result.content.contains("second line"), "{}", result.content);
    assert_ne!(host.statuses()[0].pid.unwrap(), pid);
    host.shutdown().await;
}
