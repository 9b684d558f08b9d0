//! Every misbehaviour of the stress plugin, driven through the real kernel plugin host: the
//! kernel stays up, the call gets a structured error in time, the plugin restarts (or is
//! marked failed past the restart limit), and the next call succeeds.

use std::pin::pin;
use std::time::{Duration, Instant};

use oxibot_kernel::plugin::{PluginError, PluginHost};
use oxibot_tests::wait::{DEADLINE, poll_once, within_deadline};
use oxibot_tests::{TempDir, context, start_host, stress_spec};
use serde_json::json;

async fn misbehave(host: &PluginHost, action: &str) -> Result<oxibot_proto::ToolResult, PluginError> {
    let ws = std::env::temp_dir();
    host.call("misbehave", json!({"action": action}), context(&ws), None).await
}

async fn echo_works(host: &PluginHost) {
    let ws = std::env::temp_dir();
    let result = host
        .call("echo", json!({"text": "still here"}), context(&ws), None)
        .await
        .expect("the next call must be served by a fresh plugin");
    assert_eq!(result.content, "still here");
    assert!(!result.is_error);
}

fn assert_closed(error: &PluginError, status_part: &str, stderr_part: &str) {
    let PluginError::PluginClosed { plugin, status, stderr_tail, .. } = error else {
        panic!("expected a PluginClosed error, got: {error}");
    };
    assert_eq!(plugin, "stress");
    assert!(status.contains(status_part), "status {status:?} lacks {status_part:?}");
    assert!(stderr_tail.iter().any(|l| l.contains(stderr_part)), "stderr tail {stderr_tail:?} lacks {stderr_part:?}");
    let text = error.to_string();
    assert!(text.contains("stress") && text.contains(status_part), "message must name plugin and status: {text}");
}

fn restarts(host: &PluginHost) -> String {
    host.statuses()[0].state.to_owned()
}

#[actix_rt::test]
async fn panic_mid_call_fails_the_call_with_status_and_stderr_then_the_plugin_restarts() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let pid_before = host.statuses()[0].pid.unwrap();
    let error = misbehave(&host, "panic").await.unwrap_err();
    assert_closed(&error, "exit code 101", "asked to panic");
    echo_works(&host).await;
    assert_ne!(host.statuses()[0].pid.unwrap(), pid_before, "a new process must serve the next call");
    host.shutdown().await;
}

#[actix_rt::test]
async fn garbage_frame_fails_the_call_and_the_plugin_is_replaced() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let error = misbehave(&host, "garbage").await.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("protocol violation") && text.contains("malformed"), "{text}");
    assert!(matches!(error, PluginError::PluginClosed { .. }));
    echo_works(&host).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn oversize_frame_fails_the_call_without_waiting_for_its_body() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    // The plugin sends the prefix of a 64 MiB frame and never its body, and keeps the
    // connection open: a kernel that waited for the body would end the call with a timeout,
    // not with the oversize violation.
    let error = misbehave(&host, "oversize").await.unwrap_err();
    assert!(matches!(error, PluginError::PluginClosed { .. }), "an oversize prefix must be refused at once: {error}");
    assert!(error.to_string().contains("over the 16777216-byte limit"), "{error}");
    echo_works(&host).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn hung_call_times_out_at_its_timeout_and_the_plugin_is_restarted() {
    let host = start_host(vec![stress_spec("stress", &[("OXIBOT_STRESS_TIMEOUT_SECS", "1")])]).await;
    let started = Instant::now();
    let error = misbehave(&host, "hang").await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(&error, PluginError::Timeout { tool, .. } if tool == "misbehave"), "{error}");
    // The timeout that expired is the tool's own (1 s from its manifest, less the moment spent
    // before the call went out), not the host's default (10 s); a timer never fires early, so
    // the call waited at least that long.
    let PluginError::Timeout { after, .. } = &error else { unreachable!() };
    assert!(*after <= Duration::from_secs(1), "timed out at the wrong timeout: {error}");
    assert!(waited >= Duration::from_secs(1), "gave up early, after {waited:?}");
    echo_works(&host).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn plugin_killing_itself_mid_call_fails_every_call_in_flight_at_once() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let ws = std::env::temp_dir();
    // A call that is never answered: it can only end with the kill (or, wrongly, with its
    // 10 s timeout, which would make it a Timeout error).
    let mut hanging = pin!(host.call("misbehave", json!({"action": "hang"}), context(&ws), None));
    // Its first poll puts it in flight (queued on the connection) before the kill is sent.
    assert!(poll_once(&mut hanging).await.is_pending());
    let (hanging, kill) = within_deadline("the call in flight did not fail with the kill", async {
        tokio::join!(hanging, misbehave(&host, "sigkill"))
    })
    .await;
    assert_closed(&kill.unwrap_err(), "signal 9", "stress plugin starting");
    assert_closed(&hanging.unwrap_err(), "signal 9", "stress plugin starting");
    echo_works(&host).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn slow_answer_within_the_timeout_is_delivered() {
    // A timeout far beyond the 300 ms the answer takes, however busy the machine is.
    let host = start_host(vec![stress_spec("stress", &[("OXIBOT_STRESS_TIMEOUT_SECS", "60")])]).await;
    let result = host
        .call("misbehave", json!({"action": "slow", "delay_ms": 300}), context(&std::env::temp_dir()), None)
        .await
        .unwrap();
    assert_eq!(result.content, "slow done");
    assert_eq!(restarts(&host), "running");
    host.shutdown().await;
}

#[actix_rt::test]
async fn slow_answer_past_the_timeout_is_a_timeout_error() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let ws = TempDir::new("late-answer");
    let gate = ws.path().join("gate");
    // The answer is held back until the gate file exists, which happens only after the
    // call's 300 ms timeout has expired: the answer is late whatever the machine's speed.
    let arguments = json!({"action": "slow", "until_file": gate});
    let error =
        host.call("misbehave", arguments, context(ws.path()), Some(Duration::from_millis(300))).await.unwrap_err();
    std::fs::write(&gate, "").unwrap();
    assert!(matches!(error, PluginError::Timeout { .. }), "{error}");
    echo_works(&host).await;
    host.shutdown().await;
}

#[actix_rt::test]
async fn tool_error_result_is_passed_through_and_the_plugin_keeps_running() {
    let host = start_host(vec![stress_spec("stress", &[])]).await;
    let pid = host.statuses()[0].pid;
    let result = misbehave(&host, "error").await.unwrap();
    assert!(result.is_error);
    assert_eq!(result.content, "Error: asked to fail");
    assert_eq!(host.statuses()[0].pid, pid, "an error result is not a crash");
    host.shutdown().await;
}

async fn assert_marked_failed(startup: &str, reason_part: &str) {
    let _guard = TempDir::new("failed");
    let host = start_host(vec![stress_spec("stress", &[("OXIBOT_STRESS_STARTUP", startup)])]).await;
    let status = &host.statuses()[0];
    assert_eq!(status.state, "failed", "{startup}: {status:?}");
    let reason = status.reason.clone().unwrap();
    assert!(reason.contains("restarted 5 times"), "{reason}");
    assert!(reason.contains(reason_part), "{startup}: reason {reason:?} lacks {reason_part:?}");
    let error = host.call("echo", json!({"text": "x"}), context(&std::env::temp_dir()), None).await.unwrap_err();
    assert!(matches!(error, PluginError::UnknownTool { .. } | PluginError::Failed { .. }), "{error}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn plugin_exiting_before_hello_is_marked_failed_with_its_exit_status() {
    assert_marked_failed("exit_before_hello", "exit code 3").await;
}

#[actix_rt::test]
async fn plugin_speaking_another_protocol_version_is_refused_and_marked_failed() {
    assert_marked_failed("wrong_version", "protocol version 999 is not supported").await;
}

#[actix_rt::test]
async fn plugin_presenting_a_wrong_token_is_refused_and_marked_failed() {
    assert_marked_failed("wrong_token", "wrong token").await;
}

#[actix_rt::test]
async fn plugin_sending_garbage_instead_of_hello_is_marked_failed() {
    assert_marked_failed("garbage_hello", "protocol violation during the handshake").await;
}

#[actix_rt::test]
async fn plugin_that_never_says_hello_hits_the_handshake_timeout() {
    let mut config = oxibot_tests::test_host_config();
    config.handshake_timeout = Duration::from_millis(300);
    config.restart.max_restarts = 1;
    let host =
        PluginHost::start(vec![stress_spec("stress", &[("OXIBOT_STRESS_STARTUP", "no_hello")])], config).unwrap();
    host.wait_settled(DEADLINE).await;
    let status = &host.statuses()[0];
    assert_eq!(status.state, "failed");
    assert!(status.reason.as_deref().unwrap().contains("no handshake within 300ms"), "{status:?}");
    host.shutdown().await;
}
