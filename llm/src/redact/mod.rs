//! Keeping secrets out of provider errors: a provider, or a proxy in front of it, may echo the
//! request's `Authorization` header or key in its error body, and that text would otherwise
//! reach the log, the session file, the next request to the model and the user's chat.
//!
//! It may echo it encoded, too, so a secret is covered in every form `forms` computes when the
//! secrets are known (its hex, its base64 at each of the three byte alignments, standard and
//! URL-safe) and every form `find` looks for in each text (the secret in any ASCII case with
//! any byte URL-, `\x`- or JSON-escaped; a start or end of eight characters or more shown next
//! to a mask). What a finder matched is widened to the whole encoded token, and `replace` puts
//! [`REDACTED`] once for each run of overlapping matches.

mod find;
mod forms;
mod replace;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use forms::{Forms, Windows};

use super::error::ProviderError;
use super::registry::Resolution;
use crate::config::LlmConfig;

/// What stands in for a secret in error text.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not treated as secrets: replacing a two-letter placeholder
/// key everywhere would mangle messages without protecting anything.
const MIN_SECRET_LEN: usize = 6;

/// The secret values a provider's errors must never show.
#[derive(Clone, Default)]
pub struct Secrets {
    /// The forms, computed once and shared by every clone.
    prepared: Arc<Prepared>,
}

/// Each secret's forms and their index.
#[derive(Default)]
struct Prepared {
    /// Each secret with its encoded forms.
    secrets: Vec<Forms>,
    /// Every eight characters of every form.
    windows: Windows,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The values are what must never be printed.
        f.debug_struct("Secrets").field("count", &self.prepared.secrets.len()).finish_non_exhaustive()
    }
}

impl Secrets {
    /// Every key and extra-header value in `config`'s providers plus `resolution`'s own (which
    /// may come from the environment).
    pub fn from_config(config: Option<&LlmConfig>, resolution: &Resolution) -> Secrets {
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
        let secrets: Vec<Forms> = values.iter().map(|value| Forms::of(value)).collect();
        let windows = Windows::of(&secrets);
        Secrets { prepared: Arc::new(Prepared { secrets, windows }) }
    }

    /// `text` with every secret, in every form, replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        replace::scrub(text, &self.prepared.secrets, &self.prepared.windows)
    }

    /// `error` with every secret in its text replaced.
    pub fn scrub_error(&self, error: ProviderError) -> ProviderError {
        if self.prepared.secrets.is_empty() {
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
