//! MCP servers from `tools.mcpServers`, each bridged by its own `oxibot-tool-mcp` plugin, against
//! a real FastMCP server (Python `mcp` package, `tests/fixtures/mcp/server.py`) over stdio,
//! streamable HTTP and the legacy HTTP+SSE transport; images of results saved to the media
//! directory; a server in a virtualenv outside the system directories under the sandbox; an
//! entry the bridge refuses, by its key.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use oxibot_kernel::plugin::mcp::{McpServerConfig, mcp_specs};
use oxibot_kernel::plugin::{PluginError, PluginHost, PluginSpec};
use oxibot_proto::ENV_MEDIA_DIR;
use oxibot_tests::wait::{eventually, within_deadline};
use oxibot_tests::{TempDir, bin, context, oxibot, start_host, stderr, stdout};
use serde_json::{Value, json};

/// The FastMCP test server script.
fn server_script() -> String {
    oxibot_tests::needs::python_module("mcp", "mcp");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/server.py").display().to_string()
}

/// The bridge spec for a stdio server named `test` with `extra` config keys.
fn stdio_spec(extra: Value) -> PluginSpec {
    let mut entry = json!({"command": "python3", "args": [server_script(), "stdio"]});
    entry.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let servers: BTreeMap<String, McpServerConfig> = serde_json::from_value(json!({"test": entry})).unwrap();
    mcp_specs(&bin("oxibot"), &servers).remove(0)
}

/// A data dir whose `config.json` holds `tools`.
fn home_with_tools(tools: Value) -> TempDir {
    let home = TempDir::new("mcp-home");
    home.write("config.json", &json!({"tools": tools}).to_string());
    home
}

/// The bridge spec for a stdio server named `test` that saves images to `media`.
fn stdio_spec_saving_to(media: &TempDir) -> PluginSpec {
    let mut spec = stdio_spec(json!({}));
    spec.env.insert(ENV_MEDIA_DIR.to_owned(), media.path().display().to_string());
    spec
}

/// The FastMCP server over HTTP on 127.0.0.1 (`mode` `http` for streamable HTTP, `sse` for the
/// legacy transport), killed on drop.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(token: &str) -> HttpServer {
        HttpServer::start_mode("http", token, &[])
    }

    fn start_mode(mode: &str, token: &str, env: &[(&str, &str)]) -> HttpServer {
        let mut child = Command::new("python3")
            .args([server_script().as_str(), mode])
            .env("REQUIRED_TOKEN", token)
            .envs(env.iter().copied())
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

/// The path in a `[… saved to PATH (…)]` reference.
fn saved_path(text: &str) -> PathBuf {
    let start = text.find(" saved to ").unwrap_or_else(|| panic!("no saved file in {text:?}")) + " saved to ".len();
    let end = start + text[start..].find(" (").unwrap();
    PathBuf::from(&text[start..end])
}

#[actix_rt::test]
async fn results_are_text_errors_are_tool_errors_and_images_are_saved_to_the_media_dir() {
    let media = TempDir::new("mcp-media");
    let host = start_host(vec![stdio_spec_saving_to(&media)]).await;
    let added = call(&host, "mcp_test_add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!((added.content.as_str(), added.is_error), ("5", false));
    let failed = call(&host, "mcp_test_fail", json!({"reason": "no luck"})).await.unwrap();
    // mcp 1.x includes the exception text, 2.x only names the tool.
    assert!(failed.is_error && failed.content.contains("fail"), "{failed:?}");
    let image = call(&host, "mcp_test_image", json!({})).await.unwrap();
    assert!(!image.is_error, "{image:?}");
    assert!(
        image.content.starts_with("[image saved to ") && image.content.ends_with(" (image/png, 70 bytes)]"),
        "{image:?}"
    );
    let path = saved_path(&image.content);
    assert_eq!(path.parent(), Some(media.path()));
    assert_eq!(path.extension().unwrap(), "png");
    assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG\r\n"), "the file holds the PNG itself");
    host.shutdown().await;
}

#[actix_rt::test]
async fn embedded_resources_read_as_text_and_a_binary_one_is_saved() {
    let media = TempDir::new("mcp-media");
    let host = start_host(vec![stdio_spec_saving_to(&media)]).await;
    let report = call(&host, "mcp_test_report", json!({})).await.unwrap();
    let lines: Vec<&str> = report.content.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "the report",
            "[resource: memo://notes (text/plain)]",
            "brew at 80 C",
            "[resource: memo://raw (application/octet-stream)]"
        ],
        "{report:?}"
    );
    assert!(
        lines[4].starts_with("[resource saved to ") && lines[4].ends_with(" (application/octet-stream, 8 bytes)]"),
        "{report:?}"
    );
    assert_eq!(std::fs::read(saved_path(lines[4])).unwrap(), (0..8).collect::<Vec<u8>>());
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
fn a_legacy_sse_server_is_inferred_from_its_url_and_called_with_the_configured_headers() {
    let server = HttpServer::start_mode("sse", "sse-key", &[]);
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let home = home_with_tools(json!({
        "mcpServers": {"old": {"url": url, "headers": {"X-Api-Key": "sse-key"}}},
    }));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "mcp_old_add", "--workspace", &ws_arg(&ws), "--args", r#"{"a":40,"b":2}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "42");
    let out = oxibot(home.path(), ws.path(), &["tools", "call", "mcp_old_image", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let path = saved_path(stdout(&out).trim());
    assert_eq!(
        path.parent(),
        Some(home.path().join("media/mcp-old").as_path()),
        "the kernel's media dir for the bridge"
    );
    assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn an_sse_server_named_by_type_is_listed_with_its_tools_and_a_wrong_key_is_refused() {
    let server = HttpServer::start_mode("sse", "sse-key", &[("SSE_PATH", "/events")]);
    let url = format!("http://127.0.0.1:{}/events", server.port);
    let home = home_with_tools(json!({"mcpServers": {
        "old": {"type": "sse", "url": url, "headers": {"X-Api-Key": "sse-key"}, "enabledTools": ["echo", "add"]},
        "locked": {"type": "sse", "url": url, "headers": {"X-Api-Key": "wrong"}},
    }}));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--json", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let plugin = |name: &str| listed.as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap();
    let old = plugin("mcp-old");
    assert_eq!(old["state"], "running", "{old}");
    assert_eq!(old["tools"], json!(["mcp_old_add", "mcp_old_echo"]));
    let locked = plugin("mcp-locked");
    assert_eq!(locked["state"], "failed", "{locked}");
    assert!(locked["reason"].as_str().unwrap().contains("answered HTTP 401"), "{locked}");
}

/// Issue 27, finding 6: a stdio server running git under the sandbox (`mcp-server-git`) failed
/// whenever `~/.gitconfig` existed ("unknown error occurred while reading the configuration
/// files"). This one runs git before it starts serving and leaves what git said in the
/// workspace.
#[test]
fn a_stdio_server_runs_git_with_the_users_identity_under_restriction() {
    let user = TempDir::new("mcp-git-user");
    user.write(".gitconfig", "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n");
    let ws = TempDir::new("mcp-ws");
    let script = "import runpy, subprocess, sys\n\
                  with open(sys.argv[2] + '/ident.txt', 'w') as out:\n\
                  \x20   subprocess.run(['git', 'var', 'GIT_AUTHOR_IDENT'], stdout=out, stderr=out)\n\
                  sys.argv = [sys.argv[1], 'stdio']\n\
                  runpy.run_path(sys.argv[0], run_name='__main__')\n";
    let home = home_with_tools(json!({
        "restrictToWorkspace": true,
        "mcpServers": {"git": {"command": python_executable(), "args": ["-c", script, server_script(), ws_arg(&ws)]}},
    }));
    let out = oxibot_tests::kernel_command(
        home.path(),
        &["tools", "call", "mcp_git_echo", "--workspace", &ws_arg(&ws), "--args", r#"{"text":"served"}"#],
    )
    .current_dir(ws.path())
    .env("HOME", user.path())
    .output()
    .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let ident = std::fs::read_to_string(ws.path().join("ident.txt")).unwrap();
    assert!(ident.starts_with("Ada Lovelace <ada@example.org>"), "{ident}");
}

/// The Python interpreter `python3` runs, wherever it is installed (a pyenv shim finds it
/// through the home directory, which the test replaces).
fn python_executable() -> String {
    let out = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_stdio_server_in_a_virtualenv_outside_the_system_dirs_runs_under_restriction() {
    // A virtualenv in a temporary directory, with a module in its own site-packages that the
    // server imports first: the server starts only if its sandbox lets it run the virtualenv's
    // Python (a link to an interpreter elsewhere) and read the virtualenv. (Without Landlock
    // the plugins run unconfined and this only shows the virtualenv works.)
    let scratch = TempDir::new("mcp-venv");
    let venv = scratch.path().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip", "--system-site-packages"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let python = venv.join("bin/python");
    let purelib = Command::new(&python)
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        .output()
        .unwrap();
    let site_packages = PathBuf::from(String::from_utf8(purelib.stdout).unwrap().trim());
    assert!(site_packages.starts_with(&venv), "{}", site_packages.display());
    std::fs::write(site_packages.join("oxibot_venv_probe.py"), "").unwrap();
    let home = home_with_tools(json!({
        "restrictToWorkspace": true,
        "mcpServers": {"venv": {"command": python, "args": [server_script(), "stdio"], "env": {"VENV_MODULE": "oxibot_venv_probe"}}},
    }));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "mcp_venv_echo", "--workspace", &ws_arg(&ws), "--args", r#"{"text":"from the venv"}"#],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "from the venv");
    // The confined bridge may write its media dir (and nothing else of the data dir).
    let out = oxibot(home.path(), ws.path(), &["tools", "call", "mcp_venv_image", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(saved_path(stdout(&out).trim()).starts_with(home.path().join("media/mcp-venv")), "{}", stdout(&out));
}

#[test]
fn an_entry_the_bridge_refuses_fails_only_its_own_bridge_naming_the_key() {
    let home = home_with_tools(json!({
        "restrictToWorkspace": false,
        "mcpServers": {
            "bad": {"command": "python3", "args": [server_script(), "stdio"], "toolTimeout": "soon"},
            "empty": {},
            "good": {"command": "python3", "args": [server_script(), "stdio"], "someFutureKey": {"a": 1}},
        },
    }));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--json", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "the rest of the config still loads: {}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let plugin = |name: &str| listed.as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap();
    let bad = plugin("mcp-bad");
    assert_eq!(bad["state"], "failed", "{bad}");
    assert!(bad["reason"].as_str().unwrap().contains("tools.mcpServers.bad.toolTimeout: invalid type"), "{bad}");
    let empty = plugin("mcp-empty");
    assert!(empty["reason"].as_str().unwrap().contains("tools.mcpServers.empty: needs `command`"), "{empty}");
    assert_eq!(plugin("mcp-good")["state"], "running", "an unknown key reaches the bridge, which ignores it");
}

#[test]
fn a_model_calls_an_mcp_tool_in_a_turn_and_reads_its_result() {
    use crate::agent::AgentEnv;
    use oxibot_tests::llm::Reply;

    let env = AgentEnv::new();
    let config = json!({
        "agents": {"defaults": {"workspace": env.workspace, "model": "test-model", "provider": "custom"}},
        "providers": {"custom": {"apiKey": "test-key", "apiBase": env.llm.base_url()}},
        // Confined (the default): the bridge may run the server's interpreter wherever it lives.
        "tools": {"mcpServers": {"test": {"command": "python3", "args": [server_script(), "stdio"]}}}
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

/// The `oxibot tools list --json` entry of the bridge of server `server` configured in `tools`.
fn listed_bridge(tools: Value, server: &str) -> Value {
    let home = home_with_tools(tools);
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--json", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let name = format!("mcp-{server}");
    listed.as_array().unwrap().iter().find(|p| p["name"] == name.as_str()).expect("the bridge is listed").clone()
}

#[test]
fn the_bridge_speaks_mcp_2026_07_28_with_a_server_that_has_it_over_stdio_and_streamable_http() {
    let stdio = listed_bridge(
        json!({"restrictToWorkspace": false, "mcpServers": {"test": {"command": "python3", "args": [server_script(), "stdio"]}}}),
        "test",
    );
    assert_eq!((&stdio["state"], &stdio["detail"]), (&json!("running"), &json!("MCP revision 2026-07-28")), "{stdio}");
    let server = HttpServer::start("revision-key");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let http =
        listed_bridge(json!({"mcpServers": {"web": {"url": url, "headers": {"X-Api-Key": "revision-key"}}}}), "web");
    assert_eq!((&http["state"], &http["detail"]), (&json!("running"), &json!("MCP revision 2026-07-28")), "{http}");
}

#[test]
fn the_bridge_falls_back_to_initialize_with_a_server_from_before_2026_07_28_and_tools_list_says_so() {
    let home = home_with_tools(json!({"restrictToWorkspace": false, "mcpServers": {"old": {
        "command": "python3", "args": [server_script(), "stdio"], "env": {"HANDSHAKE_ONLY": "1"}}}}));
    let ws = TempDir::new("mcp-ws");
    let out = oxibot(home.path(), ws.path(), &["tools", "list", "--workspace", &ws_arg(&ws)]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let table = stdout(&out);
    let row = table.lines().position(|line| line.starts_with("mcp-old ")).expect("the bridge is listed");
    assert!(table.lines().nth(row).unwrap().contains("running"), "{table}");
    assert_eq!(table.lines().nth(row + 1).map(str::trim), Some("MCP revision 2025-11-25"), "{table}");
    let call = oxibot(
        home.path(),
        ws.path(),
        &["tools", "call", "mcp_old_echo", "--workspace", &ws_arg(&ws), "--args", r#"{"text":"still served"}"#],
    );
    assert!(call.status.success(), "stderr: {}", stderr(&call));
    assert_eq!(stdout(&call).trim(), "still served");
}
