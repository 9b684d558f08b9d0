//! The config `oxibot onboard` writes, kept in one place so `oxibot import nanobot` can tell a
//! config nobody has edited yet (which nanobot's may replace) from one a person made.

use serde_json::{Value, json};

use super::AgentDefaults;

/// The config `oxibot onboard` writes into a fresh data dir.
pub fn onboard_config() -> Value {
    let defaults = AgentDefaults::default();
    json!({
        "agents": {"defaults": {
            "workspace": defaults.workspace,
            "model": "anthropic/claude-opus-4-5",
            "provider": "auto",
            "maxTokens": 8192,
            "contextWindowTokens": 65536,
            "temperature": 0.1,
            "maxToolIterations": 40
        }},
        "providers": {
            "anthropic": {"apiKey": ""},
            "openai": {"apiKey": ""},
            "openrouter": {"apiKey": ""},
            "custom": {"apiKey": "", "apiBase": ""}
        },
        "tools": {"restrictToWorkspace": true, "exec": {"timeout": 60}},
        "channels": {},
        "gateway": {"host": "127.0.0.1", "port": 18790}
    })
}

/// Whether `text` is still the config `oxibot onboard` wrote: the same JSON, whatever its
/// formatting.
pub fn is_untouched_onboard_config(text: &[u8]) -> bool {
    serde_json::from_slice::<Value>(text).is_ok_and(|value| value == onboard_config())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_config_onboard_writes_counts_as_untouched() {
        let written = serde_json::to_string_pretty(&onboard_config()).unwrap();
        assert!(is_untouched_onboard_config(written.as_bytes()));
        let compact = serde_json::to_string(&onboard_config()).unwrap();
        assert!(is_untouched_onboard_config(compact.as_bytes()));
        let edited = written.replace("claude-opus-4-5", "llama3.1");
        assert!(!is_untouched_onboard_config(edited.as_bytes()));
        assert!(!is_untouched_onboard_config(b"not json"));
    }
}
