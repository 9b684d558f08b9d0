//! `Claim`: exclusive ownership of one key of a key-value bucket. Taken with create-only
//! compare-and-swap (it fails while any kernel holds the key), kept alive by updates that name
//! the revision they replace (one fails once another kernel took the key), and lost when not
//! renewed within the bucket's age limit: the key then disappears and another kernel can
//! create it. No consensus or lease of our own: JetStream orders the writes.
//!
//! The claim's current revision is its fencing token. A holder trusts its token only until
//! `TTL - TTL/5` after it *sent* the update that gave it, earlier than the server can let the
//! key expire; so a kernel paused past its TTL wakes up without a valid token and its writes
//! are refused before it learns (by its next update failing) that another kernel took over.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::ClusterError;

/// A held claim's revision and until when it may be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// The key's revision this kernel wrote last: the fencing token.
    pub revision: u64,
    /// After this instant the token is not trusted (the key may have expired on the server).
    pub valid_until: Instant,
}

/// What a claim and the fence share: the key and its token (`None` once lost or released).
#[derive(Debug)]
pub(crate) struct ClaimState {
    /// The key in its bucket.
    key: String,
    /// The current token; `None` for good once the claim is lost or released.
    token: watch::Sender<Option<Token>>,
}

impl ClaimState {
    /// The token, if held and still within its TTL.
    pub(crate) fn valid_token(&self) -> Option<Token> {
        let token = (*self.token.borrow())?;
        (Instant::now() < token.valid_until).then_some(token)
    }
}

/// Exclusive ownership of one key, renewed in the background until released, dropped or lost.
#[derive(Debug)]
pub struct Claim {
    /// The key and its token, shared with the session store's fence.
    state: Arc<ClaimState>,
    /// The bucket holding the key.
    bucket: kv::Store,
    /// The renewal task; aborted on drop (the key then expires after the TTL, as if this
    /// kernel had died).
    renewal: tokio::task::JoinHandle<()>,
    /// This kernel's name, the key's value while it holds it.
    node: Bytes,
    /// When the key was created for this kernel, in milliseconds since the Unix epoch.
    taken_at_ms: u64,
}

impl Claim {
    /// Creates `key` in `bucket` with the value `node` (this kernel's name), if absent; `None`
    /// when another kernel holds it. Runs on the cluster's runtime; renews every `ttl / 3`.
    pub(crate) async fn take(
        node: Bytes,
        ttl: Duration,
        bucket: kv::Store,
        key: String,
    ) -> Result<Option<Claim>, ClusterError> {
        let sent = Instant::now();
        let revision = match bucket.create(&key, node.clone()).await {
            Ok(revision) => revision,
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => return Ok(None),
            Err(error) => return Err(ClusterError::request("creating an ownership key", error)),
        };
        let (token, _) = watch::channel(Some(Token { revision, valid_until: trusted_until(sent, ttl) }));
        let state = Arc::new(ClaimState { key, token });
        let renewal = tokio::spawn(renew(Arc::clone(&state), bucket.clone(), node.clone(), ttl));
        tracing::debug!(key = %state.key, revision, "took ownership");
        let taken_at_ms = u64::try_from(crate::cron::now_ms()).unwrap_or(0);
        Ok(Some(Claim { state, bucket, renewal, node, taken_at_ms }))
    }

    /// The fencing token while the claim is held and within its TTL.
    pub fn token(&self) -> Option<Token> {
        self.state.valid_token()
    }

    /// When the server gave this kernel the key, in milliseconds since the Unix epoch.
    pub fn taken_at_ms(&self) -> u64 {
        self.taken_at_ms
    }

    /// Resolves when the claim is lost (another kernel took the key) or released.
    pub async fn lost(&self) {
        let mut token = self.state.token.subscribe();
        let _ = token.wait_for(Option::is_none).await;
    }

    /// Stops renewing without giving the key up, as a kernel that hangs would: the key
    /// expires after the TTL. For tests of takeover and fencing.
    pub fn stop_renewing(&self) {
        self.renewal.abort();
    }

    /// Gives the key up at once (only if this claim still holds it), so another kernel can
    /// take it without waiting for the TTL.
    pub async fn release(self) -> Result<(), ClusterError> {
        self.renewal.abort();
        let Some(token) = *self.state.token.borrow() else { return Ok(()) };
        self.state.token.send_replace(None);
        let (bucket, key) = (self.bucket.clone(), self.state.key.clone());
        match bucket.delete_expect_revision(&key, Some(token.revision)).await {
            // A renewal stopped after the server applied it but before its revision was kept:
            // the key is still this kernel's, one revision on.
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => self.release_current(&key).await,
            deleted => deleted.map_err(|error| ClusterError::request("releasing an ownership key", error)),
        }
    }

    /// Deletes `key` at its current revision if it still names this kernel; another kernel's
    /// key is left alone.
    async fn release_current(&self, key: &str) -> Result<(), ClusterError> {
        let entry =
            self.bucket.entry(key).await.map_err(|error| ClusterError::request("reading an ownership key", error))?;
        let Some(entry) = entry.filter(|entry| entry.value == self.node) else { return Ok(()) };
        let deleted = self.bucket.delete_expect_revision(key, Some(entry.revision)).await;
        deleted.map_err(|error| ClusterError::request("releasing an ownership key", error))
    }

    pub(crate) fn state(&self) -> std::sync::Weak<ClaimState> {
        Arc::downgrade(&self.state)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// Until when a token from an update sent at `sent` is trusted: a fifth of the TTL before the
/// earliest moment the server could let the key expire.
fn trusted_until(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl - ttl / 5
}

/// Renews the key every third of the TTL with an update naming the revision it replaces;
/// ends when the update is refused (another kernel took the key, or it expired meanwhile).
/// A failed request (timeout, lost connection) is retried; the token meanwhile runs out.
async fn renew(state: Arc<ClaimState>, bucket: kv::Store, node: Bytes, ttl: Duration) {
    loop {
        tokio::time::sleep(ttl / 3).await;
        let Some(held) = *state.token.borrow() else { return };
        let sent = Instant::now();
        match bucket.update(&state.key, node.clone(), held.revision).await {
            Ok(revision) => {
                state.token.send_replace(Some(Token { revision, valid_until: trusted_until(sent, ttl) }));
            }
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                tracing::warn!(key = %state.key, "ownership lost: another kernel holds the key now");
                state.token.send_replace(None);
                return;
            }
            Err(error) => tracing::warn!(key = %state.key, %error, "cannot renew ownership; retrying"),
        }
    }
}
