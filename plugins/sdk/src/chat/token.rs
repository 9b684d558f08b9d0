//! An access token a service wants on every call, kept until shortly before the service says it
//! expires, fetched by one caller at a time so concurrent replies share one fetch.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long before its stated expiry a token is replaced (at most half its lifetime).
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// A token and when to stop using it.
#[derive(Debug, Clone)]
struct Cached {
    value: String,
    good_until: Instant,
}

/// The cached token; cheap to clone, clones share it. The channel hands it the request that
/// fetches a new one.
///
/// ```
/// # tokio_test_block_on(async {
/// use std::time::Duration;
/// use oxibot_plugin::chat::TokenCache;
///
/// let cache = TokenCache::default();
/// let fetch = || async { Ok::<_, std::io::Error>(("token-1".to_owned(), Duration::from_secs(7200))) };
/// assert_eq!(cache.get(fetch).await.unwrap(), "token-1");
/// cache.forget("token-1").await; // the service refused it: the next call fetches again
/// # });
/// # fn tokio_test_block_on(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct TokenCache {
    current: Arc<Mutex<Option<Cached>>>,
}

impl TokenCache {
    /// The cached token, or the one `fetch` gets (a value and its lifetime), cached. Callers
    /// arriving during a fetch wait for it instead of fetching again.
    pub async fn get<E, Fut>(&self, fetch: impl FnOnce() -> Fut) -> Result<String, E>
    where
        Fut: Future<Output = Result<(String, Duration), E>>,
    {
        let mut current = self.current.lock().await;
        if let Some(cached) = current.as_ref().filter(|cached| Instant::now() < cached.good_until) {
            return Ok(cached.value.clone());
        }
        let (value, lifetime) = fetch().await?;
        let margin = RENEW_BEFORE.min(lifetime / 2);
        *current = Some(Cached { value: value.clone(), good_until: Instant::now() + (lifetime - margin) });
        Ok(value)
    }

    /// Makes `call` with the token (fetched by `fetch` when none is cached); when `refused`
    /// says the service refused the token, fetches a new one (logged) and makes the call once
    /// more.
    pub async fn renewing<T, E, Fetch, Call>(
        &self,
        fetch: impl Fn() -> Fetch,
        refused: impl Fn(&E) -> bool,
        mut call: impl FnMut(String) -> Call,
    ) -> Result<T, E>
    where
        E: Display,
        Fetch: Future<Output = Result<(String, Duration), E>>,
        Call: Future<Output = Result<T, E>>,
    {
        let token = self.get(&fetch).await?;
        match call(token.clone()).await {
            Err(error) if refused(&error) => {
                crate::warn!("{error}; fetching a new access token");
                self.forget(&token).await;
                let token = self.get(&fetch).await?;
                call(token).await
            }
            outcome => outcome,
        }
    }

    /// Drops `stale` (a token the service refused), unless another caller replaced it already.
    pub async fn forget(&self, stale: &str) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|cached| cached.value == stale) {
            *current = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    async fn get(cache: &TokenCache, fetches: &AtomicU32, lifetime: Duration) -> String {
        let fetched = cache
            .get(|| async {
                let n = fetches.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, ()>((format!("token-{n}"), lifetime))
            })
            .await;
        fetched.unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_fetched_once_and_reused_until_shortly_before_it_expires() {
        let (cache, fetches) = (TokenCache::default(), AtomicU32::new(0));
        assert_eq!(get(&cache, &fetches, Duration::from_secs(7200)).await, "token-1");
        tokio::time::advance(Duration::from_secs(6899)).await;
        assert_eq!(get(&cache, &fetches, Duration::from_secs(7200)).await, "token-1");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(get(&cache, &fetches, Duration::from_secs(7200)).await, "token-2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_forgotten_token_is_fetched_again_but_a_newer_one_is_kept() {
        let (cache, fetches) = (TokenCache::default(), AtomicU32::new(0));
        let first = get(&cache, &fetches, Duration::from_secs(7200)).await;
        cache.forget(&first).await;
        assert_eq!(get(&cache, &fetches, Duration::from_secs(7200)).await, "token-2");
        cache.forget(&first).await;
        assert_eq!(get(&cache, &fetches, Duration::from_secs(7200)).await, "token-2");
    }

    #[tokio::test]
    async fn a_failed_fetch_caches_nothing() {
        let cache = TokenCache::default();
        let failed = cache.get(|| async { Err::<(String, Duration), _>("refused") }).await;
        assert_eq!(failed, Err("refused"));
        let fetches = AtomicU32::new(0);
        assert_eq!(get(&cache, &fetches, Duration::from_secs(60)).await, "token-1");
    }
}
