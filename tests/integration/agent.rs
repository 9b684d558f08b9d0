//! `oxibot agent` end to end: the real binary, real plugins, and the scripted LLM server
//! speaking the OpenAI wire format on 127.0.0.1.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::procs::{sigkill, wait_until};
use oxibot_tests::wait::{eventually, within_deadline};
use oxibot_tests::{TempDir, bin, stderr, stdout};
use serde_json::{Value, json};

/// A data dir whose config points the `custom` provider at the scripted LLM.
pub(crate) struct AgentEnv {
    pub(crate) home: TempDir,
    pub(crate) workspace: PathBuf,
    pub(crate) llm: ScriptedLlm,
}

impl AgentEnv {
    pub(crate) fn new() -> AgentEnv {
        AgentEnv::with_defaults(json!({}))
    }

    /// Like `new`, with extra `agents.defaults` keys.
    pub(crate) fn with_defaults(extra: Value) -> AgentEnv {
        let home = TempDir::new("agent-home");
        let workspace = home.path().join("workspace");
        let llm = ScriptedLlm::start();
        let mut defaults =
            json!({"workspace": workspace, "model": "test-model", "provider": "custom", "maxToolIterations": 5});
        for (key, value) in extra.as_object().into_iter().flatten() {
            defaults[key] = value.clone();
        }
        let config = json!({
            "agents": {"defaults": defaults},
            "providers": {"custom": {"apiKey": "test-key", "apiBase": llm.base_url()}}
        });
        home.write("config.json", &config.to_string());
        AgentEnv { home, workspace, llm }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        oxibot_tests::kernel_command(self.home.path(), args)
    }

    pub(crate) fn agent(&self, message: &str) -> Output {
        self.command(&["agent", "-m", message]).output().unwrap()
    }

    /// Where the kernel keeps the `cli:direct` session.
    pub(crate) fn session_path(&self) -> PathBuf {
        oxibot_tests::session_path(self.home.path(), &self.workspace, "cli:direct")
    }

    /// The session file's metadata line and messages, without the inbox and journal records
    /// (skipped as a nanobot-compatible reader skips them).
    pub(crate) fn session_lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.session_path()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("unparsable session line {l:?}: {e}")))
            .filter(|line| !matches!(line["_type"].as_str(), Some("inbox" | "call")))
            .collect()
    }

    pub(crate) fn write(&self, relative: &str, content: &str) {
        let path = self.workspace.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// Replaces the config file.
    pub(crate) fn write_config(&self, config: &Value) {
        self.home.write("config.json", &config.to_string());
    }
}

pub(crate) fn roles(lines: &[Value]) -> Vec<String> {
    lines[1..].iter().map(|l| l["role"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn sessions_are_kept_in_the_data_dir_where_the_file_tools_cannot_reach_them() {
    let env = AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("list_dir".into(), r#"{"path": "."}"#.into())]));
    env.llm.push(Reply::Text("done".into()));
    let out = env.agent("what is in my workspace?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(!env.workspace.join("sessions").exists(), "no session directory inside the workspace");
    assert!(env.session_path().starts_with(env.home.path().join("sessions")));
    assert_eq!(roles(&env.session_lines()), ["user", "assistant", "tool", "assistant"]);
    let listing = env.session_lines()[3]["content"].as_str().unwrap().to_owned();
    assert!(!listing.starts_with("Error"), "list_dir ran: {listing}");
    assert!(!listing.contains("sessions"), "the model's listing shows no session files: {listing}");
}

#[test]
fn a_message_too_long_for_the_model_is_saved_whole_and_the_model_gets_its_start_and_where_it_is() {
    let env = AgentEnv::with_defaults(json!({"contextWindowTokens": 8192, "maxTokens": 1024}));
    env.llm.push(Reply::Text("I will read it in parts".into()));
    let long = format!("BEGIN {}", "lorem ipsum dolor sit amet ".repeat(4_000));
    let out = env.agent(&long);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let uploads: Vec<_> = std::fs::read_dir(env.workspace.join("uploads")).unwrap().flatten().collect();
    assert_eq!(uploads.len(), 1);
    assert_eq!(std::fs::read_to_string(uploads[0].path()).unwrap(), long, "the whole message is kept");
    let request = &env.llm.requests()[0];
    let sent = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(sent.len() < 10_000, "the model gets {} bytes", sent.len());
    assert!(sent.contains("BEGIN") && sent.contains("uploads/message-"), "{}", &sent[sent.len() - 400..]);
}

#[test]
fn a_plain_turn_prints_the_answer_and_stores_both_messages() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("Hello from the model".into()));
    let out = env.agent("hello");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Hello from the model");
    let lines = env.session_lines();
    assert_eq!(lines[0]["_type"], "metadata");
    assert_eq!(lines[0]["key"], "cli:direct");
    assert_eq!(roles(&lines), ["user", "assistant"]);
    assert_eq!(lines[1]["content"], "hello", "the stored message is the user's own words");
    let request = &env.llm.requests()[0];
    assert_eq!(request["model"], "test-model");
    assert_eq!(request["messages"][0]["role"], "system");
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(user.contains("hello") && user.contains("cli"), "runtime context merged into the user message: {user}");
}

#[test]
fn a_tool_turn_runs_read_file_through_the_fs_plugin_and_stores_the_whole_exchange() {
    let env = AgentEnv::new();
    env.write("notes.md", "the secret word is marmalade\n");
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    env.llm.push(Reply::Text("The secret word is marmalade.".into()));
    let out = env.agent("what is the secret word?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "The secret word is marmalade.");
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(lines[2]["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(lines[3]["tool_call_id"], lines[2]["tool_calls"][0]["id"]);
    assert!(lines[3]["content"].as_str().unwrap().contains("marmalade"));
    let second = &env.llm.requests()[1];
    let tool_message =
        second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").expect("tool result sent back");
    assert!(tool_message["content"].as_str().unwrap().contains("1| the secret word is marmalade"));
}

#[test]
fn parallel_tool_calls_in_one_step_all_get_results_in_order() {
    let env = AgentEnv::new();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    env.llm.push(Reply::ToolCalls(vec![
        ("read_file".into(), r#"{"path": "a.txt"}"#.into()),
        ("read_file".into(), r#"{"path": "b.txt"}"#.into()),
    ]));
    env.llm.push(Reply::Text("done".into()));
    let out = env.agent("read both");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant", "tool", "tool", "assistant"]);
    assert!(lines[3]["content"].as_str().unwrap().contains("alpha"));
    assert!(lines[4]["content"].as_str().unwrap().contains("beta"));
}

#[test]
fn invalid_tool_arguments_become_an_error_the_model_reads() {
    let env = AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), "{\"path\": ".into())]));
    env.llm.push(Reply::Text("sorry, let me fix that".into()));
    let out = env.agent("read it");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let second = &env.llm.requests()[1];
    let tool_message = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert!(tool_message["content"].as_str().unwrap().contains("not valid JSON"), "{tool_message}");
}

#[test]
fn an_unknown_tool_gets_a_did_you_mean_result() {
    let env = AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("read_files".into(), r#"{"path": "x"}"#.into())]));
    env.llm.push(Reply::Text("ok".into()));
    assert!(env.agent("go").status.success());
    let second = &env.llm.requests()[1];
    let tool_message = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert!(tool_message["content"].as_str().unwrap().contains("did you mean 'read_file'"), "{tool_message}");
}

#[test]
fn rate_limits_and_server_errors_are_retried_until_an_answer_arrives() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Status {
        code: 429,
        retry_after: Some(0),
        body: r#"{"error": {"message": "slow down"}}"#.into(),
    });
    env.llm.push(Reply::Status { code: 500, retry_after: None, body: "oops".into() });
    env.llm.push(Reply::Text("finally".into()));
    let out = env.agent("hi");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "finally");
    assert_eq!(env.llm.requests().len(), 3);
}

#[test]
fn a_stream_cut_mid_way_is_retried() {
    let env = AgentEnv::new();
    env.llm.push(Reply::CutStream { text: "partial answer that will be cut".into(), after_chunks: 2 });
    env.llm.push(Reply::Text("complete answer".into()));
    let out = env.agent("hi");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stdout(&out).trim().ends_with("complete answer"), "{}", stdout(&out));
    let lines = env.session_lines();
    assert_eq!(lines.last().unwrap()["content"], "complete answer");
}

#[test]
fn an_auth_failure_is_not_retried_and_reaches_the_user_clearly() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Status {
        code: 401,
        retry_after: None,
        body: r#"{"error": {"message": "invalid api key"}}"#.into(),
    });
    let out = env.agent("hi");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).to_lowercase().contains("api key"), "{}", stderr(&out));
    assert_eq!(env.llm.requests().len(), 1, "401 must not be retried");
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant"], "the user's message is kept and the error closes the turn");
}

#[test]
fn malformed_model_output_fails_the_turn_with_a_clear_error() {
    let env = AgentEnv::new();
    for _ in 0..4 {
        env.llm.push(Reply::Malformed);
    }
    let out = env.agent("hi");
    assert_eq!(out.status.code(), Some(1));
    assert!(!stderr(&out).is_empty());
    assert_eq!(roles(&env.session_lines())[0], "user");
}

#[test]
fn a_slow_first_token_is_waited_for() {
    let env = AgentEnv::new();
    env.llm.push(Reply::SlowFirstToken { delay_ms: 700, text: "worth the wait".into() });
    let out = env.agent("hi");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "worth the wait");
}

#[test]
fn an_empty_reply_is_retried_once_then_answered_with_a_fallback() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text(String::new()));
    env.llm.push(Reply::Text(String::new()));
    let out = env.agent("hi");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains("couldn't come up with a reply"), "{}", stdout(&out));
    assert_eq!(env.llm.requests().len(), 2);
}

#[test]
fn hitting_the_iteration_cap_ends_the_turn_with_a_message_saying_so() {
    let env = AgentEnv::new();
    // A model that keeps working (each call different), never answering.
    for step in 0..5 {
        env.llm.push(Reply::ToolCalls(vec![("list_dir".into(), format!(r#"{{"path": ".", "step": {step}}}"#))]));
    }
    let out = env.agent("loop forever");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains("tool-iteration limit"), "{}", stdout(&out));
    assert_eq!(env.llm.requests().len(), 5);
}

#[test]
fn a_kernel_killed_mid_turn_keeps_the_message_and_the_next_start_sends_a_valid_history() {
    let env = AgentEnv::new();
    env.llm.push(Reply::ToolCalls(vec![("exec".into(), r#"{"command": "sleep 30"}"#.into())]));
    let mut kernel = env
        .command(&["agent", "-m", "please run the long job"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let session = env.session_path();
    let tool_call_stored = || std::fs::read_to_string(&session).is_ok_and(|t| t.contains("tool_calls"));
    assert!(wait_until(Duration::from_secs(15), tool_call_stored), "the tool call never reached the session file");
    sigkill(kernel.id());
    kernel.wait().unwrap();

    env.llm.push(Reply::Text("back again".into()));
    let out = env.agent("are you there?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let lines = env.session_lines();
    assert_eq!(lines[1]["content"], "please run the long job", "the first message survived the kill");
    let request = env.llm.requests().last().unwrap().clone();
    assert_provider_valid(&request["messages"]);
    let sent: Vec<&str> =
        request["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(sent.iter().any(|c| c.contains("please run the long job")));
}

/// Every assistant tool call is answered by a tool message before the next user message.
pub(crate) fn assert_provider_valid(messages: &Value) {
    let messages = messages.as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "unanswered tool calls {open:?} before an assistant message");
                open = message["tool_calls"]
                    .as_array()
                    .map(|c| c.iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default();
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert!(open.iter().any(|o| o == id), "tool result {id} answers no open call");
                open.retain(|o| o != id);
            }
            "user" => assert!(open.is_empty(), "unanswered tool calls {open:?} before a user message"),
            _ => {}
        }
    }
}

#[test]
fn onboard_writes_config_and_a_workspace_inside_the_data_dir_without_overwriting() {
    let home = TempDir::new("onboard");
    let run = || {
        Command::new(bin("oxibot"))
            .arg("onboard")
            .env("OXIBOT_HOME", home.path())
            .env("HOME", home.path())
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(config["agents"]["defaults"]["provider"], "auto");
    let workspace = home.path().join("workspace");
    assert_eq!(
        config["agents"]["defaults"]["workspace"],
        workspace.display().to_string(),
        "OXIBOT_HOME moves the workspace too"
    );
    let soul = workspace.join("SOUL.md");
    assert!(soul.exists(), "templates written to the configured workspace: {}", stdout(&out));
    std::fs::write(&soul, "my own soul").unwrap();
    assert!(run().status.success());
    assert_eq!(std::fs::read_to_string(&soul).unwrap(), "my own soul");
}

#[actix_rt::test]
async fn stop_ends_a_running_turn_and_the_session_stays_valid() {
    use oxibot_kernel::agent::{SessionManager, TurnReply};
    use oxibot_kernel::config::Config;
    use oxibot_kernel::provider::Provider;
    use oxibot_kernel::services::Services;
    use std::sync::Arc;

    let env = AgentEnv::new();
    std::fs::create_dir_all(&env.workspace).unwrap();
    // A reply that takes ten minutes to start: only the stop can end the turn within the test.
    env.llm.push(Reply::SlowFirstToken { delay_ms: 600_000, text: "too late".into() });
    let config = Config::load(&env.home.path().join("config.json")).unwrap();
    let provider = Provider::from_config(&config.llm()).unwrap();
    let host = oxibot_tests::start_host(vec![oxibot_tests::tool_spec("fs")]).await;
    let services = Arc::new(Services::new(config, env.workspace.clone(), env.home.path(), provider, host, true));
    let manager = Arc::new(SessionManager::new(services.clone()));
    let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
    let turn = {
        let manager = manager.clone();
        let events = events.clone();
        actix_rt::spawn(async move { manager.send("cli:direct", "tell me a long story", events).await })
    };
    eventually("the model was called", || !env.llm.requests().is_empty()).await;
    let stop = manager.send("cli:direct", "/stop", events.clone()).await.unwrap();
    assert_eq!(stop, TurnReply::Command("Stopping.".into()));
    let reply = within_deadline("stop must not wait for the model", turn).await.unwrap().unwrap();
    assert_eq!(reply, TurnReply::Stopped);
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant"], "the stopped turn is closed in the file");
    env.llm.push(Reply::Text("fresh answer".into()));
    let next = manager.send("cli:direct", "next question", events).await.unwrap();
    assert!(matches!(&next, TurnReply::Answer(text, _) if text == "fresh answer"), "{next:?}");
    services.host().shutdown().await;
}

#[test]
fn a_model_that_fails_for_good_hands_the_turn_to_the_fallback_model_with_the_whole_history() {
    let env = AgentEnv::with_defaults(json!({"fallbackModels": ["backup-model"]}));
    env.llm.push(Reply::Text("Noted: your cat is Miso.".into()));
    assert!(env.agent("my cat is called Miso").status.success());

    let quota = r#"{"error": {"message": "insufficient credit", "type": "insufficient_quota"}}"#;
    env.llm.push(Reply::Status { code: 402, retry_after: None, body: quota.into() });
    env.llm.push(Reply::Text("Your cat is Miso.".into()));
    let out = env.agent("what is my cat called?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Your cat is Miso."));

    let requests = env.llm.requests();
    let (failed, fallback) = (&requests[1], &requests[2]);
    assert_eq!((failed["model"].as_str(), fallback["model"].as_str()), (Some("test-model"), Some("backup-model")));
    let replayed = fallback["messages"].to_string();
    assert!(replayed.contains("my cat is called Miso"), "the fallback gets the earlier turns: {replayed}");

    let status = env.agent("/status");
    assert!(String::from_utf8_lossy(&status.stdout).contains("Fallback models: backup-model"));
}

#[test]
fn token_use_is_kept_per_day_and_session_and_priced_when_the_config_says_how() {
    use oxibot_tests::llm::{CACHED_TOKENS, COMPLETION_TOKENS, PROMPT_TOKENS};
    let env = AgentEnv::with_defaults(json!({"pricing": {"test-model": {"input": 1000000.0, "output": 2000000.0}}}));
    env.llm.push(Reply::Text("one".into()));
    env.llm.push(Reply::Text("two".into()));
    assert!(env.agent("first").status.success());
    assert!(env.command(&["agent", "-s", "telegram:7", "-m", "second"]).output().unwrap().status.success());

    let out = env.command(&["usage", "--by-session"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |name: &str| table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{table}")).to_owned();
    let cli_row = row("cli:direct");
    let cli: Vec<&str> = cli_row.split_whitespace().collect();
    let expected_cost = (PROMPT_TOKENS + 2 * COMPLETION_TOKENS) as f64;
    assert_eq!(
        cli[1..6],
        ["1", "1", &PROMPT_TOKENS.to_string(), &CACHED_TOKENS.to_string(), &COMPLETION_TOKENS.to_string()]
    );
    assert_eq!(cli[6].parse::<f64>().unwrap(), expected_cost, "{table}");
    assert!(row("telegram:7").contains(" 1 "), "{table}");
    assert!(row("total").split_whitespace().nth(1) == Some("2"), "{table}");

    let status = String::from_utf8_lossy(&env.agent("/status").stdout).into_owned();
    assert!(status.contains(&format!("Today, all sessions: {}", 2 * PROMPT_TOKENS)), "{status}");
}

/// Issue 29: `/status` said "Context: ~163 of 7680 tokens" for a request of 2,133 tokens: the
/// system prompt and the tool definitions were left out.
#[test]
fn status_counts_the_system_prompt_and_the_tools_in_the_context() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("hi".into()));
    assert!(env.agent("hello").status.success());
    let request = env.llm.raw_requests()[0].len();
    let status = String::from_utf8_lossy(&env.agent("/status").stdout).into_owned();
    let line = status.lines().find(|l| l.starts_with("Context: ~")).unwrap_or_else(|| panic!("{status}"));
    let tokens: usize = line["Context: ~".len()..].split_whitespace().next().unwrap().parse().unwrap();
    assert!(tokens >= request / 4, "{line}, for a request of {request} bytes");
}

/// Issue 30: a one-shot run has one session, so it needs no pool of session threads; the
/// whole process stays within three threads while it waits for the model.
#[test]
fn a_one_shot_run_uses_at_most_three_threads_while_it_waits_for_the_model() {
    let env = AgentEnv::new();
    env.llm.push(Reply::SlowFirstToken { delay_ms: 1_500, text: "slow hello".into() });
    let child = env.command(&["agent", "-m", "hello"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    assert!(wait_until(Duration::from_secs(20), || !env.llm.requests().is_empty()), "the model was never asked");
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
    let names: Vec<String> = tasks
        .flatten()
        .map(|task| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_owned())
        .collect();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "slow hello");
    assert!(names.len() <= 3, "{} threads while waiting for the model: {names:?}", names.len());
}

/// Issue 30: a provider at a plain `http://` address (a local model server) needs no root
/// certificates, so a machine or container without any still reaches it (the client used to
/// load them anyway, and failed when there were none).
#[test]
fn a_local_model_over_plain_http_works_without_any_ca_certificates() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("no certificates needed".into()));
    let empty = env.home.path().join("no-certificates");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env
        .command(&["agent", "-m", "hello"])
        .env("SSL_CERT_FILE", empty.join("none.pem"))
        .env("SSL_CERT_DIR", &empty)
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "no certificates needed");
}
