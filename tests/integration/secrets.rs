//! Secrets stay in the kernel: a provider error that echoes the key, as it is or encoded, is
//! scrubbed before it is shown, logged, stored or sent back to the model, and tool plugins
//! never see the kernel's keys.

use serde_json::{Value, json};

use crate::agent::AgentEnv;
use crate::gateway::GatewayEnv;
use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use oxibot_tests::{http, stderr, stdout};

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

/// A key in mixed case with characters URL-encoding changes, whose standard base64 has a `+`
/// (so the URL-safe one differs).
const ECHOED_KEY: &str = "sk-Oxi/Test+Key=0123456789abcdef~GHIJ";

/// [`ECHOED_KEY`] as a provider or a proxy in front of it may echo it back, computed with
/// Python's `base64`, `urllib.parse.quote` and `bytes.hex` (issue 23, finding 7).
const ECHOES: [(&str, &str); 16] = [
    ("as it is", "sk-Oxi/Test+Key=0123456789abcdef~GHIJ"),
    ("base64", "c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ+R0hJSg=="),
    ("base64 of `Bearer <key>`", "QmVhcmVyIHNrLU94aS9UZXN0K0tleT0wMTIzNDU2Nzg5YWJjZGVmfkdISUo="),
    ("`Basic base64(user:key)`", "Basic dXNlcjpzay1PeGkvVGVzdCtLZXk9MDEyMzQ1Njc4OWFiY2RlZn5HSElK"),
    ("URL-safe base64, unpadded", "c2stT3hpL1Rlc3QrS2V5PTAxMjM0NTY3ODlhYmNkZWZ-R0hJSg"),
    ("URL-safe base64 of `Bearer <key>`, unpadded", "QmVhcmVyIHNrLU94aS9UZXN0K0tleT0wMTIzNDU2Nzg5YWJjZGVmfkdISUo"),
    ("URL-encoded", "sk-Oxi%2FTest%2BKey%3D0123456789abcdef~GHIJ"),
    (
        "every byte percent-encoded",
        "%73%6b%2d%4f%78%69%2f%54%65%73%74%2b%4b%65%79%3d%30%31%32%33%34%35%36%37%38%39%61%62%63%64%65%66%7e%47%48%49%4a",
    ),
    ("hex", "736b2d4f78692f546573742b4b65793d303132333435363738396162636465667e4748494a"),
    ("upper-case hex", "736B2D4F78692F546573742B4B65793D303132333435363738396162636465667E4748494A"),
    ("upper case", "SK-OXI/TEST+KEY=0123456789ABCDEF~GHIJ"),
    ("lower case", "sk-oxi/test+key=0123456789abcdef~ghij"),
    ("start and end around stars", "sk-Oxi/Test+K****89abcdef~GHIJ"),
    ("start and end around dots", "sk-Oxi/Te...cdef~GHIJ"),
    (
        "JSON unicode escapes",
        r"\u0073\u006b\u002d\u004f\u0078\u0069\u002f\u0054\u0065\u0073\u0074\u002b\u004b\u0065\u0079\u003d\u0030\u0031\u0032\u0033\u0034\u0035\u0036\u0037\u0038\u0039\u0061\u0062\u0063\u0064\u0065\u0066\u007e\u0047\u0048\u0049\u004a",
    ),
    ("JSON with `\\/` (PHP's default)", r"sk-Oxi\/Test+Key=0123456789abcdef~GHIJ"),
];

#[test]
fn a_provider_error_echoing_the_key_encoded_reaches_neither_screen_log_session_nor_model() {
    let env = AgentEnv::new();
    env.write_config(&json!({
        "agents": {"defaults": {"workspace": env.workspace, "model": "test-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": ECHOED_KEY, "apiBase": env.llm.base_url()}}
    }));
    let mut leaks = Vec::new();
    // One session per form, so that each leak is told apart from the others'.
    for (index, (form, echo)) in ECHOES.into_iter().enumerate() {
        let session = format!("cli:echo-{index}");
        let body = json!({"error": {"message": format!("invalid credentials: {echo}"), "type": "invalid_api_key"}});
        env.llm.push(Reply::Status { code: 401, retry_after: None, body: body.to_string() });
        let out = env.command(&["agent", "-s", &session, "-m", "hi"]).env("RUST_LOG", "trace").output().unwrap();
        let shown = stderr(&out);
        assert!(shown.contains("refused the credentials"), "the error still reaches the user: {shown}");
        leaks.extend(leak(form, echo, "stdout", &stdout(&out)));
        leaks.extend(leak(form, echo, "stderr and the trace log", &shown));

        env.llm.push(Reply::Text("fine now".into()));
        assert!(env.command(&["agent", "-s", &session, "-m", "again"]).output().unwrap().status.success());
        let path = oxibot_tests::session_path(env.home.path(), &env.workspace, &session);
        let stored: String = std::fs::read_to_string(path).unwrap().lines().map(|l| strings(&json_line(l))).collect();
        let next = strings(&env.llm.requests().last().unwrap()["messages"]);
        assert!(stored.contains("refused the credentials"), "the error is kept: {stored}");
        leaks.extend(leak(form, echo, "the session file", &stored));
        leaks.extend(leak(form, echo, "the next model request", &next));
    }
    assert!(leaks.is_empty(), "the key leaked:\n{}", leaks.join("\n"));
}

/// Where `text` shows a piece of the key: any 12 characters of `echo`, or any 8 of the key
/// itself in any case.
fn leak(form: &str, echo: &str, place: &str, text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let chars: Vec<char> = echo.chars().collect();
    let shown_echo = chars.windows(12).map(String::from_iter).find(|piece| text.contains(piece.as_str()));
    let key = ECHOED_KEY.to_lowercase();
    let shown_key = (0..=key.len() - 8).map(|at| &key[at..at + 8]).find(|piece| lower.contains(piece));
    let shown = shown_echo.or(shown_key.map(str::to_owned))?;
    Some(format!("{form}: {place} shows {shown:?}"))
}

fn json_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("unparsable session line {line:?}: {e}"))
}

/// Every string in `value`, one per line: what a reader of the session or the request sees,
/// JSON escapes undone.
fn strings(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text}\n"),
        Value::Array(items) => items.iter().map(strings).collect(),
        Value::Object(fields) => fields.values().map(strings).collect(),
        _ => String::new(),
    }
}
