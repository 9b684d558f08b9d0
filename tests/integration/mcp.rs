//! MCP servers from `tools.mcpServers`, each bridged by its own `oxibot-tool-mcp` plugin, against
//! a real FastMCP server (Python `mcp` package, `tests/fixtures/mcp/server.py`) over stdio and
//! streamable HTTP.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use oxibot_kernel::plugin::mcp::{McpServerConfig, mcp_specs};
use oxibot_kernel::plugin::{PluginError, PluginHost, PluginSpec};
use oxibot_tests::wait::{eventually, within_deadline};
use oxibot_tests::{TempDir, bin_dir, context, oxibot, start_host, stderr, stdout};
use serde_json::{Value, json};

/// The FastMCP test server script.
fn server_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/server.py").display().to_string()
}

/// The bridge spec for a stdio server named `test` with `extra` config keys.
fn stdio_spec(extra: Value) -> PluginSpec {
    let mut entry = json!({"command": "python3", "args": [server_script(), "stdio"]});
    entry.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let servers: BTreeMap<String, McpServerConfig> = serde_json::from_value(json!({"test": entry})).unwrap();
    mcp_specs(&bin_dir(), &servers).remove(0)
}

/// A data dir whose `config.json` holds `tools`.
fn home_with_tools(tools: Value) -> TempDir {
    let home = TempDir::new("mcp-home");
    home.write("config.json", &json!({"tools": tools}).to_string());
    home
}

/// The FastMCP server over streamable HTTP on 127.0.0.1, killed on drop.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(token: &str) -> HttpServer {
        let mut child = Command::new("python3")
            .args([server_script().as_str(), "http"])
            .env("REQUIRED_TOKEN", token)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the server printed no port: {line:?}"));
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ws_arg(ws: &TempDir) -> String {
    ws.path().display().to_string()
}

async fn call(host: &PluginHost, tool: &str, args: Value) -> Result<oxibot_proto::ToolResult, PluginError> {
    within_deadline(tool, host.call(tool, args, context(&std::env::temp_dir()), None)).await
}

#[actix_rt::test]
async fn server_tools_are_offered_with_prefixed_names_and_flattened_schemas() {
    let host = start_host(vec![stdio_spec(json!({}))]).await;
    let status = &host.statuses()[0];
    assert_eq!(status.name, "mcp-test");
    assert_eq!(status.state, "running", "{:?}", status.reason);
    for tool in ["echo", "add", "locate", "fail", "image", "slow", "crash"] {
        assert!(status.tools.contains(&format!("mcp_test_{tool}")), "{tool} missing from {:?}", status.tools);
    }
    let add = host.tool_spec("mcp_test_add").unwrap();
    assert_eq!(add.parameters["properties"]["b"]["type"], "integer", "{}", add.parameters);
    assert_eq!(add.parameters["required"], json!(["a"]));
    let locate = host.tool_spec("mcp_test_locate").unwrap();
    let text = locate.parameters.to_string();
    assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
    assert_eq!(locate.parameters["properties"]["point"]["properties"]["x"]["type"], "number", "{text}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn enabled_tools_limits_what_is_offered() {
    let host = start_host(vec![stdio_spec(json!({"enabledTools": ["echo", "mcp_test_add"]}))]).await;
    let mut tools = host.statuses()[0].tools.clone();
    tools.sort();
    assert_eq!(tools, ["mcp_test_add", "mcp_test_echo"]);
    host.shutdown().await;
}

#[actix_rt::test]
async fn results_are_text_errors_are_tool_errors_and_images_are_described() {
    let host = start_host(vec![stdio_spec(json!({}))]).await;
    let added = call(&host, "mcp_test_add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!((added.content.as_str(), added.is_error), ("5", false));
    let failed = call(&host, "mcp_test_fail", json!({"reason": "no luck"})).await.unwrap();
    // mcp 1.x includes the exception text, 2.x only names the tool.
    assert!(failed.is_error && failed.content.contains("fail"), "{failed:?}");
    let image = call(&host, "mcp_test_image", json!({})).await.unwrap();
    assert!(image.content.starts_with("[image: image/png, ") && image.content.contains("bytes]"), "{image:?}");
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_server_crashing_mid_call_fails_the_call_and_is_restarted() {
    let marker = TempDir::new("mcp-crash");
    let marker = marker.path().join("crashed-once").display().to_string();
    let host = start_host(vec![stdio_spec(json!({"env": {"CRASH_ONCE_FILE": marker}}))]).await;
    let pid_before = host.statuses()[0].pid.unwrap();
    match call(&host, "mcp_test_crash", json!({})).await {
        Ok(result) => assert!(result.is_error && result.content.contains("went away"), "{result:?}"),
        Err(error) => assert!(matches!(error, PluginError::PluginClosed { .. }), "{error}"),
    }
    eventually("the bridge is replaced", || {
        let status = &host.statuses()[0];
        status.state == "running" && status.pid.is_some_and(|pid| pid != pid_before)
    })
    .await;
    let again = call(&host, "mcp_test_crash", json!({})).await.unwrap();
    assert_eq!((again.content.as_str(), again.is_error), ("survived", false));
    host.shutdown().await;
}

#[actix_rt::test]
async fn a_hanging_tool_times_out_per_tool_timeout() {
    let host = start_host(vec![stdio_spec(json!({"toolTimeout": 1}))]).await;
    let result = call(&host, "mcp_test_slow", json!({"seconds": 5})).await.unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(result.content.contains("timed out after 1 s"), "{}", result.content);
    host.shutdown().await;
}

#[test]
fn tools_call_round_trips_through_the_cli() {
    let home = home_with_tools(json!({
        "restrictToWorkspace": false,
        "mcpServers": {"test": {"command": "python3", "args": [server_script(), "stdio"]}},
    }));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "mcp_test_echo", "--workspace", &ws_arg(&ws), "--args", r#"{"text":"round trip"}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "round trip");
}

#[test]
fn a_nanobot_config_with_mcp_servers_is_listed_by_tools_list() {
    let home = TempDir::new("mcp-nanobot");
    let config = json!({
        "agents": {"defaults": {"model": "anthropic/claude-opus-4-5", "maxTokens": 8192}},
        "providers": {"anthropic": {"apiKey": "sk-test"}},
        "tools": {
            "restrictToWorkspace": false,
            "web": {"search": {"apiKey": ""}},
            "mcpServers": {
                "test": {"command": "python3", "args": [server_script(), "stdio"], "toolTimeout": 20, "enabled_tools": ["echo"]}
            }
        }
    });
    home.write("config.json", &serde_json::to_string_pretty(&config).unwrap());
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--json", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let bridge = listed.as_array().unwrap().iter().find(|p| p["name"] == "mcp-test").expect("mcp-test listed");
    assert_eq!(bridge["state"], "running", "{bridge}");
    assert_eq!(bridge["tools"], json!(["mcp_test_echo"]));
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(!names.contains(&"mcp"), "the bridge must not start on its own: {names:?}");
}

#[test]
fn a_streamable_http_server_is_called_with_the_configured_headers() {
    let server = HttpServer::start("secret-key");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let home = home_with_tools(json!({
        "mcpServers": {"web": {"url": url, "headers": {"X-Api-Key": "secret-key"}}},
    }));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "mcp_web_add", "--workspace", &ws_arg(&ws), "--args", r#"{"a":40,"b":2}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "42");
}

#[test]
fn a_model_calls_an_mcp_tool_in_a_turn_and_reads_its_result() {
    use crate::agent::AgentEnv;
    use oxibot_tests::llm::Reply;

    let env = AgentEnv::new();
    let config = json!({
        "agents": {"defaults": {"workspace": env.workspace, "model": "test-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "test-key", "apiBase": env.llm.base_url()}},
        // The test server's Python lives outside the system dirs a confined bridge may read.
        "tools": {"restrictToWorkspace": false,
                  "mcpServers": {"test": {"command": "python3", "args": [server_script(), "stdio"]}}}
    });
    env.write_config(&config);
    env.llm.push(Reply::ToolCalls(vec![("mcp_test_echo".into(), r#"{"text": "from the model"}"#.into())]));
    env.llm.push(Reply::Text("the server echoed it".into()));
    let out = env.agent("use the echo server");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "the server echoed it");
    let requests = env.llm.requests();
    let offered = requests[0]["tools"].to_string();
    assert!(offered.contains("mcp_test_echo"), "the MCP tool is offered to the model: {offered}");
    let result = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(result["role"], "tool");
    assert!(result["content"].as_str().unwrap().contains("from the model"), "{result}");
}
