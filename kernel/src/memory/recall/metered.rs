//! The embedding client with a meter: each embedding request is checked against the spending
//! caps first and written to the usage log as `embedding` (its input tokens, as the endpoint
//! reports them), like every other model call.

use std::sync::Arc;

use crate::meter::Meter;
use crate::provider::{Embedder, ProviderError};
use crate::telemetry::embeddings::embedding_call;

/// Why an embedding request gave no vectors.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The endpoint failed.
    #[error("embedding failed: {0}")]
    Failed(#[from] ProviderError),
    /// A spending cap of `embedding` (or of everything) is reached; no request was sent.
    #[error("embedding is capped: {0}")]
    Capped(String),
}

/// Makes a fresh meter for one embedding request (with the caps and prices in force).
pub type EmbedMeter = Arc<dyn Fn(&str) -> Meter + Send + Sync>;

/// An [`Embedder`] whose requests are metered when a meter is given.
#[derive(Clone)]
pub struct MeteredEmbedder {
    /// The client.
    embedder: Embedder,
    /// The meter of each request; `None` meters nothing (the index's own tests).
    meter: Option<EmbedMeter>,
}

impl MeteredEmbedder {
    /// `embedder`, metered by `meter`.
    pub fn new(embedder: Embedder, meter: Option<EmbedMeter>) -> MeteredEmbedder {
        MeteredEmbedder { embedder, meter }
    }

    /// The model sent on the wire.
    pub fn model(&self) -> &str {
        self.embedder.model()
    }

    /// One vector per text, in order; refused without a request once a cap of `embedding`
    /// (or `all`) is reached.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(meter) = &self.meter else { return Ok(self.embedder.embed(texts).await?) };
        let mut meter = meter(self.embedder.model());
        if let Some(breach) = meter.check() {
            return Err(EmbedError::Capped(breach.message()));
        }
        let (model, provider) = (self.embedder.model(), self.embedder.provider());
        let span = embedding_call(&meter.attribution(), model, provider, texts.len());
        let started = std::time::Instant::now();
        let result = self.embedder.embed_counted(texts).await;
        if let Some(span) = span {
            span.finish(result.as_ref().map(|(_, usage)| usage));
        }
        let (vectors, usage) = result?;
        meter.record(&usage, started.elapsed());
        Ok(vectors)
    }
}
