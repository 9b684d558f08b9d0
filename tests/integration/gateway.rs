//! `oxibot gateway` end to end: the real binary with the loopback channel plugin and the
//! scripted LLM — replies in the channel, pairing, a killed channel, a killed kernel, health,
//! and a clean SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oxibot_kernel::memory::tokens::exact_tokens;
use oxibot_tests::TempDir;
use oxibot_tests::channels::free_port;
use oxibot_tests::http::gateway_health;
use oxibot_tests::llm::{Reply, ScriptedLlm, system_prompt};
use oxibot_tests::procs::{is_alive, sigkill, wait_until};
use oxibot_tests::wait::DEADLINE;
use serde_json::{Value, json};

/// A data dir whose config enables the loopback channel and points the model at the
/// scripted LLM.
pub(crate) struct GatewayEnv {
    home: TempDir,
    workspace: PathBuf,
    pub(crate) llm: ScriptedLlm,
    channel_port: u16,
    health_port: u16,
}

impl GatewayEnv {
    /// The loopback channel, with `allowFrom` when given.
    fn new(allow_from: Option<Value>) -> GatewayEnv {
        let channel_port = free_port();
        let mut loopback = json!({"enabled": true, "port": channel_port});
        if let Some(allow) = allow_from {
            loopback["allowFrom"] = allow;
        }
        let mut env = GatewayEnv::with_channels(json!({"loopback": loopback}));
        env.channel_port = channel_port;
        env
    }

    /// Any `channels` section (each one needs `"enabled": true`).
    pub(crate) fn with_channels(channels: Value) -> GatewayEnv {
        let home = TempDir::new("gateway-home");
        let workspace = home.path().join("workspace");
        let llm = ScriptedLlm::start();
        let health_port = free_port();
        let config = json!({
            "agents": {"defaults": {"workspace": workspace, "model": "test-model", "provider": "custom"}},
            "providers": {"custom": {"apiKey": "gateway-test-key", "apiBase": llm.base_url()}},
            "channels": channels,
            "gateway": {"port": health_port}
        });
        home.write("config.json", &config.to_string());
        GatewayEnv { home, workspace, llm, channel_port: 0, health_port }
    }

    /// Changes the config file before the gateway starts.
    pub(crate) fn edit_config(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.home.path().join("config.json");
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut config);
        std::fs::write(path, config.to_string()).unwrap();
    }

    /// Sets `tools.approval` to allow every call without asking: for tests of what a call
    /// does in a chat, not of who approves it (the default asks before `exec`, `cron` and a
    /// `message` to another chat).
    pub(crate) fn allow_every_call(&self) {
        let allow = json!({"exec": "allow", "cron": "allow", "message": "allow", "mcp_*": "allow"});
        self.edit_config(|config| config["tools"] = json!({"approval": allow}));
    }

    /// The port of the gateway's HTTP server (`/health` and the web UI).
    pub(crate) fn http_port(&self) -> u16 {
        self.health_port
    }

    /// The data dir (`OXIBOT_HOME`): config, pairing, the outbox.
    pub(crate) fn data_dir(&self) -> &std::path::Path {
        self.home.path()
    }

    /// The workspace directory.
    pub(crate) fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        oxibot_tests::kernel_command(self.home.path(), args)
    }

    /// Starts the gateway and waits until the loopback channel runs.
    fn start(&self) -> Gateway {
        self.start_with("loopback")
    }

    /// Starts the gateway and waits until `channel` runs.
    pub(crate) fn start_with(&self, channel: &str) -> Gateway {
        self.start_with_env(channel, &[])
    }

    /// Starts the gateway with extra environment variables and waits until `channel` runs.
    pub(crate) fn start_with_env(&self, channel: &str, vars: &[(&str, &str)]) -> Gateway {
        let log = std::fs::File::create(self.home.path().join("gateway.log")).unwrap();
        let out = std::fs::File::create(self.home.path().join("gateway.out")).unwrap();
        let child = self.command(&["gateway"]).envs(vars.iter().copied()).stdout(out).stderr(log).spawn().unwrap();
        let gateway = Gateway { child };
        self.wait_running(channel);
        gateway
    }

    /// Waits until the health endpoint reports `plugin` running.
    pub(crate) fn wait_running(&self, plugin_name: &str) {
        let running = || self.health().is_some_and(|h| plugin(&h, plugin_name)["state"] == "running");
        assert!(wait_until(Duration::from_secs(15), running), "{plugin_name} never ran");
    }

    fn client(&self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpStream::connect(("127.0.0.1", self.channel_port)) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    return Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream };
                }
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                Err(error) => panic!("cannot reach the loopback channel: {error}"),
            }
        }
    }

    /// What the health endpoint says about plugin `name` (`state`, `pid`, …), `null` when it
    /// does not answer or does not list it.
    pub(crate) fn plugin_status(&self, name: &str) -> Value {
        self.health().map_or(Value::Null, |health| plugin(&health, name))
    }

    fn health(&self) -> Option<Value> {
        gateway_health(self.health_port)
    }

    /// What the last gateway started logged (its stderr).
    pub(crate) fn gateway_log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    /// What the last gateway started printed on stdout.
    pub(crate) fn gateway_output(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.out")).unwrap_or_default()
    }

    /// The `port` of channel `name` in the config.
    pub(crate) fn channel_port(&self, name: &str) -> u16 {
        let text = std::fs::read_to_string(self.home.path().join("config.json")).unwrap();
        let config: Value = serde_json::from_str(&text).unwrap();
        config["channels"][name]["port"].as_u64().unwrap() as u16
    }

    /// The secret the gateway made for `surface` (`webUi`, `api`, `websocket`) and keeps in
    /// the data dir's `local-secrets.json`.
    pub(crate) fn secret(&self, surface: &str) -> String {
        let path = self.home.path().join("local-secrets.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let secrets: Value = serde_json::from_str(&text).unwrap();
        secrets[surface].as_str().unwrap_or_else(|| panic!("no {surface} secret in {text}")).to_owned()
    }

    /// `Authorization: Bearer` with the web UI's secret, for plain HTTP clients of the UI's API.
    pub(crate) fn ui_authorization(&self) -> String {
        format!("Bearer {}", self.secret("webUi"))
    }

    /// A one-time login link for the web UI, as `oxibot ui` prints it.
    pub(crate) fn login_url(&self) -> String {
        let out = self.command(&["ui"]).output().unwrap();
        assert!(out.status.success(), "oxibot ui failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The websocket channel's URL for `chat` on `port`, with the gateway's token.
    pub(crate) fn ws_url(&self, port: u16, chat: &str) -> String {
        format!("ws://127.0.0.1:{port}/ws?chat_id={chat}&token={}", self.secret("websocket"))
    }

    /// Sends `text` through the websocket channel (with its token) in `chat` and waits for the
    /// reply.
    pub(crate) fn chat_once(&self, chat: &str, text: &str) {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let port = self.channel_port("websocket");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (mut socket, _) = tokio_tungstenite::connect_async(self.ws_url(port, chat)).await.unwrap();
            socket.send(Message::text(json!({"type": "message", "text": text}).to_string())).await.unwrap();
            loop {
                let Some(Ok(Message::Text(frame))) = socket.next().await else { panic!("the websocket closed") };
                if serde_json::from_str::<Value>(&frame).unwrap()["type"] == "message" {
                    break;
                }
            }
        });
    }

    /// `Authorization: Bearer` with the api channel's key.
    pub(crate) fn api_authorization(&self) -> String {
        format!("Bearer {}", self.secret("api"))
    }

    /// The gateway's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    /// The file of session `key` (`channel:chat`), empty when missing.
    pub(crate) fn session_file(&self, key: &str) -> String {
        std::fs::read_to_string(oxibot_tests::session_path(self.home.path(), &self.workspace, key)).unwrap_or_default()
    }

    /// Writes the file of session `key` as a run killed mid-turn would have left it.
    pub(crate) fn write_session_file(&self, key: &str, text: &str) {
        let path = oxibot_tests::session_path(self.home.path(), &self.workspace, key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn session_text(&self, chat: &str) -> String {
        self.session_file(&format!("loopback:{chat}"))
    }
}

fn loopback(health: &Value) -> Value {
    plugin(health, "loopback")
}

fn plugin(health: &Value, name: &str) -> Value {
    health["plugins"].as_array().into_iter().flatten().find(|p| p["name"] == name).cloned().unwrap_or(Value::Null)
}

pub(crate) struct Gateway {
    child: Child,
}

impl Gateway {
    /// Kills the gateway with SIGKILL and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits (at most 10 s) for the exit status.
    pub(crate) fn terminate_and_wait(&mut self) -> std::process::ExitStatus {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn say(&mut self, sender: &str, chat: &str, text: &str) {
        writeln!(self.writer, "{sender}:{chat}:{text}").unwrap();
    }

    /// The next line starting with `prefix` (others are skipped).
    fn expect(&mut self, prefix: &str) -> String {
        self.wait_for(prefix).unwrap_or_else(|e| panic!("waiting for {prefix:?}: {e}"))
    }

    fn wait_for(&mut self, prefix: &str) -> Result<String, String> {
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the channel closed".into());
            }
            if line.starts_with(prefix) {
                return Ok(line.trim_end().to_owned());
            }
        }
    }
}

#[test]
fn a_message_in_the_channel_gets_the_models_reply_in_that_channel() {
    let env = GatewayEnv::new(Some(json!("*")));
    let _gateway = env.start();
    env.llm.push(Reply::Text("Hello from the model".into()));
    let mut client = env.client();
    client.say("alice", "chat1", "hi there");
    client.expect("ACCEPTED");
    assert_eq!(client.expect("OUT chat1"), "OUT chat1 Hello from the model");
    let session = env.session_text("chat1");
    assert!(session.contains("\"hi there\"") && session.contains("Hello from the model"), "{session}");
    let user =
        env.llm.requests()[0]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(user.contains("hi there") && user.contains("loopback"), "{user}");
}

#[test]
fn an_unlisted_sender_gets_a_pairing_code_and_after_approval_is_answered() {
    let env = GatewayEnv::new(None);
    let _gateway = env.start();
    let mut client = env.client();
    client.say("mallory", "dm9", "let me in");
    let reply = client.expect("OUT dm9");
    let code = reply.split_whitespace().last().unwrap().to_owned();
    assert!(reply.contains("oxibot pairing approve") && code.len() == 6, "{reply}");
    assert!(env.llm.requests().is_empty(), "nothing reached the model");
    assert!(!env.session_text("dm9").contains("let me in"), "nothing was stored");

    let approved = env.command(&["pairing", "approve", &code]).output().unwrap();
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    env.llm.push(Reply::Text("Welcome".into()));
    client.say("mallory", "dm9", "hello again");
    assert_eq!(client.expect("OUT dm9"), "OUT dm9 Welcome");

    // An approved sender can approve the next one from the chat.
    client.say("eve", "dm10", "me too");
    let code = client.expect("OUT dm10").split_whitespace().last().unwrap().to_owned();
    client.say("mallory", "dm9", &format!("/pairing approve {code}"));
    assert_eq!(client.expect("OUT dm9"), "OUT dm9 Approved eve on loopback.");
    env.llm.push(Reply::Text("Hi eve".into()));
    client.say("eve", "dm10", "thanks");
    assert_eq!(client.expect("OUT dm10"), "OUT dm10 Hi eve");
}

#[test]
fn a_sender_outside_allow_from_is_refused_without_a_word() {
    let env = GatewayEnv::new(Some(json!(["alice"])));
    let _gateway = env.start();
    let mut client = env.client();
    client.say("bob", "c2", "hello?");
    client.expect("ACCEPTED");
    env.llm.push(Reply::Text("hi alice".into()));
    client.say("alice", "c3", "hello");
    assert_eq!(client.expect("OUT"), "OUT c3 hi alice", "bob got nothing, alice got her answer");
    assert_eq!(env.llm.requests().len(), 1);
}

#[test]
fn a_sigkilled_channel_plugin_comes_back_and_later_messages_flow() {
    let env = GatewayEnv::new(Some(json!("*")));
    let _gateway = env.start();
    let pid = loopback(&env.health().unwrap())["pid"].as_u64().unwrap() as u32;
    sigkill(pid);
    let restarted = || {
        env.health()
            .is_some_and(|h| loopback(&h)["state"] == "running" && loopback(&h)["pid"].as_u64() != Some(u64::from(pid)))
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the channel did not come back");
    env.llm.push(Reply::Text("still here".into()));
    let mut client = env.client();
    client.say("alice", "c1", "are you there?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 still here");
}

#[test]
fn a_kernel_killed_right_after_a_message_arrives_answers_it_after_restart() {
    let env = GatewayEnv::new(Some(json!("*")));
    let mut gateway = env.start();
    env.llm.push(Reply::SlowFirstToken { delay_ms: 30_000, text: "too late".into() });
    let mut client = env.client();
    client.say("alice", "c1", "remember the milk");
    client.expect("ACCEPTED");
    assert!(env.session_text("c1").contains("remember the milk"));
    // Kill only once the model call is out, so the slow reply is the one the dead kernel took.
    assert!(wait_until(Duration::from_secs(10), || !env.llm.requests().is_empty()), "the model was never called");
    let channel_pid = loopback(&env.health().unwrap())["pid"].as_u64().unwrap() as u32;
    sigkill(gateway.child.id());
    gateway.child.wait().unwrap();
    // The old channel process goes down with its kernel (and frees its port) first.
    assert!(wait_until(Duration::from_secs(10), || !is_alive(channel_pid)), "the channel outlived its kernel");

    env.llm.push(Reply::Text("Noted: milk".into()));
    let _restarted = env.start();
    let mut client = env.client();
    let reply = client.wait_for("OUT c1").unwrap_or_else(|e| {
        let log = std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap_or_default();
        let ps = Command::new("ps")
            .args(["-eo", "pid,ppid,stat,wchan:24,args"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let ps: String = ps.lines().filter(|l| l.contains("oxibot")).collect::<Vec<_>>().join("\n");
        panic!(
            "{e}; requests: {}, connections: {}, dropped: {:?}\nlog:\n{log}\nprocesses:\n{ps}",
            env.llm.requests().len(),
            env.llm.connections(),
            env.llm.dropped()
        )
    });
    assert_eq!(reply, "OUT c1 Noted: milk", "the persisted message is answered after the restart");
    let session = env.session_text("c1");
    let stored = session.lines().filter(|l| l.contains(r#""role":"user""#) && l.contains("remember the milk")).count();
    assert_eq!(stored, 1, "stored once: {session}");
}

#[test]
fn health_reports_the_kernel_and_every_plugin_and_sigterm_exits_cleanly() {
    let env = GatewayEnv::new(Some(json!("*")));
    let mut gateway = env.start();
    let health = env.health().unwrap();
    assert_eq!(health["status"], "ok");
    let kinds: Vec<(String, String)> = health["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["kind"].as_str().unwrap().to_owned()))
        .collect();
    assert!(
        kinds.contains(&("loopback".into(), "channel".into())) && kinds.contains(&("fs".into(), "tool".into())),
        "{kinds:?}"
    );
    let plugin_pid = loopback(&health)["pid"].as_u64().unwrap() as u32;

    let status = gateway.terminate_and_wait();
    assert!(status.success(), "exit status {status:?}");
    assert!(wait_until(DEADLINE, || !is_alive(plugin_pid)), "the channel plugin outlived the gateway");
}

// Issue 23, finding 8: a configured plugin took `exec` from the bundled shell plugin with
// nothing but a log line to say so.
#[test]
fn health_names_a_tool_refused_to_a_plugin_that_offers_a_bundled_name() {
    let env = GatewayEnv::new(Some(json!("*")));
    let stress = oxibot_tests::bin("oxibot-stress-plugin");
    env.edit_config(|config| {
        config["plugins"] =
            json!([{"name": "hostile", "command": stress, "env": {"OXIBOT_STRESS_EXTRA_TOOL": "exec"}}]);
    });
    let _gateway = env.start();
    env.wait_running("hostile");
    let health = env.health().unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    let reasons = health["reasons"].to_string();
    assert!(reasons.contains("hostile") && reasons.contains("bundled plugin 'shell'"), "{reasons}");
    assert!(plugin(&health, "hostile")["refused"].to_string().contains(r#"\"replaces\": [\"exec\"]"#), "{health}");
}

#[test]
fn health_says_down_with_the_reason_when_every_channel_has_failed() {
    // The channel cannot listen: its port is taken.
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let env = GatewayEnv::with_channels(json!({"loopback": {"enabled": true, "allowFrom": "*", "port": port}}));
    let log = std::fs::File::create(env.home.path().join("gateway.log")).unwrap();
    let mut gateway = Gateway { child: env.command(&["gateway"]).stdout(Stdio::null()).stderr(log).spawn().unwrap() };
    // Down for good once its restarts are used up (between them a restarted plugin says
    // hello, and counts as running, before it finds its port taken).
    let down = || env.health().is_some_and(|h| h["status"] == "down" && plugin(&h, "loopback")["state"] == "failed");
    // Five restarts with backoff, each a process start: slow on a busy machine.
    assert!(wait_until(DEADLINE, down), "health never said down: {:?}", env.health());
    let health = env.health().unwrap();
    let reasons = health["reasons"].to_string();
    assert!(reasons.contains("channel loopback is"), "the reason names the channel: {reasons}");
    let mut raw = TcpStream::connect(("127.0.0.1", env.health_port)).unwrap();
    raw.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut response = String::new();
    raw.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    assert!(gateway.terminate_and_wait().success());
}

#[test]
fn status_shows_the_running_gateways_channels() {
    let env = GatewayEnv::new(Some(json!("*")));
    let before = env.command(&["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&before.stdout).into_owned();
    assert!(text.contains("gateway:   not running (channels: loopback"), "{text}");
    let _gateway = env.start();
    let after = env.command(&["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&after.stdout).into_owned();
    assert!(
        text.contains("gateway:   running")
            && text.lines().any(|l| l.trim_start().starts_with("loopback") && l.contains("running")),
        "{text}"
    );
    assert!(text.contains("test-model"), "{text}");
}

#[test]
fn a_reply_that_cannot_be_delivered_is_retried_then_recorded_in_the_session() {
    let env = GatewayEnv::new(Some(json!("*")));
    // Retried for 1.8 s instead of hours.
    env.edit_config(|config| config["channels"]["deliveryRetryHours"] = json!(0.0005));
    let child = env
        .command(&["gateway"])
        .env("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "50,50,50")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _gateway = Gateway { child };
    assert!(wait_until(Duration::from_secs(15), || env.health().is_some_and(|h| loopback(&h)["state"] == "running")));
    env.llm.push(Reply::SlowFirstToken { delay_ms: 300, text: "nobody hears this".into() });
    {
        let mut client = env.client();
        client.say("alice", "c9", "talk to you later");
        client.expect("ACCEPTED");
    } // the client leaves: the loopback channel has nobody to deliver to
    let recorded = || {
        env.session_text("c9")
            .lines()
            .next()
            .is_some_and(|header| header.contains("undelivered") && header.contains("nobody hears this"))
    };
    assert!(wait_until(Duration::from_secs(10), recorded), "{}", env.session_text("c9"));
    assert!(env.session_text("c9").contains("no client is connected"));
}

#[test]
fn an_edit_of_allow_from_applies_to_the_running_gateway_and_a_broken_edit_changes_nothing() {
    let env = GatewayEnv::new(Some(json!(["alice"])));
    let _gateway = env.start();
    let mut client = env.client();
    client.say("bob", "c2", "hello?");
    client.expect("ACCEPTED");
    assert!(env.llm.requests().is_empty(), "bob is not allowed yet");

    let log = || std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap_or_default();
    env.edit_config(|config| config["channels"]["loopback"]["allowFrom"] = json!(["alice", "bob"]));
    assert!(wait_until(DEADLINE, || log().contains("config reloaded")), "{}", log());
    env.llm.push(Reply::Text("hi bob".into()));
    client.say("bob", "c2", "and now?");
    assert_eq!(client.expect("OUT c2"), "OUT c2 hi bob");

    std::fs::write(env.home.path().join("config.json"), "{ not json").unwrap();
    assert!(wait_until(DEADLINE, || log().contains("does not load")), "{}", log());
    assert!(log().contains("config.json"), "the error names the file: {}", log());
    env.llm.push(Reply::Text("still here, bob".into()));
    client.say("bob", "c2", "still?");
    assert_eq!(client.expect("OUT c2"), "OUT c2 still here, bob", "a broken edit leaves the settings in force");
}

#[test]
fn a_channel_is_moved_disabled_and_enabled_again_by_config_edits_without_restarting_the_gateway() {
    let mut env = GatewayEnv::new(Some(json!("*")));
    let gateway = env.start();
    let first_port = env.channel_port;
    let log = || std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap_or_default();
    let refused = |port: u16| wait_until(DEADLINE, || TcpStream::connect(("127.0.0.1", port)).is_err());

    let second_port = free_port();
    env.edit_config(|config| config["channels"]["loopback"]["port"] = json!(second_port));
    assert!(wait_until(DEADLINE, || log().contains("its plugin restarted")), "{}", log());
    env.channel_port = second_port;
    env.llm.push(Reply::Text("on the new port".into()));
    let mut client = env.client();
    client.say("alice", "c1", "moved?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 on the new port");
    assert!(refused(first_port), "the old plugin let go of its port");

    env.edit_config(|config| config["channels"]["loopback"]["enabled"] = json!(false));
    assert!(wait_until(DEADLINE, || log().contains("channel disabled")), "{}", log());
    assert!(refused(second_port), "a disabled channel's plugin is stopped");
    assert!(wait_until(DEADLINE, || env.plugin_status("loopback").is_null()), "{}", env.plugin_status("loopback"));

    env.edit_config(|config| {
        config["channels"]["loopback"]["enabled"] = json!(true);
        config["channels"]["loopback"]["port"] = json!(first_port);
    });
    env.channel_port = first_port;
    env.wait_running("loopback");
    env.llm.push(Reply::Text("back again".into()));
    let mut client = env.client();
    client.say("alice", "c1", "there?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 back again");
    assert!(is_alive(gateway.child.id()), "the same gateway process served every step");
    assert!(env.session_text("c1").contains("on the new port"), "the conversation went on in one session");
}

#[test]
fn a_channel_this_version_does_not_have_is_named_and_the_others_still_run() {
    let port = free_port();
    let mut env = GatewayEnv::with_channels(json!({
        "loopback": {"enabled": true, "port": port, "allowFrom": "*"},
        "whatsapp": {"enabled": true, "bridgeUrl": "ws://localhost:3001"}
    }));
    env.channel_port = port;
    let _gateway = env.start();
    let log = std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap();
    assert!(log.contains("channels.whatsapp") && log.contains("runs without it"), "{log}");
    env.llm.push(Reply::Text("still serving".into()));
    let mut client = env.client();
    client.say("alice", "c1", "hi");
    assert_eq!(client.expect("OUT c1"), "OUT c1 still serving");
}

#[test]
fn an_edit_of_the_model_and_its_key_applies_to_the_next_turn_of_a_running_gateway() {
    let env = GatewayEnv::new(Some(json!("*")));
    let _gateway = env.start();
    let mut client = env.client();
    env.llm.push(Reply::Text("from the first model".into()));
    client.say("alice", "c1", "hi");
    assert_eq!(client.expect("OUT c1"), "OUT c1 from the first model");

    let log = || std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap_or_default();
    env.edit_config(|config| {
        config["agents"]["defaults"]["model"] = json!("second-model");
        config["providers"]["custom"]["apiKey"] = json!("rotated-key");
    });
    assert!(wait_until(DEADLINE, || log().contains("model settings applied")), "{}", log());
    env.llm.push(Reply::Text("from the second model".into()));
    client.say("alice", "c1", "and now?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 from the second model");

    let last = env.llm.requests().last().unwrap().clone();
    assert_eq!(last["model"], "second-model");
    let headers = env.llm.request_headers().last().unwrap().clone();
    let authorization = headers.iter().find(|(name, _)| name == "authorization").map(|(_, v)| v.clone());
    assert_eq!(authorization.as_deref(), Some("Bearer rotated-key"));
    let session = env.session_text("c1");
    assert!(session.contains("from the first model"), "the conversation went on in the same session");
}

/// Words of the summariser's system prompt (templates/agent/consolidate.md).
const SUMMARISER: &str = "keep the archive";

/// Exact tokens of a request's messages and tool definitions.
fn prompt_tokens(request: &Value) -> u64 {
    let messages: usize =
        request["messages"].as_array().unwrap().iter().map(|m| exact_tokens(&m["content"].to_string()) + 4).sum();
    (messages + exact_tokens(&request["tools"].to_string())) as u64
}

/// Issue 25: the Consolidator kept budgeting with the context window the gateway started
/// with, so after a switch to a small model older turns were left out of the prompt instead
/// of being archived.
#[test]
fn a_reload_to_a_smaller_context_window_has_the_next_turn_archive_older_turns_down_to_the_new_budget() {
    let env = GatewayEnv::new(Some(json!("*")));
    env.edit_config(|config| {
        config["agents"]["defaults"]["contextWindowTokens"] = json!(200_000);
        config["agents"]["defaults"]["maxTokens"] = json!(500);
        // No silent memory turn before archiving: every request here is a turn or a summary.
        config["memory"] = json!({"flush": false});
    });
    let _gateway = env.start();
    let mut client = env.client();
    let said = |turn: usize| {
        format!("turn {turn}: {}", "We keep bees on the roof and sell the honey at the market. ".repeat(30))
    };
    for turn in 0..12 {
        env.llm.push(Reply::Text(format!("noted {turn}")));
        client.say("alice", "c1", &said(turn));
        assert_eq!(client.expect("OUT c1"), format!("OUT c1 noted {turn}"));
    }
    assert!(env.llm.requests().iter().all(|r| !system_prompt(r).contains(SUMMARISER)), "nothing archived at 200k");
    // A window that holds the first request and about four more of the turns above.
    let first = prompt_tokens(&env.llm.requests()[0]);
    let window = first + 4 * exact_tokens(&said(0)) as u64 + 500 + 1024;
    let log = || std::fs::read_to_string(env.home.path().join("gateway.log")).unwrap_or_default();
    env.edit_config(|config| {
        config["agents"]["defaults"]["model"] = json!("small-local-model");
        config["agents"]["defaults"]["contextWindowTokens"] = json!(window);
    });
    assert!(wait_until(DEADLINE, || log().contains("model settings applied")), "{}", log());
    for n in 0..30 {
        env.llm.route(SUMMARISER, Reply::Text(format!("- bee fact {n}")));
    }
    env.llm.push(Reply::Text("noted at last".into()));
    client.say("alice", "c1", "and the hives?");
    assert_eq!(client.expect("OUT c1"), "OUT c1 noted at last");

    let requests = env.llm.requests();
    let last = requests.iter().rev().find(|r| !system_prompt(r).contains(SUMMARISER)).unwrap();
    assert_eq!(last["model"], "small-local-model");
    let sent = last["messages"].to_string();
    let session: Vec<Value> = env.session_text("c1").lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let archived = session[0]["last_consolidated"].as_u64().unwrap() as usize;
    assert!(archived > 0, "older turns were archived under the new window");
    for turn in 0..12 {
        let index = 1 + 2 * turn;
        let words = format!("turn {turn}:");
        assert!(
            index <= archived || sent.contains(&words),
            "turn {turn} was neither archived (through message {archived}) nor sent to the model"
        );
    }
}

/// Issue 25: an unreadable `pairing.json` was read as empty and written over by the next
/// pairing code, losing every approval in it.
#[test]
fn a_corrupt_pairing_file_is_reported_kept_aside_and_never_written_over() {
    let env = GatewayEnv::new(None);
    let garbage = "{\"approved\": {\"loopback\": [\"alice\"";
    env.home.write("pairing.json", garbage);
    let list = env.command(&["pairing", "list"]).output().unwrap();
    let said = String::from_utf8_lossy(&list.stderr).into_owned();
    assert!(said.contains("pairing.json") && said.contains("EOF while parsing"), "{said}");
    let copies = || -> Vec<PathBuf> {
        let entries = std::fs::read_dir(env.home.path()).unwrap().flatten();
        entries
            .filter(|e| e.file_name().to_string_lossy().starts_with("pairing.json.corrupt-"))
            .map(|e| e.path())
            .collect()
    };
    assert_eq!(copies().len(), 1, "the unreadable file is moved aside");
    assert!(said.contains(&copies()[0].display().to_string()), "the report says where it went: {said}");

    let _gateway = env.start();
    let mut client = env.client();
    client.say("mallory", "dm9", "let me in");
    let code = client.expect("OUT dm9").split_whitespace().last().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(&copies()[0]).unwrap(), garbage, "the copy is kept as it was");
    let fresh = std::fs::read_to_string(env.home.path().join("pairing.json")).unwrap();
    assert!(fresh.contains(&code), "the new code went to a fresh file: {fresh}");
}
