//! What to export and where: the config's `telemetry` section (`otlpEndpoint`,
//! `includeContent`) and the standard OpenTelemetry variables, which win over the config.

use serde::Deserialize;
use serde_json::Value;

/// The generic OTLP endpoint variable (a base URL; `/v1/traces` and `/v1/metrics` are added).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces endpoint variable (a full URL, used as is).
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The metrics endpoint variable (a full URL, used as is).
pub const METRICS_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// The standard switch that turns the SDK off (`true`).
const DISABLED_VAR: &str = "OTEL_SDK_DISABLED";
/// The GenAI conventions' opt-in to message contents (`true`), next to `includeContent`.
const CAPTURE_CONTENT_VAR: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The `telemetry` section as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Section {
    /// Base URL of an OTLP/HTTP receiver, e.g. `http://localhost:4318`.
    otlp_endpoint: Option<String>,
    /// Put prompts, replies, tool arguments and results into spans.
    include_content: bool,
}

/// Where traces and metrics go, if anywhere, and whether contents go with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// The config's base URL (`telemetry.otlpEndpoint`).
    pub config_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub env_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    pub env_traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`.
    pub env_metrics_endpoint: Option<String>,
    /// `OTEL_SDK_DISABLED=true`.
    pub disabled: bool,
    /// Message contents go into spans (`telemetry.includeContent` or the GenAI variable).
    pub include_content: bool,
}

impl TelemetrySettings {
    /// The settings from the config's `telemetry` section (absent: none) and the process's
    /// environment. A malformed section is logged and read as absent.
    pub fn from_config(section: Option<&Value>) -> TelemetrySettings {
        TelemetrySettings::read(section, |name| std::env::var(name).ok())
    }

    /// The settings from `section` and the variables `var` reads.
    pub fn read(section: Option<&Value>, var: impl Fn(&str) -> Option<String>) -> TelemetrySettings {
        let section = match section.map(Section::deserialize) {
            Some(Ok(section)) => section,
            Some(Err(error)) => {
                tracing::warn!(%error, "the telemetry section is wrong; it is ignored");
                Section::default()
            }
            None => Section::default(),
        };
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        let is_true = |name: &str| set(name).is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
        TelemetrySettings {
            config_endpoint: section.otlp_endpoint.filter(|value| !value.trim().is_empty()),
            env_endpoint: set(ENDPOINT_VAR),
            env_traces_endpoint: set(TRACES_ENDPOINT_VAR),
            env_metrics_endpoint: set(METRICS_ENDPOINT_VAR),
            disabled: is_true(DISABLED_VAR),
            include_content: section.include_content || is_true(CAPTURE_CONTENT_VAR),
        }
    }

    /// Whether traces are exported: an endpoint is set and the SDK is not switched off.
    pub fn enabled(&self) -> bool {
        !self.disabled
            && (self.config_endpoint.is_some() || self.env_endpoint.is_some() || self.env_traces_endpoint.is_some())
    }

    /// Whether metrics are exported too: an endpoint for them is set (a traces-only
    /// endpoint exports traces only).
    pub fn metrics_enabled(&self) -> bool {
        self.enabled()
            && (self.config_endpoint.is_some() || self.env_endpoint.is_some() || self.env_metrics_endpoint.is_some())
    }

    /// The URL traces are posted to, when the config decides it (no variable names one);
    /// `None` leaves it to the exporter, which reads the variables.
    pub fn config_traces_url(&self) -> Option<String> {
        self.config_url(&self.env_traces_endpoint, "traces")
    }

    /// The URL metrics are posted to, when the config decides it.
    pub fn config_metrics_url(&self) -> Option<String> {
        self.config_url(&self.env_metrics_endpoint, "metrics")
    }

    fn config_url(&self, signal_var: &Option<String>, signal: &str) -> Option<String> {
        if signal_var.is_some() || self.env_endpoint.is_some() {
            return None;
        }
        let base = self.config_endpoint.as_deref()?.trim_end_matches('/');
        Some(format!("{base}/v1/{signal}"))
    }

    /// The endpoint in force, for the log.
    pub fn describe_endpoint(&self) -> String {
        let chosen = self.env_traces_endpoint.as_ref().or(self.env_endpoint.as_ref()).or(self.config_endpoint.as_ref());
        chosen.cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(section: Value, vars: &[(&str, &str)]) -> TelemetrySettings {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        TelemetrySettings::read(Some(&section), |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        let none = settings(json!({"includeContent": true}), &[("OTEL_SERVICE_NAME", "x")]);
        assert!(!none.enabled());
        assert!(!none.metrics_enabled());
    }

    #[test]
    fn the_config_endpoint_is_a_base_url_for_both_signals() {
        let config = settings(json!({"otlpEndpoint": "http://127.0.0.1:4318/"}), &[]);
        assert!(config.enabled() && config.metrics_enabled());
        assert_eq!(config.config_traces_url().as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(config.config_metrics_url().as_deref(), Some("http://127.0.0.1:4318/v1/metrics"));
    }

    #[test]
    fn the_standard_variables_win_over_the_config() {
        let both = settings(json!({"otlpEndpoint": "http://a:1"}), &[(ENDPOINT_VAR, "http://b:2")]);
        assert_eq!(both.config_traces_url(), None);
        let traces_only = settings(json!({}), &[(TRACES_ENDPOINT_VAR, "http://c:3/v1/traces")]);
        assert!(traces_only.enabled());
        assert!(!traces_only.metrics_enabled());
        let off = settings(json!({"otlpEndpoint": "http://a:1"}), &[("OTEL_SDK_DISABLED", "true")]);
        assert!(!off.enabled());
    }

    #[test]
    fn contents_are_left_out_unless_the_user_opts_in() {
        assert!(!settings(json!({"otlpEndpoint": "http://a:1"}), &[]).include_content);
        assert!(settings(json!({"includeContent": true}), &[]).include_content);
        let by_var = settings(json!({}), &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")]);
        assert!(by_var.include_content);
    }
}
