//! `oxibot mcp serve` with the scripted LLM, driven by the official MCP Python client
//! (`tests/fixtures/mcp/oxibot_client.py`) over stdio and over streamable HTTP: the handshake,
//! the tools, a `chat` call answered by the model in a real turn, `memory_search` finding a
//! fact, the sessions as resources; and the failures a client meets: a missing or wrong key
//! (401 saying how to authenticate) and malformed messages (JSON-RPC errors).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::{TempDir, bin, kernel_command, stderr, stdout};
use serde_json::{Value, json};

/// What the scripted model answers the `chat` call with.
const MODEL_REPLY: &str = "Hello from the scripted model";
/// What the client says.
const CHAT_MESSAGE: &str = "what is new today?";

/// A data dir with a config pointing at the scripted LLM and a fact in `MEMORY.md`.
struct Env {
    home: TempDir,
    llm: ScriptedLlm,
}

impl Env {
    fn new() -> Env {
        oxibot_tests::needs::python_module("mcp", "mcp");
        let home = TempDir::new("mcp-serve");
        let workspace = home.path().join("workspace");
        let llm = ScriptedLlm::start();
        let config = json!({
            "agents": {"defaults": {"workspace": workspace, "model": "test-model", "provider": "custom"}},
            "providers": {"custom": {"apiKey": "test-key", "apiBase": llm.base_url()}}
        });
        home.write("config.json", &config.to_string());
        home.write("workspace/memory/MEMORY.md", "# Memory\n\n- The door code is 4417\n");
        Env { home, llm }
    }

    /// Runs the Python client with `args`; what it saw.
    fn client(&self, args: &[&str]) -> Value {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/oxibot_client.py");
        let out = Command::new("python3")
            .arg(script)
            .args(args)
            .env("OXIBOT_HOME", self.home.path())
            .env("OXIBOT_PROVIDER_RETRY_DELAYS_MS", "20,40,80")
            .env("CHAT_MESSAGE", CHAT_MESSAGE)
            .env("SEARCH_QUERY", "door code")
            .env("RESOURCE_NAME", "mcp:default")
            .output()
            .unwrap();
        assert!(out.status.success(), "the client failed:\n{}\n{}", stdout(&out), stderr(&out));
        serde_json::from_str(stdout(&out).lines().last().unwrap_or_default()).unwrap()
    }

    /// `oxibot mcp serve --http 127.0.0.1:0` with `env`, once it listens.
    fn http_server(&self, env: &[(&str, &str)]) -> HttpServer {
        let mut child = kernel_command(self.home.path(), &["mcp", "serve", "--http", "127.0.0.1:0"])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let url = loop {
            let Some(Ok(line)) = lines.next() else { panic!("the server ended before listening:\n{seen}") };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(url) = line.strip_prefix("oxibot MCP server listening on ") {
                break url.to_owned();
            }
        };
        // Keep reading its logs so they never block it.
        std::thread::spawn(move || for _ in lines {});
        HttpServer { child, url, stderr: seen }
    }

    /// The key `oxibot mcp serve --http` made and kept in the data dir.
    fn kept_key(&self) -> String {
        let secrets: Value =
            serde_json::from_str(&std::fs::read_to_string(self.home.path().join("local-secrets.json")).unwrap())
                .unwrap();
        secrets["mcp"].as_str().unwrap().to_owned()
    }
}

/// A running `oxibot mcp serve --http`, killed on drop.
struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    /// Its stderr up to the line saying where it listens.
    stderr: String,
}

impl HttpServer {
    fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every scenario must have seen: the tools, the model's reply to `chat` (from a real
/// request to the model), the fact `memory_search` found, the session among the resources and
/// its transcript.
fn assert_scenario(seen: &Value, llm: &ScriptedLlm) {
    assert_eq!(seen["protocol_version"], "2025-11-25", "{seen}");
    assert_eq!(seen["server"], "oxibot");
    assert_eq!(seen["tools"], json!(["chat", "memory_search"]));
    assert_eq!(seen["chat"], json!({"text": MODEL_REPLY, "is_error": false}));
    let asked = llm.requests()[0]["messages"].to_string();
    assert!(asked.contains(CHAT_MESSAGE), "{asked}");
    let search = seen["search"]["text"].as_str().unwrap();
    assert!(search.contains("memory/MEMORY.md:3") && search.contains("The door code is 4417"), "{search}");
    let names: Vec<&str> = seen["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert!(names.contains(&"mcp:default"), "{names:?}");
    let transcript = seen["transcript"].as_str().unwrap();
    assert!(transcript.contains(CHAT_MESSAGE) && transcript.contains(MODEL_REPLY), "{transcript}");
}

#[test]
fn the_official_client_chats_searches_memory_and_reads_sessions_over_stdio() {
    let env = Env::new();
    env.llm.push(Reply::Text(MODEL_REPLY.into()));
    let seen = env.client(&["stdio", bin("oxibot").to_str().unwrap()]);
    assert_scenario(&seen, &env.llm);
}

#[test]
fn the_official_client_does_the_same_over_http_with_the_key_the_server_made() {
    let env = Env::new();
    env.llm.push(Reply::Text(MODEL_REPLY.into()));
    let server = env.http_server(&[]);
    let key = env.kept_key();
    assert!(server.stderr.contains(&key), "the new key is shown once: {}", server.stderr);
    let seen = env.client(&["http", &server.url, &key]);
    assert_scenario(&seen, &env.llm);
}

#[tokio::test]
async fn http_without_the_right_key_is_a_401_that_says_how_to_authenticate() {
    let env = Env::new();
    let server = env.http_server(&[("OXIBOT_MCP_KEY", "mcp-test-key")]);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    for headers in [vec![], vec![("Authorization", "Bearer wrong-key")]] {
        let response = oxibot_tests::http::post_json(server.port(), "/mcp", &headers, &ping).await;
        assert_eq!(response.status, 401);
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
        let body = response.json().await;
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("Authorization: Bearer <key>") && message.contains("OXIBOT_MCP_KEY"), "{message}");
    }
    let good = [("Authorization", "Bearer mcp-test-key")];
    let answer = oxibot_tests::http::post_json(server.port(), "/mcp", &good, &ping).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json().await, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert!(env.llm.requests().is_empty());
}

#[tokio::test]
async fn malformed_requests_over_http_get_json_rpc_errors() {
    let env = Env::new();
    let server = env.http_server(&[("OXIBOT_MCP_KEY", "mcp-test-key")]);
    let auth = [("Authorization", "Bearer mcp-test-key")];
    let broken = oxibot_tests::http::request(server.port(), "POST", "/mcp", &auth, Some("{\"jsonrpc\": ")).await;
    assert_eq!(broken.status, 400);
    let body = broken.json().await;
    assert_eq!((body["id"].clone(), body["error"]["code"].clone()), (Value::Null, json!(-32700)), "{body}");
    let unknown = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/destroy"});
    let body = oxibot_tests::http::post_json(server.port(), "/mcp", &auth, &unknown).await.json().await;
    assert_eq!((body["id"].clone(), body["error"]["code"].clone()), (json!(7), json!(-32601)), "{body}");
    let no_message =
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "chat", "arguments": {}}});
    let body = oxibot_tests::http::post_json(server.port(), "/mcp", &auth, &no_message).await.json().await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

#[test]
fn malformed_lines_over_stdio_get_json_rpc_errors_and_the_server_goes_on() {
    let env = Env::new();
    let mut child = kernel_command(env.home.path(), &["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"this is not json\n[1, 2]\n{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"ping\"}\n").unwrap();
    drop(input);
    let out: Output = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let answers: Vec<Value> = stdout(&out).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let codes: Vec<Value> = answers.iter().map(|a| a["error"]["code"].clone()).collect();
    assert_eq!(codes, [json!(-32700), json!(-32600), Value::Null], "{answers:?}");
    assert_eq!(answers[2], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
}
