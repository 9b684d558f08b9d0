//! When to send a failed request again, and how long to wait first (nanobot's policy: three
//! retries after 1 s, 2 s and 4 s; a longer `Retry-After` from the provider wins).

use std::time::Duration;

use super::error::ProviderError;

/// The longest `Retry-After` honoured; a provider asking for more gets this much, so one
/// chat turn never stalls for minutes.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How often and how patiently a request is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait before each retry; its length is the number of retries.
    pub delays: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { delays: vec![Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)] }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0 for the first) after `error`, or `None` when
    /// the error is final or the retries are used up.
    pub fn delay_before(&self, retry: usize, error: &ProviderError) -> Option<Duration> {
        if !error.is_retryable() {
            return None;
        }
        let base = *self.delays.get(retry)?;
        match error {
            ProviderError::RateLimited { retry_after: Some(asked), .. } => {
                Some(base.max((*asked).min(MAX_RETRY_AFTER)))
            }
            _ => Some(base),
        }
    }
}

/// Parses a `Retry-After` value: seconds (fractions allowed) or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_follow_the_delays_and_a_longer_retry_after_wins() {
        let policy = RetryPolicy::default();
        let server = ProviderError::Server { status: 502, message: String::new() };
        assert_eq!(policy.delay_before(0, &server), Some(Duration::from_secs(1)));
        assert_eq!(policy.delay_before(2, &server), Some(Duration::from_secs(4)));
        assert_eq!(policy.delay_before(3, &server), None);
        let limited =
            |secs| ProviderError::RateLimited { retry_after: Some(Duration::from_secs(secs)), message: String::new() };
        assert_eq!(policy.delay_before(0, &limited(3)), Some(Duration::from_secs(3)));
        assert_eq!(policy.delay_before(2, &limited(3)), Some(Duration::from_secs(4)));
        assert_eq!(policy.delay_before(0, &limited(3600)), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn final_errors_are_not_retried() {
        let auth = ProviderError::Auth { provider: "openai".into(), message: String::new() };
        assert_eq!(RetryPolicy::default().delay_before(0, &auth), None);
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None, "a date in the past asks for no wait");
        assert_eq!(parse_retry_after("soon"), None);
    }
}
