//! [`WebConfig`]: the settings the kernel passes in `OXIBOT_TOOL_CONFIG` — the `tools.web`
//! and `tools.a2a` sections and `tools.ssrfWhitelist` of `config.json` — as
//! `{"web": {...}, "a2a": {...}, "ssrfWhitelist": [...]}`.

use serde::Deserialize;

use crate::a2a::config::A2aSection;
use crate::error::WebError;
use crate::guard::SsrfGuard;

/// Everything the web tools read from the config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WebConfig {
    /// `tools.web`.
    pub web: WebSection,
    /// `tools.a2a`.
    pub a2a: A2aSection,
    /// `tools.ssrfWhitelist`: CIDRs of internal addresses the tools may reach.
    #[serde(alias = "ssrf_whitelist")]
    pub ssrf_whitelist: Vec<String>,
}

/// `tools.web`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WebSection {
    /// `tools.web.search`.
    pub search: SearchConfig,
}

/// `tools.web.search`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SearchConfig {
    /// `brave`, `tavily`, `searxng`, `jina` or `duckduckgo` (the default).
    pub provider: Option<String>,
    /// The provider's API key; else its environment variable.
    #[serde(alias = "api_key")]
    pub api_key: Option<String>,
    /// The provider's endpoint, for SearXNG (required) or to point any provider elsewhere.
    #[serde(alias = "base_url")]
    pub base_url: Option<String>,
    /// Results when the call does not say (1–10, default 5).
    #[serde(alias = "max_results")]
    pub max_results: Option<u32>,
}

impl WebConfig {
    /// Parses the JSON text of `OXIBOT_TOOL_CONFIG`; empty text is the default config.
    pub fn parse(text: &str) -> Result<WebConfig, WebError> {
        if text.trim().is_empty() {
            return Ok(WebConfig::default());
        }
        serde_json::from_str(text).map_err(|e| WebError::Config(e.to_string()))
    }

    /// Reads the config the kernel passed, if any.
    pub fn from_env() -> Result<WebConfig, WebError> {
        WebConfig::parse(&std::env::var(oxibot_proto::ENV_TOOL_CONFIG).unwrap_or_default())
    }

    /// The SSRF guard `ssrfWhitelist` describes.
    pub fn guard(&self) -> Result<SsrfGuard, WebError> {
        SsrfGuard::parse(&self.ssrf_whitelist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanobot_keys_in_either_case_are_read() {
        let camel = WebConfig::parse(
            r#"{"web": {"search": {"provider": "brave", "apiKey": "k", "maxResults": 3}}, "ssrfWhitelist": ["10.0.0.0/8"]}"#,
        )
        .unwrap();
        assert_eq!(camel.web.search.provider.as_deref(), Some("brave"));
        assert_eq!(camel.web.search.api_key.as_deref(), Some("k"));
        assert_eq!(camel.web.search.max_results, Some(3));
        assert!(camel.guard().unwrap().allows("10.2.3.4".parse().unwrap()));
        let snake = WebConfig::parse(r#"{"web": {"search": {"base_url": "http://s"}}, "ssrf_whitelist": []}"#).unwrap();
        assert_eq!(snake.web.search.base_url.as_deref(), Some("http://s"));
        assert!(WebConfig::parse("").unwrap().ssrf_whitelist.is_empty());
    }
}
