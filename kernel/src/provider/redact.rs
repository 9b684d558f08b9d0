//! Keeping secrets out of provider errors: a provider, or a proxy in front of it, may echo the
//! request's `Authorization` header or key in its error body, and that text would otherwise
//! reach the log, the session file, the next request to the model and the user's chat.

use std::sync::Arc;

use super::error::ProviderError;
use super::registry::Resolution;
use crate::config::Config;

/// What stands in for a secret in error text.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not treated as secrets: replacing a two-letter placeholder
/// key everywhere would mangle messages without protecting anything.
const MIN_SECRET_LEN: usize = 6;

/// The secret values a provider's errors must never show.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Longest first, so a key that contains another is replaced whole.
    values: Arc<[String]>,
}

impl Secrets {
    /// Every key and extra-header value in `config`'s providers plus `resolution`'s own (which
    /// may come from the environment).
    pub fn from_config(config: Option<&Config>, resolution: &Resolution) -> Secrets {
        let configured = config.into_iter().flat_map(|config| config.providers.values()).flat_map(|provider| {
            provider.api_key.iter().chain(provider.extra_headers.iter().flat_map(|headers| headers.values()))
        });
        let own = resolution.api_key.iter().chain(resolution.extra_headers.values());
        Secrets::new(configured.chain(own).cloned())
    }

    /// A set of the given values (short ones are dropped).
    pub fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut values: Vec<String> = values.into_iter().filter(|v| v.trim().len() >= MIN_SECRET_LEN).collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Secrets { values: values.into() }
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        self.values.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), REDACTED))
    }

    /// `error` with every secret in its text replaced.
    pub fn scrub_error(&self, error: ProviderError) -> ProviderError {
        if self.values.is_empty() {
            return error;
        }
        let scrub = |text: String| self.scrub(&text);
        match error {
            ProviderError::Auth { provider, message } => ProviderError::Auth { provider, message: scrub(message) },
            ProviderError::Quota { provider, message } => ProviderError::Quota { provider, message: scrub(message) },
            ProviderError::RateLimited { retry_after, message } => {
                ProviderError::RateLimited { retry_after, message: scrub(message) }
            }
            ProviderError::Server { status, message } => ProviderError::Server { status, message: scrub(message) },
            ProviderError::Rejected { status, message } => ProviderError::Rejected { status, message: scrub(message) },
            ProviderError::ContextOverflow { message } => ProviderError::ContextOverflow { message: scrub(message) },
            ProviderError::Network(message) => ProviderError::Network(scrub(message)),
            ProviderError::Malformed(message) => ProviderError::Malformed(scrub(message)),
            ProviderError::StreamCut(message) => ProviderError::StreamCut(scrub(message)),
            ProviderError::NotConfigured(message) => ProviderError::NotConfigured(scrub(message)),
            ProviderError::Timeout => ProviderError::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_replaced_and_short_placeholders_are_left_alone() {
        let secrets = Secrets::new(["sk-live-0123456789".to_owned(), "k".to_owned(), "team-secret".to_owned()]);
        let text = "401: got header Authorization: Bearer sk-live-0123456789 and x-team: team-secret (key k)";
        assert_eq!(
            secrets.scrub(text),
            "401: got header Authorization: Bearer [redacted] and x-team: [redacted] (key k)"
        );
    }

    #[test]
    fn a_key_containing_another_is_replaced_whole() {
        let secrets = Secrets::new(["abcdef".to_owned(), "abcdef-ghijkl".to_owned()]);
        assert_eq!(secrets.scrub("abcdef-ghijkl / abcdef"), "[redacted] / [redacted]");
    }

    #[test]
    fn every_error_variant_with_text_is_scrubbed() {
        let secrets = Secrets::new(["sk-secret-key".to_owned()]);
        let error = secrets.scrub_error(ProviderError::Rejected { status: 400, message: "bad sk-secret-key".into() });
        assert_eq!(error.to_string(), "provider rejected the request (400): bad [redacted]");
        let error = secrets.scrub_error(ProviderError::Network("proxy said sk-secret-key".into()));
        assert!(!error.to_string().contains("sk-secret-key"));
    }
}
