//! Embeddings through an OpenAI-compatible `POST {apiBase}/embeddings`: the configured
//! provider's endpoint and key, with an embedding model of its own (`memory.embedding`).
//!
//! Only the OpenAI wire has an embeddings endpoint; a provider speaking Anthropic's Messages
//! is refused with a message naming the key to change.

use serde_json::{Value, json};

use super::error::ProviderError;
use super::redact::Secrets;
use super::registry::{self, Resolution, Wire};
use super::transport::Transport;
use super::types::Usage;
use crate::config::LlmConfig;

/// Most texts sent in one request (providers cap the batch; 96–2048 are common limits).
pub const MAX_BATCH: usize = 64;

/// A client for one embedding model.
#[derive(Debug, Clone)]
pub struct Embedder {
    /// HTTP with the bearer key and extra headers.
    transport: Transport,
    /// `{apiBase}/embeddings`.
    url: String,
    /// The embedding model as sent on the wire.
    model: String,
    /// The provider's registry name.
    provider: String,
    /// Configured keys, scrubbed from errors.
    secrets: Secrets,
}

impl Embedder {
    /// A client for embedding model `model`, through the provider the chat model resolves to,
    /// or, when that one speaks Anthropic's wire, through the provider `model` itself
    /// resolves to (e.g. `openai/text-embedding-3-small`).
    pub fn from_config(config: &LlmConfig, model: &str) -> Result<Embedder, ProviderError> {
        let chat = registry::resolve(config, &config.model);
        let resolution = match chat {
            Ok(resolution) if resolution.wire == Wire::OpenAiCompatible => {
                Resolution { wire_model: registry::wire_model_for(&resolution.name, model), ..resolution }
            }
            _ => registry::resolve(config, model)?,
        };
        if resolution.wire != Wire::OpenAiCompatible {
            return Err(ProviderError::NotConfigured(format!(
                "memory.embedding: provider {} has no OpenAI-compatible /embeddings endpoint; \
                 name a model of such a provider (e.g. \"openai/text-embedding-3-small\") or remove the key",
                resolution.name
            )));
        }
        let mut headers: Vec<(String, String)> =
            resolution.api_key.iter().map(|key| ("authorization".to_owned(), format!("Bearer {key}"))).collect();
        headers.extend(resolution.extra_headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        let transport = Transport::new(&resolution.name, &resolution.api_base, &resolution.key_hint, &headers)?;
        Ok(Embedder {
            transport,
            url: format!("{}/embeddings", resolution.api_base.trim_end_matches('/')),
            model: resolution.wire_model.clone(),
            provider: resolution.name.clone(),
            secrets: Secrets::from_config(Some(config), &resolution),
        })
    }

    /// The model sent on the wire.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The provider's registry name.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// One vector per text, in order; texts are sent [`MAX_BATCH`] at a time.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        self.embed_counted(texts).await.map(|(vectors, _)| vectors)
    }

    /// Like [`Embedder::embed`], with the input tokens the endpoint reported
    /// (`usage.prompt_tokens`, summed over the batches; 0 where it reports none).
    pub async fn embed_counted(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, Usage), ProviderError> {
        let mut vectors = Vec::with_capacity(texts.len());
        let mut usage = Usage::default();
        for batch in texts.chunks(MAX_BATCH) {
            let (batch, tokens) = self.embed_batch(batch).await.map_err(|e| self.secrets.scrub_error(e))?;
            vectors.extend(batch);
            usage.prompt_tokens += tokens;
        }
        Ok((vectors, usage))
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        let body = json!({"model": self.model, "input": texts});
        let response = self.transport.post(&self.url, &body).await?;
        let reply = self.transport.read_json(response).await?;
        let tokens = reply["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        Ok((parse_embeddings(&reply, texts.len())?, tokens))
    }
}

/// The vectors of an embeddings reply, put in input order by their `index`.
fn parse_embeddings(reply: &Value, expected: usize) -> Result<Vec<Vec<f32>>, ProviderError> {
    let data = reply["data"]
        .as_array()
        .ok_or_else(|| ProviderError::Malformed("an embeddings reply without a `data` list".into()))?;
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item["index"].as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or(position);
        let vector: Vec<f32> = item["embedding"]
            .as_array()
            .ok_or_else(|| ProviderError::Malformed(format!("embedding {index} is not a list of numbers")))?
            .iter()
            .map(|n| n.as_f64().unwrap_or(0.0) as f32)
            .collect();
        if let Some(slot) = vectors.get_mut(index) {
            *slot = Some(vector);
        }
    }
    vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| ProviderError::Malformed(format!("no embedding for input {i}"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_input_order_whatever_order_the_reply_has() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(parse_embeddings(&reply, 2).unwrap(), vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(matches!(parse_embeddings(&reply, 3), Err(ProviderError::Malformed(_))));
        assert!(matches!(parse_embeddings(&json!({}), 1), Err(ProviderError::Malformed(_))));
    }

    #[test]
    fn an_anthropic_only_setup_is_refused_with_the_key_to_change() {
        let mut config = LlmConfig { model: "anthropic/claude-opus-4-5".into(), ..LlmConfig::default() };
        config.providers.insert(
            "anthropic".into(),
            crate::config::ProviderConfig { api_key: Some("k".into()), ..Default::default() },
        );
        let error = Embedder::from_config(&config, "claude-embed").unwrap_err();
        assert!(error.to_string().contains("memory.embedding"), "{error}");
    }
}
