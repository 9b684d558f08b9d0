//! The provider registry, after nanobot's `providers/registry.py`: which providers exist,
//! how each is spoken to, and which one serves a configured model.
//!
//! Resolution order: an explicit `agents.defaults.provider` wins; else the model's prefix
//! (`deepseek/…`); else a keyword in the model name (`claude` → anthropic); else a local
//! server or `custom` endpoint with an `apiBase`; else any provider with a key in the config.

use std::collections::BTreeMap;

use crate::config::{LlmConfig, ProviderConfig};

use crate::error::ProviderError;
use crate::types::non_empty;

/// The HTTP API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions (`POST {base}/chat/completions`).
    OpenAiCompatible,
    /// Anthropic Messages (`POST {base}/v1/messages`).
    Anthropic,
}

/// How a provider is found and spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A hosted API that needs a key and is matched by model keywords.
    Standard,
    /// A hosted router for many vendors' models (OpenRouter, …): needs a key.
    Gateway,
    /// A server on the user's machine or network (vLLM, Ollama, LM Studio): no key.
    Local,
    /// The user's own OpenAI-compatible endpoint: no key required, `apiBase` required.
    Custom,
}

/// One provider in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The name under `providers` in config.json (snake_case; camelCase is accepted too).
    pub name: &'static str,
    /// The HTTP API it speaks.
    pub wire: Wire,
    /// How it is found.
    pub kind: Kind,
    /// Lowercase words that, found in a model name, pick this provider.
    pub keywords: &'static [&'static str],
    /// Model names that pick this provider when the name (after any `vendor/`) is one of
    /// these or starts with one followed by `-` (OpenAI's `o1`, `o3`, `o4`).
    pub model_families: &'static [&'static str],
    /// Environment variables that may hold the key, first found wins.
    pub env_keys: &'static [&'static str],
    /// The API base used when config has none; empty when the user must set one.
    pub default_api_base: &'static str,
    /// Send only the last `/` segment of the model (gateways that do not know vendor prefixes).
    pub strip_all_prefixes: bool,
}

const fn spec(
    name: &'static str,
    wire: Wire,
    kind: Kind,
    keywords: &'static [&'static str],
    env_keys: &'static [&'static str],
    default_api_base: &'static str,
) -> ProviderSpec {
    ProviderSpec {
        name,
        wire,
        kind,
        keywords,
        model_families: &[],
        env_keys,
        default_api_base,
        strip_all_prefixes: false,
    }
}

use Kind::{Custom, Gateway, Local, Standard};
use Wire::{Anthropic, OpenAiCompatible};

/// Every known provider. Order is match priority, as in nanobot: gateways first, then
/// the standard providers, then local servers.
pub static PROVIDERS: &[ProviderSpec] = &[
    spec("custom", OpenAiCompatible, Custom, &[], &[], ""),
    spec(
        "openrouter",
        OpenAiCompatible,
        Gateway,
        &["openrouter"],
        &["OPENROUTER_API_KEY"],
        "https://openrouter.ai/api/v1",
    ),
    ProviderSpec {
        strip_all_prefixes: true,
        ..spec("aihubmix", OpenAiCompatible, Gateway, &["aihubmix"], &["OPENAI_API_KEY"], "https://aihubmix.com/v1")
    },
    spec(
        "siliconflow",
        OpenAiCompatible,
        Gateway,
        &["siliconflow"],
        &["OPENAI_API_KEY"],
        "https://api.siliconflow.cn/v1",
    ),
    spec(
        "volcengine",
        OpenAiCompatible,
        Gateway,
        &["volcengine", "volces"],
        &["OPENAI_API_KEY"],
        "https://ark.cn-beijing.volces.com/api/v3",
    ),
    spec(
        "anthropic",
        Anthropic,
        Standard,
        &["anthropic", "claude"],
        &["ANTHROPIC_API_KEY"],
        "https://api.anthropic.com",
    ),
    ProviderSpec {
        model_families: &["o1", "o3", "o4"],
        ..spec(
            "openai",
            OpenAiCompatible,
            Standard,
            &["openai", "gpt"],
            &["OPENAI_API_KEY"],
            "https://api.openai.com/v1",
        )
    },
    spec("deepseek", OpenAiCompatible, Standard, &["deepseek"], &["DEEPSEEK_API_KEY"], "https://api.deepseek.com"),
    spec(
        "gemini",
        OpenAiCompatible,
        Standard,
        &["gemini", "gemma"],
        &["GEMINI_API_KEY"],
        "https://generativelanguage.googleapis.com/v1beta/openai",
    ),
    spec(
        "zhipu",
        OpenAiCompatible,
        Standard,
        &["zhipu", "glm", "zai"],
        &["ZHIPUAI_API_KEY", "ZAI_API_KEY"],
        "https://open.bigmodel.cn/api/paas/v4",
    ),
    spec(
        "dashscope",
        OpenAiCompatible,
        Standard,
        &["qwen", "dashscope"],
        &["DASHSCOPE_API_KEY"],
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
    ),
    spec(
        "moonshot",
        OpenAiCompatible,
        Standard,
        &["moonshot", "kimi"],
        &["MOONSHOT_API_KEY"],
        "https://api.moonshot.ai/v1",
    ),
    spec("minimax", OpenAiCompatible, Standard, &["minimax"], &["MINIMAX_API_KEY"], "https://api.minimax.io/v1"),
    spec(
        "mistral",
        OpenAiCompatible,
        Standard,
        &["mistral", "magistral", "ministral", "codestral", "devstral", "mixtral"],
        &["MISTRAL_API_KEY"],
        "https://api.mistral.ai/v1",
    ),
    spec("groq", OpenAiCompatible, Standard, &["groq"], &["GROQ_API_KEY"], "https://api.groq.com/openai/v1"),
    spec("vllm", OpenAiCompatible, Local, &["vllm"], &["HOSTED_VLLM_API_KEY"], ""),
    spec("ollama", OpenAiCompatible, Local, &["ollama"], &["OLLAMA_API_KEY"], "http://localhost:11434/v1"),
    spec(
        "lm_studio",
        OpenAiCompatible,
        Local,
        &["lm-studio", "lmstudio", "lm_studio"],
        &["LM_STUDIO_API_KEY"],
        "http://localhost:1234/v1",
    ),
];

/// The provider chosen for a model, with everything needed to call it.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolution {
    /// Registry name (`anthropic`, `custom`, …), or the config key of a user-named endpoint.
    pub name: String,
    /// The HTTP API it speaks.
    pub wire: Wire,
    /// The API base URL (config `apiBase`, else the provider's default).
    pub api_base: String,
    /// The API key (config `apiKey`, else the environment), if any.
    pub api_key: Option<String>,
    /// Extra headers from config.
    pub extra_headers: BTreeMap<String, String>,
    /// The model id sent on the wire.
    pub wire_model: String,
    /// Where the key comes from, for error messages (`providers.openai.apiKey or OPENAI_API_KEY`).
    pub key_hint: String,
}

impl std::fmt::Debug for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolution")
            .field("name", &self.name)
            .field("wire", &self.wire)
            .field("api_base", &self.api_base)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("wire_model", &self.wire_model)
            .finish_non_exhaustive()
    }
}

/// Picks the provider for `model` from `config`, reading keys from the process environment.
pub fn resolve(config: &LlmConfig, model: &str) -> Result<Resolution, ProviderError> {
    resolve_with_env(config, model, &|name| std::env::var(name).ok())
}

/// `resolve` with the environment given as a lookup function (tests pass a fixed one).
pub fn resolve_with_env(
    config: &LlmConfig,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Resolution, ProviderError> {
    let resolver = Resolver { config, model, env };
    resolver.run()
}

/// The registry spec with this name; `lmStudio`, `lm-studio` and `lm_studio` are one name.
pub fn find_spec(name: &str) -> Option<&'static ProviderSpec> {
    let (snake, lowered) = (normalize_name(name), loose(name));
    PROVIDERS.iter().find(|spec| spec.name == snake || spec.name == lowered)
}

/// A name lowercased with `-` as `_`: how model prefixes and user-named entries compare.
fn loose(name: &str) -> String {
    name.trim().to_lowercase().replace('-', "_")
}

/// A name in snake_case: `lmStudio` → `lm_studio`, `lm-studio` → `lm_studio`.
fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    for (i, c) in name.trim().chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 && !out.ends_with('_') {
            out.push('_');
        }
        out.push(if c == '-' { '_' } else { c.to_ascii_lowercase() });
    }
    out
}

/// A snake_case name as the camelCase key nanobot writes in config.json.
fn config_key(name: &str) -> String {
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out
}

/// A config string that counts as set: present and not blank.
fn set(value: Option<&String>) -> Option<String> {
    value.map(|v| v.trim()).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// One resolution in progress.
struct Resolver<'a> {
    config: &'a LlmConfig,
    model: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Resolver<'_> {
    fn run(&self) -> Result<Resolution, ProviderError> {
        let forced = self.config.provider.trim();
        if !forced.is_empty() && forced != "auto" {
            return self.forced(forced);
        }
        let prefix = self.model.split_once('/').map(|(prefix, _)| loose(prefix));
        let prefixed = prefix.as_deref().and_then(find_spec);
        // The first provider the model pointed at, even if unusable: the error names it.
        let mut wanted: Option<&ProviderSpec> = None;
        if let Some(spec) = prefixed {
            if self.usable(spec) {
                return self.build(spec);
            }
            wanted = Some(spec);
        } else if let Some((key, entry)) = prefix.as_deref().and_then(|p| self.user_entry(p)) {
            return self.user_endpoint(key, entry);
        }
        for spec in PROVIDERS.iter().filter(|spec| self.matches_keyword(spec)) {
            // A local server matches by keyword only when configured, and never takes a model
            // whose prefix names another provider.
            if spec.kind == Local
                && (self.configured_base(spec).is_none() || prefixed.is_some_and(|p| p.name != spec.name))
            {
                continue;
            }
            if self.usable(spec) {
                return self.build(spec);
            }
            wanted.get_or_insert(spec);
        }
        if let Some(found) = self.fallback(prefixed.is_none()) {
            return found;
        }
        Err(self.not_configured(wanted))
    }

    /// `agents.defaults.provider` names the provider.
    fn forced(&self, name: &str) -> Result<Resolution, ProviderError> {
        if let Some(spec) = find_spec(name) {
            return if self.usable(spec) { self.build(spec) } else { Err(self.not_configured(Some(spec))) };
        }
        match self.user_entry(&loose(name)) {
            Some((key, entry)) => self.user_endpoint(key, entry),
            None => Err(ProviderError::NotConfigured(format!(
                "unknown provider `{name}` in agents.defaults.provider: use one of {} or add providers.{name}.apiBase for your own endpoint",
                PROVIDERS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// Local servers and `custom` with an `apiBase` (one whose URL has the server's usual
    /// port first), then any provider with a key in the config, then user-named endpoints.
    fn fallback(&self, may_use_local: bool) -> Option<Result<Resolution, ProviderError>> {
        if may_use_local {
            let endpoints: Vec<&ProviderSpec> = PROVIDERS
                .iter()
                .filter(|s| matches!(s.kind, Local | Custom) && self.configured_base(s).is_some())
                .collect();
            let by_port = endpoints.iter().find(|s| {
                let base = self.configured_base(s).unwrap_or_default();
                default_port(s.default_api_base).is_some_and(|port| base.contains(&format!(":{port}")))
            });
            if let Some(spec) = by_port.or(endpoints.first()) {
                return Some(self.build(spec));
            }
        }
        if let Some(spec) = PROVIDERS.iter().find(|s| s.kind != Local && self.config_key_of(s).is_some()) {
            return Some(self.build(spec));
        }
        let user = self
            .config
            .providers
            .iter()
            .find(|(key, entry)| find_spec(key).is_none() && set(entry.api_base.as_ref()).is_some());
        user.map(|(key, entry)| self.user_endpoint(key, entry))
    }

    fn matches_keyword(&self, spec: &ProviderSpec) -> bool {
        let lower = self.model.to_lowercase();
        let snake = lower.replace('-', "_");
        let slug = lower.rsplit('/').next().unwrap_or_default();
        spec.keywords.iter().any(|k| lower.contains(k) || snake.contains(&k.replace('-', "_")))
            || spec
                .model_families
                .iter()
                .any(|f| slug == *f || slug.strip_prefix(f).is_some_and(|rest| rest.starts_with('-')))
    }

    /// The config entry of a registry provider, under any spelling of its name.
    fn entry(&self, spec: &ProviderSpec) -> Option<&ProviderConfig> {
        self.config
            .providers
            .iter()
            .find(|(key, _)| find_spec(key).is_some_and(|found| found.name == spec.name))
            .map(|(_, entry)| entry)
    }

    /// A `providers` entry whose name is not in the registry (an endpoint the user named).
    fn user_entry(&self, wanted: &str) -> Option<(&String, &ProviderConfig)> {
        self.config.providers.iter().find(|(key, _)| find_spec(key).is_none() && loose(key) == wanted)
    }

    fn configured_base(&self, spec: &ProviderSpec) -> Option<String> {
        set(self.entry(spec)?.api_base.as_ref())
    }

    fn config_key_of(&self, spec: &ProviderSpec) -> Option<String> {
        set(self.entry(spec)?.api_key.as_ref())
    }

    fn api_key(&self, spec: &ProviderSpec) -> Option<String> {
        self.config_key_of(spec)
            .or_else(|| spec.env_keys.iter().find_map(|var| (self.env)(var).filter(|v| !v.trim().is_empty())))
    }

    /// Whether the provider can be called: keyless ones need a base URL, others a key.
    fn usable(&self, spec: &ProviderSpec) -> bool {
        match spec.kind {
            Local | Custom => self.configured_base(spec).is_some() || !spec.default_api_base.is_empty(),
            Standard | Gateway => self.api_key(spec).is_some(),
        }
    }

    fn build(&self, spec: &ProviderSpec) -> Result<Resolution, ProviderError> {
        let entry = self.entry(spec);
        let Some(api_base) = self.configured_base(spec).or_else(|| non_empty(spec.default_api_base.to_owned())) else {
            return Err(ProviderError::NotConfigured(format!(
                "provider {} needs an endpoint: set providers.{}.apiBase in config.json",
                spec.name,
                config_key(spec.name)
            )));
        };
        Ok(Resolution {
            name: spec.name.to_owned(),
            wire: spec.wire,
            api_base,
            api_key: self.api_key(spec),
            extra_headers: entry.and_then(|e| e.extra_headers.clone()).unwrap_or_default(),
            wire_model: wire_model(self.model, spec.name, spec.strip_all_prefixes),
            key_hint: key_hint(spec),
        })
    }

    /// An OpenAI-compatible endpoint under a name of the user's choosing.
    fn user_endpoint(&self, key: &str, entry: &ProviderConfig) -> Result<Resolution, ProviderError> {
        let Some(api_base) = set(entry.api_base.as_ref()) else {
            return Err(ProviderError::NotConfigured(format!(
                "provider {key} is not in the registry, so it needs an endpoint: set providers.{key}.apiBase in config.json"
            )));
        };
        Ok(Resolution {
            name: key.to_owned(),
            wire: OpenAiCompatible,
            api_base,
            api_key: set(entry.api_key.as_ref()),
            extra_headers: entry.extra_headers.clone().unwrap_or_default(),
            wire_model: wire_model(self.model, &loose(key), false),
            key_hint: format!("providers.{key}.apiKey in config.json"),
        })
    }

    fn not_configured(&self, wanted: Option<&ProviderSpec>) -> ProviderError {
        let message = match wanted {
            Some(spec) if matches!(spec.kind, Local | Custom) => {
                format!(
                    "provider {} needs an endpoint: set providers.{}.apiBase in config.json",
                    spec.name,
                    config_key(spec.name)
                )
            }
            Some(spec) => format!("no api key for {} (model `{}`): set {}", spec.name, self.model, key_hint(spec)),
            None => format!(
                "no provider configured for model `{}`: set providers.<name>.apiKey (or providers.custom.apiBase for your own endpoint) in config.json, and agents.defaults.provider to pick one",
                self.model
            ),
        };
        ProviderError::NotConfigured(message)
    }
}

/// Where a provider's key comes from, as a user would set it.
fn key_hint(spec: &ProviderSpec) -> String {
    let config = format!("providers.{}.apiKey in config.json", config_key(spec.name));
    match spec.env_keys.first() {
        Some(var) if matches!(spec.kind, Standard | Gateway) => format!("{config} or the {var} environment variable"),
        _ => config,
    }
}

/// The port in a provider's default URL (`11434` for Ollama), if it names one.
fn default_port(url: &str) -> Option<&str> {
    let authority = url.split("://").nth(1)?.split('/').next()?;
    authority.rsplit_once(':').map(|(_, port)| port)
}

/// The model id `provider` (a registry name or a user-named endpoint) gets for `model`.
pub fn wire_model_for(provider: &str, model: &str) -> String {
    match find_spec(provider) {
        Some(spec) => wire_model(model, spec.name, spec.strip_all_prefixes),
        None => wire_model(model, &loose(provider), false),
    }
}

/// The model id to send: a leading `provider/` that names the provider itself is removed
/// (`deepseek/deepseek-chat` → `deepseek-chat`), other vendor prefixes stay (OpenRouter needs
/// `anthropic/claude-…`), unless the provider wants bare names only.
pub fn wire_model(model: &str, provider: &str, strip_all_prefixes: bool) -> String {
    if strip_all_prefixes {
        return model.rsplit('/').next().unwrap_or(model).to_owned();
    }
    match model.split_once('/') {
        Some((prefix, rest)) if loose(prefix) == provider => rest.to_owned(),
        _ => model.to_owned(),
    }
}

#[cfg(test)]
mod tests;
