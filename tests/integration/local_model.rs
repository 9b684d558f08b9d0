//! No key, no assistant? A local OpenAI-compatible server is found and offered by
//! `oxibot agent` and `oxibot onboard`, and used only when the person says so (issue 24,
//! item 16). The probed ports are the scripted LLM's, so a server on the real ports of the
//! test machine changes nothing.

use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::{TempDir, kernel_command, stderr, stdout};
use serde_json::Value;

/// `oxibot ARGS` with data dir `home`, probing only the port of `llm`.
fn run(home: &TempDir, llm: &ScriptedLlm, args: &[&str]) -> std::process::Output {
    let port = llm.base_url().rsplit(':').next().unwrap().trim_end_matches("/v1").to_owned();
    kernel_command(home.path(), args)
        .env("OXIBOT_LOCAL_PROBE_PORTS", port)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn config(home: &TempDir) -> Value {
    serde_json::from_slice(&std::fs::read(home.path().join("config.json")).unwrap()).unwrap()
}

#[test]
fn without_a_key_the_agent_offers_the_local_server_and_onboard_uses_it_only_when_asked() {
    let home = TempDir::new("local-model");
    let llm = ScriptedLlm::start();
    let address = llm.base_url().trim_end_matches("/v1").to_owned();
    let offer = format!("found an OpenAI-compatible server at {address} with model scripted-model");

    let out = run(&home, &llm, &["agent", "-m", "hello"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(&offer) && stderr(&out).contains("oxibot onboard --local"), "{}", stderr(&out));

    let out = run(&home, &llm, &["onboard"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&offer) && stdout(&out).contains("oxibot onboard --local"), "{}", stdout(&out));
    assert_ne!(config(&home)["agents"]["defaults"]["provider"], "custom", "never written without being asked");

    let out = run(&home, &llm, &["onboard", "--local"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = config(&home);
    assert_eq!(written["agents"]["defaults"]["provider"], "custom");
    assert_eq!(written["agents"]["defaults"]["model"], "scripted-model");
    assert_eq!(written["providers"]["custom"]["apiBase"], llm.base_url());

    llm.push(Reply::Text("hello from the local model".into()));
    let out = run(&home, &llm, &["agent", "-m", "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "hello from the local model");
}

#[test]
fn onboard_local_says_so_when_no_server_answers() {
    let home = TempDir::new("local-model");
    let out =
        kernel_command(home.path(), &["onboard", "--local"]).env("OXIBOT_LOCAL_PROBE_PORTS", "1").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("no model server answers"), "{}", stdout(&out));
    assert_ne!(config(&home)["agents"]["defaults"]["provider"], "custom");
}
