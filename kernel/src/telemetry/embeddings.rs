//! The span of one embedding request (`embeddings <model>`, GenAI operation `embeddings`)
//! with its attribution and input tokens, and its share of the two GenAI histograms.

use std::time::Instant;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::attribution::Attribution;
use super::instruments::instruments;
use crate::provider::{ProviderError, Usage};

/// The span of one embedding request, timed for the duration histogram.
pub struct EmbeddingCall {
    /// The request's span.
    context: Context,
    /// When the request started.
    started: Instant,
    /// The attributes the metrics carry.
    metric_attributes: Vec<KeyValue>,
}

/// Starts an embedding request's span; `None` when export is off.
pub fn embedding_call(attribution: &Attribution, model: &str, provider: &str, inputs: usize) -> Option<EmbeddingCall> {
    let instruments = instruments()?;
    let mut metric_attributes = vec![
        KeyValue::new("gen_ai.operation.name", "embeddings"),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.request.model", model.to_owned()),
    ];
    let mut attributes = metric_attributes.clone();
    attributes.extend(attribution.span_attributes());
    attributes.push(KeyValue::new("oxibot.embeddings.inputs", i64::try_from(inputs).unwrap_or(i64::MAX)));
    metric_attributes.extend(attribution.metric_attributes());
    let parent = Context::current();
    let span = instruments
        .tracer
        .span_builder(format!("embeddings {model}"))
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(&instruments.tracer, &parent);
    Some(EmbeddingCall { context: parent.with_span(span), started: Instant::now(), metric_attributes })
}

impl EmbeddingCall {
    /// Ends the span with the input tokens (or the error) and records duration and tokens.
    pub fn finish(self, result: Result<&Usage, &ProviderError>) {
        let Some(instruments) = instruments() else { return };
        let span = self.context.span();
        let mut metric_attributes = self.metric_attributes;
        match result {
            Ok(usage) => {
                let tokens = i64::try_from(usage.prompt_tokens).unwrap_or(i64::MAX);
                span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", tokens));
                let mut token_attributes = metric_attributes.clone();
                token_attributes.push(KeyValue::new("gen_ai.token.type", "input"));
                instruments.tokens.record(usage.prompt_tokens, &token_attributes);
            }
            Err(error) => {
                span.set_attribute(KeyValue::new("error.type", "embedding_failed"));
                span.set_status(Status::error(error.to_string()));
                metric_attributes.push(KeyValue::new("error.type", "embedding_failed"));
            }
        }
        instruments.duration.record(self.started.elapsed().as_secs_f64(), &metric_attributes);
        span.end();
    }
}
