//! What every service client does around its HTTP calls, whichever HTTP client it uses: a
//! call made again when the service says to slow down (429 with `Retry-After`), and a call made
//! once more with a new access token when the service refuses the token
//! ([`TokenCache::renewing`](super::TokenCache::renewing)).

use std::fmt;
use std::future::Future;
use std::time::Duration;

/// How often a rate-limited call is made again before it fails.
pub const RATE_LIMIT_RETRIES: u32 = 3;
/// The wait when the service says 429 without saying how long.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest wait honoured; a longer one fails the call instead.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A call that got no answer from the service, or an HTTP client that could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The HTTP client could not be built.
    #[error("cannot set up the http client: {0}")]
    Setup(String),
    /// No answer: connection refused, timeout, broken TLS, ….
    #[error("{call}: network error: {reason}")]
    Network {
        /// The call.
        call: String,
        /// What went wrong, with its causes.
        reason: String,
    },
}

/// A call the service kept rate-limiting, or asked to wait for longer than a client waits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: rate limited (retry after {retry_after:?})")]
pub struct RateLimited {
    /// The call.
    pub call: String,
    /// How long the service asked to wait.
    pub retry_after: Duration,
}

/// A successful answer that is not what the service sends (no JSON, a field missing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: unexpected answer: {reason}")]
pub struct Malformed {
    /// The call.
    pub call: String,
    /// What is wrong with the answer.
    pub reason: String,
}

impl Malformed {
    /// The answer to `call` was wrong in the way `reason` says.
    pub fn new(call: impl Into<String>, reason: impl Into<String>) -> Malformed {
        Malformed { call: call.into(), reason: reason.into() }
    }
}

/// A file downloaded from a service that could not be saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot save {path}: {reason}")]
pub struct FileError {
    /// Where it was to go.
    pub path: String,
    /// Why it could not.
    pub reason: String,
}

/// A service's refusal of a call: its HTTP status, and the error code and explanation its
/// answer gave (empty or zero when it gave none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: http status {status}: code {code}: {message}")]
pub struct Refusal<C: fmt::Display> {
    /// The call.
    pub call: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// The service's error code, e.g. `M_FORBIDDEN`, `99991663`.
    pub code: C,
    /// The service's explanation.
    pub message: String,
}

/// What a service's refusals mean for its client: whether to fetch a new access token, or to
/// give up because the app's own credentials are refused. A channel implements it on a type
/// of its own that names the service.
pub trait Service {
    /// The type of the service's error codes.
    type Code: fmt::Display + fmt::Debug + Clone + PartialEq + Eq + Send + Sync + 'static;

    /// Whether the service refused the access token: fetch a new one (or give up, for a
    /// fixed token).
    fn is_token_problem(refusal: &Refusal<Self::Code>) -> bool;

    /// Whether the service refused the app's own credentials, which no retry fixes.
    fn is_credentials_problem(_refusal: &Refusal<Self::Code>) -> bool {
        false
    }
}

/// Why a call to service `S`'s HTTP API failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError<S: Service> {
    /// No answer, or no HTTP client.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The service refused the call.
    #[error(transparent)]
    Refused(Refusal<S::Code>),
    /// The service asked to slow down for longer than the channel waits, or too often.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// A successful answer that is not what the service sends.
    #[error(transparent)]
    Malformed(#[from] Malformed),
    /// A downloaded file could not be saved.
    #[error(transparent)]
    File(#[from] FileError),
}

impl<S: Service> ServiceError<S> {
    /// `call` was refused with HTTP `status`, the service's `code` and `message`.
    pub fn refused(call: &'static str, status: u16, code: S::Code, message: impl Into<String>) -> ServiceError<S> {
        ServiceError::Refused(Refusal { call, status, code, message: message.into() })
    }

    /// The HTTP client could not be built.
    pub fn setup(error: &dyn std::error::Error) -> ServiceError<S> {
        ServiceError::Transport(TransportError::Setup(crate::util::error_chain(error)))
    }

    /// `call` got no answer.
    pub fn network(call: &str, error: &dyn std::error::Error) -> ServiceError<S> {
        ServiceError::Transport(TransportError::Network {
            call: call.to_owned(),
            reason: crate::util::error_chain(error),
        })
    }

    /// The answer to `call` was wrong in the way `reason` says.
    pub fn malformed(call: impl Into<String>, reason: impl Into<String>) -> ServiceError<S> {
        ServiceError::Malformed(Malformed::new(call, reason))
    }

    /// Whether the service refused the access token.
    pub fn is_token_problem(&self) -> bool {
        matches!(self, ServiceError::Refused(refusal) if S::is_token_problem(refusal))
    }

    /// Whether the service refused the app's own credentials.
    pub fn is_credentials_problem(&self) -> bool {
        matches!(self, ServiceError::Refused(refusal) if S::is_credentials_problem(refusal))
    }
}

/// What one attempt of a call that did not fail gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt<T> {
    /// The service's answer.
    Answer(T),
    /// The service asked to wait this long and call again.
    Wait(Duration),
}

/// Makes `attempt` until it answers: a rate limit is waited out (and logged) at most
/// [`RATE_LIMIT_RETRIES`] times and only when the wait is at most [`MAX_RETRY_AFTER`]; past
/// that the call fails with [`RateLimited`]. `call` names it in the log and the error.
pub async fn waiting_out_rate_limits<T, E, F>(call: &str, mut attempt: impl FnMut() -> F) -> Result<T, E>
where
    E: From<RateLimited>,
    F: Future<Output = Result<Attempt<T>, E>>,
{
    let mut waits = 0;
    loop {
        match attempt().await? {
            Attempt::Answer(answer) => return Ok(answer),
            Attempt::Wait(retry_after) if waits < RATE_LIMIT_RETRIES && retry_after <= MAX_RETRY_AFTER => {
                waits += 1;
                crate::warn!("{call}: rate limited; trying again in {retry_after:?}");
                tokio::time::sleep(retry_after).await;
            }
            Attempt::Wait(retry_after) => return Err(RateLimited { call: call.to_owned(), retry_after }.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_call_is_made_again_after_the_wait_and_given_up_after_three() {
        let attempts = Cell::new(0);
        let answer = waiting_out_rate_limits("send", || async {
            attempts.set(attempts.get() + 1);
            let wait = Attempt::Wait(Duration::from_secs(2));
            Ok::<_, RateLimited>(if attempts.get() < 3 { wait } else { Attempt::Answer(7) })
        })
        .await;
        assert_eq!((answer, attempts.get()), (Ok(7), 3));
        let always_limited = waiting_out_rate_limits("send", || async {
            Ok::<Attempt<()>, RateLimited>(Attempt::Wait(Duration::from_secs(2)))
        });
        let error = always_limited.await.unwrap_err();
        assert_eq!((error.call.as_str(), error.retry_after), ("send", Duration::from_secs(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_longer_than_a_minute_fails_the_call_at_once() {
        let long = Duration::from_secs(600);
        let outcome = waiting_out_rate_limits("send", || async { Ok::<Attempt<()>, RateLimited>(Attempt::Wait(long)) });
        assert_eq!(outcome.await.unwrap_err().retry_after, long);
    }
}
