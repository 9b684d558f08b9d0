//! Keeping secrets out of provider errors: a provider, or a proxy in front of it, may echo the
//! request's `Authorization` header or key in its error body, and that text would otherwise
//! reach the log, the session file, the next request to the model and the user's chat.
//!
//! It may echo it encoded, too, so a secret is covered in every form `forms` computes when the
//! secrets are known (its hex, its base64 at each of the three byte alignments, standard and
//! URL-safe) and every form `find` looks for in each text (the secret in any ASCII case with
//! any byte URL-, `\x`- or JSON-escaped; a start or end of eight characters or more shown next
//! to a mask). What a finder matched is widened to the whole encoded token and replaced once.

mod find;
mod forms;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use forms::Forms;

use super::error::ProviderError;
use super::registry::Resolution;
use crate::config::Config;

/// What stands in for a secret in error text.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not treated as secrets: replacing a two-letter placeholder
/// key everywhere would mangle messages without protecting anything.
const MIN_SECRET_LEN: usize = 6;

/// The secret values a provider's errors must never show.
#[derive(Clone, Default)]
pub struct Secrets {
    /// Each secret with its encoded forms, computed once.
    secrets: Arc<[Forms]>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The values are what must never be printed.
        f.debug_struct("Secrets").field("count", &self.secrets.len()).finish_non_exhaustive()
    }
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
        Secrets { secrets: values.iter().map(|value| Forms::of(value)).collect() }
    }

    /// `text` with every secret, in every form, replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_owned();
        }
        let bytes = text.as_bytes();
        let masks = find::masks(text);
        let mut spans = Vec::new();
        for forms in self.secrets.iter() {
            find::escaped(bytes, forms, &mut spans);
            find::encoded(bytes, forms, &mut spans);
            find::beside_masks(bytes, &masks, forms, &mut spans);
        }
        replace(text, spans)
    }

    /// `error` with every secret in its text replaced.
    pub fn scrub_error(&self, error: ProviderError) -> ProviderError {
        if self.secrets.is_empty() {
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

/// `text` with each of `spans` (merged where they overlap or touch) replaced by [`REDACTED`].
fn replace(text: &str, mut spans: Vec<find::Span>) -> String {
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end)) = spans.next() {
        while let Some((_, next_end)) = spans.next_if(|&(next_start, _)| next_start <= end) {
            end = end.max(next_end);
        }
        let (start, end) = (floor_boundary(text, start.max(copied)), ceil_boundary(text, end));
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// `at`, moved back to the start of the character it falls in.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `at`, moved on to the end of the character it falls in.
fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
