//! `ProviderError`: everything that can go wrong talking to an LLM, and how an HTTP error
//! response is sorted into it.

use std::time::Duration;

/// A failed LLM request. Messages say what happened and, where the user can fix it, how.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the credentials (401/403). Not retried.
    #[error("{provider} refused the credentials: {message}")]
    Auth {
        /// Registry name of the provider.
        provider: String,
        /// The provider's words plus which config key or variable to check.
        message: String,
    },
    /// The account is out of quota or credit (402, or a 429 that says so). Not retried.
    #[error("{provider} says the account is out of quota or credit: {message}")]
    Quota {
        /// Registry name of the provider.
        provider: String,
        /// The provider's words.
        message: String,
    },
    /// Too many requests (429); retried, waiting at least `retry_after` when given.
    #[error("rate limited by the provider: {message}")]
    RateLimited {
        /// The provider's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
        /// The provider's words.
        message: String,
    },
    /// The provider failed (5xx, 408, 409, or an error event inside a stream). Retried.
    #[error("provider error {status}: {message}")]
    Server {
        /// HTTP status (or the status the error event stands for).
        status: u16,
        /// The provider's words.
        message: String,
    },
    /// The provider refused this request (a 4xx other than 401/402/403/429): the request
    /// itself is wrong, so sending it again cannot help. Not retried.
    #[error("provider rejected the request ({status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The provider's words.
        message: String,
    },
    /// The request does not fit the model's context window (a 400 or 413 saying so:
    /// OpenAI's `context_length_exceeded`, "maximum context length", Anthropic's "prompt is
    /// too long"). Not retried as it is; the runner retries with a smaller request.
    #[error("the request is too long for the model's context window: {message}")]
    ContextOverflow {
        /// The provider's words.
        message: String,
    },
    /// No connection within the connect timeout, or no byte within the idle timeout.
    #[error("timed out waiting for the provider")]
    Timeout,
    /// The provider could not be reached (DNS, refused connection, TLS, …).
    #[error("cannot reach the provider: {0}")]
    Network(String),
    /// The provider answered with something that is not the expected JSON or SSE.
    #[error("unreadable response from the provider: {0}")]
    Malformed(String),
    /// The response stopped before it was complete.
    #[error("the response ended early: {0}")]
    StreamCut(String),
    /// No usable provider for the model; the message names the config key to set.
    #[error("{0}")]
    NotConfigured(String),
}

impl ProviderError {
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::RateLimited { .. }
            | ProviderError::Server { .. }
            | ProviderError::Timeout
            | ProviderError::Network(_)
            | ProviderError::Malformed(_)
            | ProviderError::StreamCut(_) => true,
            ProviderError::Auth { .. }
            | ProviderError::Quota { .. }
            | ProviderError::Rejected { .. }
            | ProviderError::ContextOverflow { .. }
            | ProviderError::NotConfigured(_) => false,
        }
    }

    /// Sorts an HTTP error response into a variant. `key_hint` says where the API key comes
    /// from (for 401/403), `retry_after` is the parsed `Retry-After` header.
    pub(crate) fn from_status(
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        provider: &str,
        key_hint: &str,
    ) -> ProviderError {
        let message = error_message(body, status);
        let provider = provider.to_owned();
        match status {
            401 | 403 => ProviderError::Auth { provider, message: format!("{message} ({status}); check {key_hint}") },
            402 => ProviderError::Quota { provider, message },
            429 if mentions_quota(body) => ProviderError::Quota { provider, message },
            429 => ProviderError::RateLimited { retry_after, message },
            408 | 409 | 500..=599 => ProviderError::Server { status, message },
            400 | 413 if is_overflow(body) => ProviderError::ContextOverflow { message },
            _ => ProviderError::Rejected { status, message },
        }
    }

    /// Sorts an error reported inside a 200 response (an OpenAI `{"error": …}` chunk or an
    /// Anthropic `error` event) by its `type`/`code`.
    pub(crate) fn from_error_object(error: &serde_json::Value, provider: &str) -> ProviderError {
        let kind =
            error.get("type").or_else(|| error.get("code")).and_then(serde_json::Value::as_str).unwrap_or_default();
        let message =
            error.get("message").and_then(serde_json::Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
        let provider = provider.to_owned();
        match kind {
            "rate_limit_error" | "rate_limit_exceeded" => ProviderError::RateLimited { retry_after: None, message },
            "authentication_error" | "permission_error" | "invalid_api_key" => {
                ProviderError::Auth { provider, message }
            }
            kind if QUOTA_MARKERS.contains(&kind) => ProviderError::Quota { provider, message },
            _ if is_overflow(&error.to_string()) => ProviderError::ContextOverflow { message },
            "invalid_request_error" | "not_found_error" | "request_too_large" => {
                ProviderError::Rejected { status: 400, message }
            }
            "overloaded_error" => ProviderError::Server { status: 529, message },
            _ => ProviderError::Server { status: 500, message },
        }
    }
}

/// Words in a 429 body that mean "pay first" rather than "slow down" (as nanobot sorts them).
const QUOTA_MARKERS: &[&str] = &[
    "insufficient_quota",
    "quota_exceeded",
    "billing_hard_limit_reached",
    "insufficient_balance",
    "credit_balance_too_low",
    "billing_not_active",
    "payment_required",
    "exceeded your current quota",
    "insufficient quota",
    "out of credits",
];

/// Words in an error body that mean "the prompt does not fit the context window".
const OVERFLOW_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "too many tokens",
    "input is too long",
];

fn is_overflow(body: &str) -> bool {
    let lower = body.to_lowercase();
    OVERFLOW_MARKERS.iter().any(|marker| lower.contains(marker))
}

fn mentions_quota(body: &str) -> bool {
    let lower = body.to_lowercase();
    QUOTA_MARKERS.iter().any(|marker| lower.contains(marker))
}

/// The human part of an error body: `error.message` (OpenAI and Anthropic), a top-level
/// `message`, or the text itself, shortened.
fn error_message(body: &str, status: u16) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        let error = v.get("error").unwrap_or(v);
        error.get("message").and_then(serde_json::Value::as_str).or_else(|| error.as_str()).map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() { format!("http status {status} with an empty body") } else { shorten(&text, 300) }
}

/// `text` cut to at most `max` characters, marked with `…` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_sorted_into_variants_with_the_providers_message() {
        let body = r#"{"error": {"message": "invalid x-api-key", "type": "authentication_error"}}"#;
        let auth = ProviderError::from_status(401, body, None, "anthropic", "providers.anthropic.apiKey");
        assert_eq!(
            auth.to_string(),
            "anthropic refused the credentials: invalid x-api-key (401); check providers.anthropic.apiKey"
        );
        assert!(!auth.is_retryable());
        let quota = ProviderError::from_status(
            429,
            r#"{"error":{"code":"insufficient_quota","message":"no money"}}"#,
            None,
            "openai",
            "",
        );
        assert!(matches!(quota, ProviderError::Quota { .. }));
        let limited = ProviderError::from_status(429, "slow down", Some(Duration::from_secs(2)), "openai", "");
        assert_eq!(
            limited,
            ProviderError::RateLimited { retry_after: Some(Duration::from_secs(2)), message: "slow down".into() }
        );
        assert!(ProviderError::from_status(503, "", None, "openai", "").is_retryable());
        assert!(!ProviderError::from_status(400, "bad", None, "openai", "").is_retryable());
    }

    #[test]
    fn context_overflows_are_told_apart_from_other_rejections() {
        let openai = r#"{"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#;
        let anthropic = r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        for body in [openai, anthropic] {
            let error = ProviderError::from_status(400, body, None, "p", "");
            assert!(matches!(error, ProviderError::ContextOverflow { .. }), "{error:?}");
            assert!(!error.is_retryable());
        }
        assert!(matches!(
            ProviderError::from_status(400, r#"{"error": {"message": "bad tool schema"}}"#, None, "p", ""),
            ProviderError::Rejected { .. }
        ));
        let inside = serde_json::json!({"type": "invalid_request_error", "message": "prompt is too long"});
        assert!(matches!(ProviderError::from_error_object(&inside, "p"), ProviderError::ContextOverflow { .. }));
    }

    #[test]
    fn long_bodies_are_shortened_on_a_character_boundary() {
        assert_eq!(shorten("ééé", 2), "éé…");
        assert_eq!(shorten("abc", 3), "abc");
    }
}
