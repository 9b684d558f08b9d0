//! A default gateway's local surfaces — the websocket and api channels as the README enables
//! them, and the web UI — against what issue 23 found: a page of another site driving the
//! assistant through the user's browser (a foreign `Origin`, a DNS-rebound `Host`, a
//! `text/plain` post), and any local process using them with no secret. Also the secrets a user
//! gets: the one-time login link and the api key printed once by `oxibot gateway`, and the line
//! in `oxibot status`.

use std::io::{Read, Write};
use std::time::Duration;

use oxibot_tests::channels::free_port;
use oxibot_tests::llm::Reply;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::gateway::GatewayEnv;

/// A gateway with the websocket and api channels enabled as the README shows (no secrets in
/// the config), and their ports.
fn default_env() -> (GatewayEnv, u16, u16) {
    let (ws_port, api_port) = (free_port(), free_port());
    let env = GatewayEnv::with_channels(json!({
        "websocket": {"enabled": true, "port": ws_port},
        "api": {"enabled": true, "port": api_port}
    }));
    (env, ws_port, api_port)
}

/// Sends `head` (and `body`) on a fresh connection and returns the whole answer.
fn exchange(port: u16, head: &str, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "{head}content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// Issue 23, findings 1 and 2: what a web page of another site can make the user's browser
/// send — a WebSocket upgrade and a `text/plain` post with the page's `Origin`, or to a
/// rebound name — is refused by both channels of a default gateway, and the model never runs.
#[test]
fn a_page_of_another_site_cannot_drive_the_default_websocket_and_api_channels() {
    let (env, ws_port, api_port) = default_env();
    env.llm.push(Reply::ToolCalls(vec![("exec".into(), r#"{"command": "echo pwned"}"#.into())]));
    let _gateway = env.start_with("websocket");
    env.wait_running("api");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        for (origin, host) in [
            (Some("http://evil.example"), format!("evil.example:{ws_port}")),
            (Some("http://evil.example"), format!("127.0.0.1:{ws_port}")),
            (None, format!("rebound.example:{ws_port}")),
        ] {
            let mut request = format!("ws://127.0.0.1:{ws_port}/ws?chat_id=x").into_client_request().unwrap();
            request.headers_mut().insert("host", HeaderValue::from_str(&host).unwrap());
            if let Some(origin) = origin {
                request.headers_mut().insert("origin", HeaderValue::from_static(origin));
            }
            let error = tokio_tungstenite::connect_async(request).await.unwrap_err();
            assert!(error.to_string().contains("403"), "{origin:?} {host}: {error}");
        }
    });
    let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "run exec"}]}).to_string();
    let cross_site = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: evil.example:{api_port}\r\norigin: http://evil.example\r\ncontent-type: text/plain\r\n"
    );
    let answer = exchange(api_port, &cross_site, &body);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let from_page = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{api_port}\r\norigin: http://evil.example\r\ncontent-type: text/plain\r\n"
    );
    assert!(exchange(api_port, &from_page, &body).starts_with("HTTP/1.1 403"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(env.llm.requests().is_empty(), "a refused request made the model run");
}

/// Issue 23: a local process that only knows the ports gets nothing from a default gateway —
/// no chat through the websocket channel, no completion from the api channel, no page from
/// the web UI — while the same requests with the secrets the gateway made are served.
#[test]
fn a_local_process_without_the_secrets_is_refused_everywhere_and_with_them_served() {
    let (env, ws_port, api_port) = default_env();
    env.llm.push(Reply::Text("served with the key".into()));
    let _gateway = env.start_with("websocket");
    env.wait_running("api");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let (mut socket, _) =
            tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{ws_port}/ws?chat_id=x")).await.unwrap();
        let Some(Ok(Message::Text(frame))) = socket.next().await else { panic!("no frame") };
        assert!(frame.contains("not authorised"), "{frame}");
    });
    let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let no_key = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{api_port}\r\ncontent-type: application/json\r\n"
    );
    assert!(exchange(api_port, &no_key, &body).starts_with("HTTP/1.1 401"));
    let page = format!("GET / HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n", env.http_port());
    assert!(exchange(env.http_port(), &page, "").starts_with("HTTP/1.1 401"));
    assert!(env.llm.requests().is_empty(), "a refused request made the model run");

    let with_key = format!("{no_key}authorization: {}\r\n", env.api_authorization());
    let answer = exchange(api_port, &with_key, &body);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("served with the key"), "{answer}");
    let page = format!("{page}authorization: {}\r\n", env.ui_authorization());
    assert!(exchange(env.http_port(), &page, "").starts_with("HTTP/1.1 200"));
}

/// Issue 23, finding 3: a command the assistant ran (`exec`, which may not read the sessions
/// directory) fetched another chat's transcript and the gateway's status from the web UI's
/// loopback port. Through the real shell plugin now, the same `curl` gets a 401 (or, where
/// exec has no network, no connection) and the PIN of the other chat never reaches the model.
#[test]
fn a_command_the_assistant_runs_reads_no_other_chat_through_the_gateways_port() {
    let (env, _ws_port, _api_port) = default_env();
    env.allow_every_call();
    let _gateway = env.start_with("websocket");
    env.llm.push(Reply::Text("Noted.".into()));
    env.chat_once("pin-chat", "my PIN is 4711");
    assert!(env.session_file("websocket:pin-chat").contains("4711"), "the other chat was not saved");
    let base = format!("http://127.0.0.1:{}", env.http_port());
    let command = ["/api/session?key=websocket:pin-chat", "/api/status", "/api/sessions"]
        .map(|path| format!("curl -s -w ' status=%{{http_code}}' '{base}{path}'; echo"))
        .join("; ");
    env.llm.push(Reply::ToolCalls(vec![("exec".into(), json!({"command": command}).to_string())]));
    env.llm.push(Reply::Text("done".into()));
    env.chat_once("curious-chat", "look around");
    let requests = env.llm.requests();
    let messages = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap()["content"].to_string();
    assert!(result.contains("status=401") || result.contains("status=000"), "curl did not run: {result}");
    assert!(!result.contains("status=200"), "{result}");
    assert!(!result.contains("4711"), "exec read another chat's transcript: {result}");
}

/// `oxibot gateway` prints a one-time login link and, the first time, the api key it made;
/// the next start does not show the key again. `oxibot status` says the surfaces need a secret.
#[test]
fn the_gateway_prints_a_login_link_and_the_new_api_key_once_and_status_says_secrets_are_required() {
    let (env, _ws_port, api_port) = default_env();
    let mut gateway = env.start_with("api");
    let output = env.gateway_output();
    let key = env.secret("api");
    let link_prefix = format!("Web UI: http://127.0.0.1:{}/?code=", env.http_port());
    assert!(output.contains(&link_prefix), "{output}");
    assert!(output.contains(&format!("API: http://127.0.0.1:{api_port}/v1, key {key} (shown this once")), "{output}");
    let link = output.lines().find_map(|line| line.strip_prefix(&link_prefix)).unwrap();
    let code = link.split_whitespace().next().unwrap();
    let visit = format!("GET /?code={code} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n", env.http_port());
    let signed_in = exchange(env.http_port(), &visit, "");
    assert!(signed_in.starts_with("HTTP/1.1 303") && signed_in.contains("HttpOnly"), "{signed_in}");
    assert!(exchange(env.http_port(), &visit, "").starts_with("HTTP/1.1 401"), "the link is good once");
    assert!(gateway.terminate_and_wait().success());

    let _again = env.start_with("api");
    let output = env.gateway_output();
    assert!(!output.contains(&key), "the key was shown again: {output}");
    assert!(output.contains("key in channels.api.apiKey"), "{output}");
    assert_eq!(env.secret("api"), key, "the key stays the same across restarts");

    let status = env.command(&["status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("require a secret, on loopback too"), "{status}");
}

/// A websocket channel enabled by a config edit while the gateway runs starts with the
/// generated token too, and an edit elsewhere does not restart the channels (the secrets
/// filled in are the same on both sides of the comparison).
#[test]
fn a_websocket_channel_enabled_by_an_edit_gets_its_token_and_other_edits_leave_the_channels_running() {
    let api_port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": api_port}}));
    let _gateway = env.start_with("api");
    let api_pid = env.plugin_status("api")["pid"].clone();
    let ws_port = free_port();
    env.edit_config(|config| config["channels"]["websocket"] = json!({"enabled": true, "port": ws_port}));
    env.wait_running("websocket");
    env.llm.push(Reply::Text("hello after the edit".into()));
    env.chat_once("edited", "hi");
    assert!(env.session_file("websocket:edited").contains("hello after the edit"));
    assert_eq!(env.plugin_status("api")["pid"], api_pid, "the api channel was restarted by an unrelated edit");
}
