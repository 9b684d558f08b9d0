//! What the client needs to know of the user's configuration, as plain data: the model choice
//! and the `providers` entries. The kernel fills it from its config file; nothing here reads one.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The models and providers to use, as the kernel's `agents.defaults` and `providers` give them.
#[derive(Debug, Clone, Default)]
pub struct LlmConfig {
    /// The chat model (`agents.defaults.model`).
    pub model: String,
    /// The provider name, or `auto` (or empty) to pick one from the model name
    /// (`agents.defaults.provider`).
    pub provider: String,
    /// The models tried in order when the chat model fails for good
    /// (`agents.defaults.fallbackModels`).
    pub fallback_models: Vec<String>,
    /// The configured providers by name (`providers`).
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// `providers.<name>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProviderConfig {
    /// The API key (`${VAR}` expands from the environment).
    #[serde(alias = "api_key")]
    pub api_key: Option<String>,
    /// The API base URL, e.g. `http://localhost:8000/v1`.
    #[serde(alias = "api_base")]
    pub api_base: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(alias = "extra_headers")]
    pub extra_headers: Option<BTreeMap<String, String>>,
    /// Take tool calls a model wrote in its text (`<tool_call>…</tool_call>`,
    /// `<|python_tag|>`, a reply that is one fenced JSON call) for calls; unset, on for the
    /// `custom` provider (local servers) and off for the others.
    #[serde(alias = "text_tool_calls")]
    pub text_tool_calls: Option<bool>,
    /// Keys this version does not use.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
