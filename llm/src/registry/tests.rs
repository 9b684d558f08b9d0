//! The resolution table: which provider serves which model under which config.

use serde_json::Value;

use super::*;

/// The settings a config.json of `json` gives: its `providers` and `agents.defaults.provider`.
fn config(json: &str) -> LlmConfig {
    let mut file: Value = serde_json::from_str(json).unwrap();
    let provider = file.pointer("/agents/defaults/provider").and_then(Value::as_str).unwrap_or("auto").to_owned();
    let providers = serde_json::from_value(file["providers"].take()).unwrap();
    LlmConfig { provider, providers, ..LlmConfig::default() }
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// Resolves `model` with `providers` as the config's `providers` object and `forced` as
/// `agents.defaults.provider`; returns (name, wire model, api base) or the error text.
fn pick(
    forced: &str,
    model: &str,
    providers: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, String, String), String> {
    let json = format!(r#"{{"agents": {{"defaults": {{"provider": "{forced}"}}}}, "providers": {providers}}}"#);
    resolve_with_env(&config(&json), model, env).map(|r| (r.name, r.wire_model, r.api_base)).map_err(|e| e.to_string())
}

fn name_of(forced: &str, model: &str, providers: &str) -> String {
    pick(forced, model, providers, &no_env).map(|r| r.0).unwrap_or_else(|e| format!("error: {e}"))
}

#[test]
fn the_resolution_table_matches_nanobots_order() {
    let keys = r#"{"anthropic": {"apiKey": "a"}, "openai": {"apiKey": "o"}, "deepseek": {"apiKey": "d"}, "openrouter": {"apiKey": "r"},
        "dashscope": {"apiKey": "q"}, "zhipu": {"apiKey": "z"}, "moonshot": {"apiKey": "m"}, "gemini": {"apiKey": "g"}}"#;
    let table = [
        // (forced provider, model, expected provider)
        ("auto", "anthropic/claude-opus-4-5", "anthropic"),
        ("auto", "claude-sonnet-4", "anthropic"),
        ("auto", "gpt-4.1", "openai"),
        ("auto", "o3-mini", "openai"),
        ("auto", "o4", "openai"),
        ("auto", "deepseek/deepseek-chat", "deepseek"),
        ("auto", "deepseek-reasoner", "deepseek"),
        ("auto", "openrouter/anthropic/claude-3.5-sonnet", "openrouter"),
        ("auto", "qwen-max", "dashscope"),
        ("auto", "glm-4.6", "zhipu"),
        ("auto", "kimi-k2.5", "moonshot"),
        ("auto", "gemini-2.5-pro", "gemini"),
        ("openrouter", "anthropic/claude-opus-4-5", "openrouter"),
        ("openai", "claude-opus-4-5", "openai"),
    ];
    for (forced, model, expected) in table {
        assert_eq!(name_of(forced, model, keys), expected, "{forced} / {model}");
    }
}

#[test]
fn the_provider_prefix_is_stripped_only_when_it_names_the_provider() {
    let keys = r#"{"anthropic": {"apiKey": "a"}, "openrouter": {"apiKey": "r"}, "deepseek": {"apiKey": "d"}, "aihubmix": {"apiKey": "h"}}"#;
    let wire = |forced: &str, model: &str| pick(forced, model, keys, &no_env).unwrap().1;
    assert_eq!(wire("auto", "anthropic/claude-opus-4-5"), "claude-opus-4-5");
    assert_eq!(wire("auto", "deepseek/deepseek-chat"), "deepseek-chat");
    assert_eq!(wire("openrouter", "anthropic/claude-opus-4-5"), "anthropic/claude-opus-4-5");
    assert_eq!(wire("auto", "openrouter/anthropic/claude-opus-4-5"), "anthropic/claude-opus-4-5");
    assert_eq!(wire("aihubmix", "anthropic/claude-opus-4-5"), "claude-opus-4-5");
}

#[test]
fn custom_with_an_api_base_serves_a_model_no_keyword_matches() {
    let providers = r#"{"custom": {"apiBase": "http://127.0.0.1:9/v1"}}"#;
    assert_eq!(
        pick("auto", "my-local-model", providers, &no_env),
        Ok(("custom".into(), "my-local-model".into(), "http://127.0.0.1:9/v1".into()))
    );
}

#[test]
fn local_servers_are_chosen_by_their_usual_port() {
    let providers =
        r#"{"vllm": {"apiBase": "http://gpu:8000/v1"}, "ollama": {"apiBase": "http://localhost:11434/v1"}}"#;
    assert_eq!(name_of("auto", "llama3.2", providers), "ollama");
    assert_eq!(name_of("auto", "llama3.2", r#"{"vllm": {"apiBase": "http://gpu:8000/v1"}}"#), "vllm");
    assert_eq!(
        name_of("auto", "ollama/llama3.2", "{}"),
        "ollama",
        "a prefix picks a local server at its default address"
    );
    assert_eq!(
        name_of("auto", "vllm/llama3.2", "{}"),
        "error: provider vllm needs an endpoint: set providers.vllm.apiBase in config.json"
    );
}

#[test]
fn a_local_keyword_does_not_steal_a_model_another_provider_was_named_for() {
    let providers = r#"{"openrouter": {"apiKey": "r"}, "ollama": {"apiBase": "http://localhost:11434/v1"}}"#;
    assert_eq!(name_of("auto", "openrouter/ollama-tuned", providers), "openrouter");
}

#[test]
fn config_keys_win_over_environment_variables_which_fill_in_when_config_has_none() {
    let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "from-env".to_owned());
    let from = |providers: &str| {
        resolve_with_env(&config(&format!(r#"{{"providers": {providers}}}"#)), "claude-opus-4-5", &env).unwrap().api_key
    };
    assert_eq!(from("{}"), Some("from-env".into()));
    assert_eq!(from(r#"{"anthropic": {"apiKey": "from-config"}}"#), Some("from-config".into()));
    assert_eq!(from(r#"{"anthropic": {"apiKey": ""}}"#), Some("from-env".into()), "an empty key counts as unset");
}

#[test]
fn config_api_base_overrides_the_default_and_camel_case_keys_are_found() {
    let providers = r#"{"anthropic": {"apiKey": "a", "apiBase": "https://proxy.example/anthropic"}, "lmStudio": {"apiBase": "http://box:1234/v1"}}"#;
    assert_eq!(pick("auto", "claude-opus-4-5", providers, &no_env).unwrap().2, "https://proxy.example/anthropic");
    assert_eq!(
        pick("auto", "gpt-4.1", r#"{"openai": {"apiKey": "o"}}"#, &no_env).unwrap().2,
        "https://api.openai.com/v1"
    );
    assert_eq!(name_of("lm-studio", "qwen3", providers), "lm_studio");
}

#[test]
fn a_missing_key_names_the_config_key_and_the_variable_to_set() {
    assert_eq!(
        name_of("auto", "anthropic/claude-opus-4-5", "{}"),
        "error: no api key for anthropic (model `anthropic/claude-opus-4-5`): set providers.anthropic.apiKey in config.json or the ANTHROPIC_API_KEY environment variable"
    );
    assert!(
        name_of("auto", "mystery-model", "{}").starts_with("error: no provider configured for model `mystery-model`")
    );
    assert!(
        name_of("nonesuch", "gpt-4.1", "{}")
            .starts_with("error: unknown provider `nonesuch` in agents.defaults.provider")
    );
}

#[test]
fn a_keyword_match_without_a_key_falls_back_to_a_configured_gateway() {
    assert_eq!(name_of("auto", "claude-opus-4-5", r#"{"openrouter": {"apiKey": "r"}}"#), "openrouter");
}

#[test]
fn a_user_named_endpoint_is_openai_compatible_and_needs_an_api_base() {
    let providers = r#"{"companyProxy": {"apiKey": "k", "apiBase": "https://llm.corp/v1"}}"#;
    assert_eq!(
        pick("auto", "companyProxy/gpt-4.1", providers, &no_env),
        Ok(("companyProxy".into(), "gpt-4.1".into(), "https://llm.corp/v1".into()))
    );
    assert_eq!(name_of("companyProxy", "anything", providers), "companyProxy");
    assert_eq!(
        name_of("auto", "corp/x", r#"{"corp": {"apiKey": "k"}}"#),
        "error: provider corp is not in the registry, so it needs an endpoint: set providers.corp.apiBase in config.json"
    );
}

#[test]
fn names_are_normalized_from_camel_and_kebab_case() {
    assert_eq!(find_spec("lmStudio").map(|s| s.name), Some("lm_studio"));
    assert_eq!(find_spec("lm-studio").map(|s| s.name), Some("lm_studio"));
    assert_eq!(config_key("lm_studio"), "lmStudio");
}
