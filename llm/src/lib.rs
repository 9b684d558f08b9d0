//! oxibot's LLM client: OpenAI Chat Completions (spoken by most providers) and Anthropic
//! Messages, picked by the registry from plain settings ([`config::LlmConfig`]), with nanobot's
//! retry policy, and the chat messages they carry ([`message`]).
//!
//! `Provider::chat` is the one entry point (`Provider::chat_in_session` for a conversation's
//! requests): it sends a `ChatRequest`, streams `StreamEvent`s to a callback when asked to,
//! retries what can be retried, fails over to the fallback models, and returns the assembled
//! `ChatResponse`. This crate does not keep history, run tools or count context; the kernel's
//! runner does, and this crate cannot reach it (it does not depend on the kernel). What it
//! keeps of a conversation is the wire form of its last request, by session key, so the next
//! one encodes only what changed (inside the OpenAI client).

mod anthropic;
pub mod config;
pub mod embeddings;
mod error;
pub mod message;
mod openai;
pub mod redact;
pub mod registry;
mod retry;
pub mod sse;
mod text_calls;
mod transport;
mod types;

use std::time::Duration;

pub use embeddings::Embedder;
pub use error::ProviderError;
use redact::Secrets;
pub use registry::{Resolution, Wire};
pub use retry::RetryPolicy;
pub use transport::{CONNECT_TIMEOUT, IDLE_TIMEOUT, install_crypto_provider};
pub use types::{ChatRequest, ChatResponse, StreamEvent, Usage};

use crate::config::LlmConfig;

/// A configured LLM: the registry's choice for a model, ready to call.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Registry name (`anthropic`, `custom`, …).
    name: String,
    /// The model as configured.
    model: String,
    /// The model id sent on the wire.
    wire_model: String,
    /// The client for the provider's wire format.
    client: Client,
    /// When to retry.
    retry: RetryPolicy,
    /// Configured keys and headers, scrubbed from every error before it leaves the provider.
    secrets: Secrets,
    /// `agents.defaults.fallbackModels`, tried in order when this one fails for good.
    fallbacks: Vec<Provider>,
    /// The fallback model that answered last, for `/status`.
    last_fallback: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Take tool calls the model wrote as text for calls (see [`text_calls`]).
    text_tool_calls: bool,
}

/// The wire formats, dispatched by hand (no boxed futures).
#[derive(Debug, Clone)]
enum Client {
    OpenAiCompatible(openai::OpenAiCompatible),
    Anthropic(anthropic::Anthropic),
}

impl Provider {
    /// The provider for `agents.defaults.model` (and `agents.defaults.provider`).
    pub fn from_config(config: &LlmConfig) -> Result<Provider, ProviderError> {
        let mut provider = Provider::for_model(config, &config.model)?;
        for model in &config.fallback_models {
            let fallback = Provider::for_model(config, model).map_err(|error| {
                ProviderError::NotConfigured(format!("agents.defaults.fallbackModels: {model}: {error}"))
            })?;
            provider.fallbacks.push(fallback);
        }
        Ok(provider)
    }

    /// The provider for another model under the same config (Dream's model override).
    pub fn for_model(config: &LlmConfig, model: &str) -> Result<Provider, ProviderError> {
        let resolution = registry::resolve(config, model)?;
        let mut provider = Provider::from_resolution(model, &resolution)?;
        provider.secrets = Secrets::from_config(Some(config), &resolution);
        if let Some(on) = config.providers.get(&resolution.name).and_then(|p| p.text_tool_calls) {
            provider.text_tool_calls = on;
        }
        Ok(provider)
    }

    /// A provider for an already resolved choice; `model` is the model as configured.
    pub fn from_resolution(model: &str, resolution: &Resolution) -> Result<Provider, ProviderError> {
        let client = match resolution.wire {
            Wire::OpenAiCompatible => Client::OpenAiCompatible(openai::OpenAiCompatible::new(resolution)?),
            Wire::Anthropic => Client::Anthropic(anthropic::Anthropic::new(resolution)?),
        };
        Ok(Provider {
            name: resolution.name.clone(),
            model: model.to_owned(),
            wire_model: resolution.wire_model.clone(),
            client,
            retry: RetryPolicy::default(),
            secrets: Secrets::from_config(None, resolution),
            fallbacks: Vec::new(),
            last_fallback: std::sync::Arc::default(),
            text_tool_calls: resolution.name == "custom",
        })
    }

    /// Registry name, e.g. `custom`, `anthropic`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model id sent on the wire (the provider prefix stripped where it names the
    /// provider itself, e.g. `anthropic/claude-opus-4-5` → `claude-opus-4-5`).
    pub fn wire_model(&self) -> &str {
        &self.wire_model
    }

    /// The wire format spoken.
    pub fn wire(&self) -> Wire {
        match self.client {
            Client::OpenAiCompatible(_) => Wire::OpenAiCompatible,
            Client::Anthropic(_) => Wire::Anthropic,
        }
    }

    /// The same provider waiting `delays` before its retries (one retry per entry; the
    /// default is 1 s, 2 s, 4 s).
    pub fn with_retry_delays(mut self, delays: Vec<Duration>) -> Provider {
        self.fallbacks = self.fallbacks.into_iter().map(|f| f.with_retry_delays(delays.clone())).collect();
        self.retry = RetryPolicy { delays };
        self
    }

    /// The fallback models, in the order they are tried.
    pub fn fallback_models(&self) -> Vec<&str> {
        self.fallbacks.iter().map(|f| f.model.as_str()).collect()
    }

    /// The fallback model that answered most recently, if one has.
    pub fn last_fallback(&self) -> Option<String> {
        self.last_fallback.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Whether a request that failed with `error` goes on to the fallback models: there are
    /// some, and another model could do better (a request too long for the context window is
    /// left to the overflow guard).
    pub fn fails_over(&self, error: &ProviderError) -> bool {
        !self.fallbacks.is_empty() && !matches!(error, ProviderError::ContextOverflow { .. })
    }

    /// Tries the fallback models in order with `request` after this provider failed with
    /// `error`; the first answer wins, else the last error.
    async fn fail_over(
        &self,
        request: &ChatRequest,
        mut error: ProviderError,
        session: Option<&str>,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        for fallback in &self.fallbacks {
            tracing::warn!(failed = %error, fallback = %fallback.model, "the model failed; trying the next fallback model");
            on_event(StreamEvent::Restart);
            let request = ChatRequest { model: fallback.model.clone(), ..request.clone() };
            match Box::pin(fallback.chat_in_session(&request, session, stream, on_event)).await {
                Ok(reply) => {
                    *self.last_fallback.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(fallback.model.clone());
                    return Ok(reply);
                }
                Err(next) => error = next,
            }
        }
        Err(error)
    }

    /// The same provider giving up on a response silent for `idle` (default 120 s).
    pub fn with_idle_timeout(mut self, idle: Duration) -> Provider {
        match &mut self.client {
            Client::OpenAiCompatible(client) => client.transport_mut().idle = idle,
            Client::Anthropic(client) => client.transport_mut().idle = idle,
        }
        self
    }

    /// Sends `request` and returns the whole reply. With `stream`, text and reasoning reach
    /// `on_event` as they arrive. Failed attempts are retried per the retry policy; when a
    /// retry follows partial output, `on_event` first gets `StreamEvent::Restart`.
    pub async fn chat(
        &self,
        request: &ChatRequest,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        self.chat_in_session(request, None, stream, on_event).await
    }

    /// [`Provider::chat`] for a request of conversation `session` (a session key): a client
    /// that keeps the wire form of a conversation's last request (the OpenAI one) encodes only
    /// the messages that changed since.
    pub async fn chat_in_session(
        &self,
        request: &ChatRequest,
        session: Option<&str>,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        let model = if request.model.is_empty() || request.model == self.model {
            self.wire_model.clone()
        } else {
            registry::wire_model_for(&self.name, &request.model)
        };
        let mut retry = 0;
        let parse_text_calls = self.text_tool_calls && !request.tools.is_empty();
        loop {
            let mut streamed = false;
            let mut holdback = text_calls::Holdback::default();
            let mut forward = |event: StreamEvent| {
                streamed = true;
                match event {
                    StreamEvent::Text(text) if parse_text_calls => {
                        let shown = holdback.push(&text);
                        if !shown.is_empty() {
                            on_event(StreamEvent::Text(shown));
                        }
                    }
                    other => on_event(other),
                }
            };
            let result = self.attempt(request, session, &model, stream, &mut forward).await;
            let error = match result {
                Ok(mut reply) => {
                    // A call written as text never reaches the consumer as text.
                    let had_calls = parse_text_calls && text_calls::parse_into(&mut reply, &request.tools);
                    let rest = holdback.finish(had_calls);
                    if !rest.is_empty() {
                        on_event(StreamEvent::Text(rest));
                    }
                    return Ok(reply);
                }
                Err(error) => self.secrets.scrub_error(error),
            };
            let Some(delay) = self.retry.delay_before(retry, &error) else {
                if self.fails_over(&error) {
                    return self.fail_over(request, error, session, stream, on_event).await;
                }
                return Err(error);
            };
            retry += 1;
            tracing::warn!(provider = %self.name, model = %model, %error, "llm request failed; retry {retry} in {delay:?}");
            if streamed {
                on_event(StreamEvent::Restart);
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// One request, no retries.
    async fn attempt(
        &self,
        request: &ChatRequest,
        session: Option<&str>,
        model: &str,
        stream: bool,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        match &self.client {
            Client::OpenAiCompatible(client) => client.send(request, session, model, stream, on_event).await,
            Client::Anthropic(client) => client.send(request, model, stream, on_event).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn a_chat_future_can_move_between_threads() {
        let mut config = LlmConfig { model: "local-model".into(), ..LlmConfig::default() };
        config.providers.insert(
            "custom".into(),
            config::ProviderConfig { api_base: Some("http://127.0.0.1:9/v1".into()), ..Default::default() },
        );
        let provider = Provider::from_config(&config).unwrap();
        let request = ChatRequest {
            model: "local-model".into(),
            messages: Vec::new(),
            tools: std::sync::Arc::default(),
            max_tokens: 1,
            temperature: None,
            reasoning_effort: None,
        };
        let mut on_event = |_: StreamEvent| {};
        let future = provider.chat(&request, true, &mut on_event);
        assert_send(&future);
    }
}
