//! Secrets stay in the kernel: a provider error that echoes the key is scrubbed before it is
//! shown, stored or sent back to the model, and tool plugins never see the kernel's keys.

use serde_json::json;

use crate::agent::AgentEnv;
use crate::gateway::GatewayEnv;
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::{http, stderr};

/// The key `AgentEnv` configures.
const KEY: &str = "test-key";

#[test]
fn a_provider_error_echoing_the_key_is_scrubbed_everywhere_it_goes() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Status {
        code: 400,
        retry_after: None,
        body: format!(r#"{{"error": {{"message": "bad request; you sent Authorization: Bearer {KEY}"}}}}"#),
    });
    let out = env.agent("hi");
    assert_eq!(out.status.code(), Some(1));
    let shown = stderr(&out);
    assert!(shown.contains("[redacted]"), "the error still reaches the user: {shown}");
    assert!(!shown.contains(KEY), "stderr shows the key: {shown}");
    let stored = std::fs::read_to_string(env.session_path()).unwrap();
    assert!(stored.contains("[redacted]") && !stored.contains(KEY), "the session file holds the key: {stored}");

    env.llm.push(Reply::Text("fine now".into()));
    assert!(env.agent("again").status.success());
    let next = env.llm.requests().last().unwrap()["messages"].to_string();
    assert!(!next.contains(KEY), "the next request carries the key back to the model: {next}");
}

#[test]
fn tool_plugins_see_neither_the_kernels_keys_nor_config_variables() {
    let env = AgentEnv::new();
    let config = json!({
        "agents": {"defaults": {"workspace": env.workspace, "model": "test-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "${OXIBOT_TEST_PROVIDER_KEY}", "apiBase": env.llm.base_url()}}
    });
    env.write_config(&config);
    env.llm.push(Reply::ToolCalls(vec![(
        "exec".into(),
        json!({"command": "echo \"[$OXIBOT_TEST_PROVIDER_KEY][$ANTHROPIC_API_KEY]\"; env"}).to_string(),
    )]));
    env.llm.push(Reply::Text("done".into()));
    let out = env
        .command(&["agent", "-m", "show me the environment"])
        .env("OXIBOT_TEST_PROVIDER_KEY", "sk-from-the-environment-1234")
        .env("ANTHROPIC_API_KEY", "sk-ant-kernel-only-5678")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let requests = env.llm.requests();
    let result = requests.last().unwrap()["messages"].to_string();
    assert!(result.contains("[][]"), "exec ran and printed both variables empty: {result}");
    assert!(!result.contains("sk-from-the-environment-1234"), "a ${{VAR}} value reached exec: {result}");
    assert!(!result.contains("sk-ant-kernel-only-5678"), "the kernel's key reached exec: {result}");
    assert!(result.contains("PATH="), "exec still has a working environment: {result}");
}

#[test]
fn an_api_client_never_gets_the_key_a_provider_error_echoed() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let _gateway = env.start_with("api");
    env.llm.push(Reply::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error": {"message": "rejected: Authorization: Bearer gateway-test-key"}}"#.into(),
    });
    let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "hi"}], "session_id": "leak"});
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = env.api_authorization();
    let auth = [("Authorization", key.as_str())];
    let reply =
        runtime.block_on(async { http::post_json(port, "/v1/chat/completions", &auth, &body).await.text().await });
    assert!(reply.contains("[redacted]"), "the client hears about the failure: {reply}");
    assert!(!reply.contains("gateway-test-key"), "the client got the key: {reply}");
    assert!(!env.session_file("api:leak").contains("gateway-test-key"));
}
