//! A nanobot user's existing `config.json` and workspace work unchanged: the config loads with
//! its unknown keys, the old session's history is replayed, and the workspace files shape the
//! system prompt.

use std::process::Command;

use oxibot_tests::llm::{Reply, ScriptedLlm};
use oxibot_tests::{TempDir, bin, stderr, stdout};
use serde_json::{Value, json};

/// A config as nanobot writes and documents it, with keys oxibot does not use yet.
fn nanobot_config(workspace: &std::path::Path, api_base: &str) -> Value {
    json!({
        "agents": {"defaults": {
            "workspace": workspace, "model": "deepseek-chat", "provider": "custom",
            "maxTokens": 8192, "contextWindowTokens": 65536, "temperature": 0.1,
            "maxToolIterations": 40, "memoryWindow": 100, "timezone": "Asia/Shanghai",
            "dream": {"intervalH": 2, "maxBatchSize": 20}
        }},
        "channels": {
            "telegram": {"enabled": false, "token": "123:abc", "allowFrom": ["42"], "proxy": null},
            "discord": {"enabled": false, "token": "", "allowFrom": []}
        },
        "providers": {
            "custom": {"apiKey": "sk-local", "apiBase": api_base, "extraHeaders": {"X-Team": "home"}},
            "openrouter": {"apiKey": ""},
            "anthropic": {"apiKey": ""}
        },
        "gateway": {"host": "0.0.0.0", "port": 18790},
        "tools": {
            "web": {"search": {"apiKey": "", "maxResults": 5}},
            "exec": {"timeout": 60, "pathAppend": ""},
            "restrictToWorkspace": true,
            "mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]}}
        }
    })
}

/// A workspace as nanobot leaves it: unpadded metadata line, tool calls, memory and a skill.
fn nanobot_workspace(ws: &TempDir) {
    let metadata = json!({"_type": "metadata", "key": "cli:direct", "created_at": "2026-03-01T10:00:00.000001", "updated_at": "2026-03-01T10:05:00.000001", "metadata": {"title": "garden"}, "last_consolidated": 0});
    let lines = [
        metadata,
        json!({"role": "user", "content": "my tomato plants are wilting", "timestamp": "2026-03-01T10:00:01.000001"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_a1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"garden.md\"}"}}], "timestamp": "2026-03-01T10:00:02.000001"}),
        json!({"role": "tool", "tool_call_id": "call_a1", "name": "read_file", "content": "1| water every morning", "timestamp": "2026-03-01T10:00:03.000001"}),
        json!({"role": "assistant", "content": "Water them in the evening too.", "timestamp": "2026-03-01T10:00:04.000001"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    ws.write("sessions/cli_direct.jsonl", &text);
    ws.write("SOUL.md", "# Soul\nI am a patient gardening companion.\n");
    ws.write("USER.md", "# User\nLives in a flat with a balcony garden.\n");
    ws.write("memory/MEMORY.md", "# Memory\n- Grows tomatoes and basil on the balcony.\n");
    ws.write(
        "memory/history.jsonl",
        "{\"cursor\": 1, \"timestamp\": \"2026-03-01 10:10\", \"content\": \"- Discussed wilting tomatoes\"}\n",
    );
    ws.write(
        "skills/compost/SKILL.md",
        "---\nname: compost\ndescription: Keep a balcony compost bin healthy\n---\n# Compost\nTurn it weekly.\n",
    );
}

#[test]
fn an_existing_nanobot_config_and_workspace_work_unchanged() {
    let llm = ScriptedLlm::start();
    let home = TempDir::new("nanobot-home");
    let ws = TempDir::new("nanobot-ws");
    nanobot_workspace(&ws);
    let config_path = home.write("nanobot-config.json", &nanobot_config(ws.path(), &llm.base_url()).to_string());
    llm.push(Reply::Text("Check the soil before watering.".into()));

    let out = Command::new(bin("oxibot"))
        .args(["agent", "-m", "what should I do now?", "--config"])
        .arg(&config_path)
        .env("OXIBOT_HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Check the soil before watering.");

    let request = &llm.requests()[0];
    assert_eq!(request["model"], "deepseek-chat");
    assert_eq!(
        llm.request_headers()[0].iter().find(|(k, _)| k.eq_ignore_ascii_case("x-team")).map(|(_, v)| v.as_str()),
        Some("home")
    );
    let messages = request["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    for expected in ["patient gardening companion", "balcony garden", "Grows tomatoes", "compost"] {
        assert!(system.contains(expected), "system prompt lacks {expected:?}");
    }
    let asked = messages.last().unwrap()["content"].to_string();
    assert!(asked.contains("Discussed wilting tomatoes"), "the recent history (history.jsonl) is not in the request");
    let replayed: Vec<&str> = messages.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(replayed.contains(&"my tomato plants are wilting"), "the old conversation is replayed");
    assert!(messages.iter().any(|m| m["tool_call_id"] == "call_a1"), "the old tool exchange is replayed intact");

    assert!(!ws.path().join("sessions").exists(), "the session moved out of the workspace");
    let text = std::fs::read_to_string(oxibot_tests::session_path(home.path(), ws.path(), "cli:direct")).unwrap();
    // The inbox's records are lines of their own `_type`, which nanobot skips.
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|line| !matches!(line["_type"].as_str(), Some("inbox" | "call")))
        .collect();
    assert_eq!(lines[0]["metadata"]["title"], "garden", "nanobot's metadata is kept");
    assert_eq!(lines[0]["created_at"], "2026-03-01T10:00:00.000001");
    assert_eq!(lines.len(), 7, "two new messages appended after the old five lines");
    assert_eq!(lines[5]["content"], "what should I do now?");
}
