//! The spans and metrics of a turn, after the OpenTelemetry GenAI semantic conventions: one
//! trace per turn, an `invoke_agent` span over it, a `chat` span per model call and an
//! `execute_tool` span per tool call as its children, and the `gen_ai.client.token.usage`
//! and `gen_ai.client.operation.duration` histograms.
//!
//! Model calls outside a turn (the heartbeat's decision, consolidation, Dream, the memory
//! flush, helpers) get the same `chat` spans, each with its [`Attribution`]; embedding
//! requests get `embeddings` spans.
//!
//! Every function here returns at once (`None`, or the future unchanged) when export is off.
//! The parent of a model or tool span is the current OpenTelemetry context, which
//! [`TurnSpan::run`] attaches to the turn's future each time it is polled.

use std::borrow::Borrow;
use std::future::Future;
use std::time::Instant;

use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue, Value};
use serde_json::json;

pub use super::attribution::{Attribution, SOURCE_ATTRIBUTE};
use super::instruments::{Instruments, instruments};
use crate::message::{ChatMessage, ToolCall};
use crate::provider::{ChatResponse, ProviderError, Usage};

/// What a turn span says about its turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnInfo<'a> {
    /// The session key (`gen_ai.conversation.id`).
    pub session: &'a str,
    /// What spent the tokens (`user`, `cron`, `heartbeat`, `subagent`, `system`).
    pub source: &'a str,
    /// The model the turn asks for.
    pub model: &'a str,
    /// The provider's registry name.
    pub provider: &'a str,
}

/// The span of one turn, the root of its trace; nothing when export is off.
pub struct TurnSpan(Option<Context>);

impl TurnSpan {
    /// Starts a turn's span (a new trace).
    pub fn start(info: TurnInfo<'_>) -> TurnSpan {
        let Some(instruments) = instruments() else { return TurnSpan(None) };
        let span = instruments
            .tracer
            .span_builder("invoke_agent oxibot")
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.agent.name", "oxibot"),
                KeyValue::new("gen_ai.conversation.id", info.session.to_owned()),
                KeyValue::new("gen_ai.provider.name", info.provider.to_owned()),
                KeyValue::new("gen_ai.request.model", info.model.to_owned()),
                KeyValue::new(SOURCE_ATTRIBUTE, info.source.to_owned()),
            ])
            .start_with_context(&instruments.tracer, &Context::new());
        let attribution = Attribution::new(info.source, info.session);
        TurnSpan(Some(Context::new().with_span(span).with_value(attribution)))
    }

    /// `run` with the turn's span as the current context at every poll, so the model and
    /// tool spans it starts are the turn's children.
    pub fn run<F: Future>(&self, run: F) -> impl Future<Output = F::Output> {
        match &self.0 {
            Some(context) => Either::Left(run.with_context(context.clone())),
            None => Either::Right(run),
        }
    }

    /// Ends the span with the turn's token counts, or its error.
    pub fn finish(self, result: Result<&Usage, &dyn std::fmt::Display>) {
        let Some(context) = self.0 else { return };
        let span = context.span();
        match result {
            Ok(usage) => {
                span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", as_i64(usage.prompt_tokens)));
                span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", as_i64(usage.completion_tokens)));
            }
            Err(error) => span.set_status(Status::error(error.to_string())),
        }
        span.end();
    }
}

/// The span of one model call, timed for the duration histogram.
pub struct ModelCall {
    /// The call's span, a child of the turn's.
    context: Context,
    /// When the call started.
    started: Instant,
    /// The attributes the metrics carry.
    metric_attributes: Vec<KeyValue>,
    /// The model asked for, the response model when the reply names none.
    requested: String,
}

/// Starts a model call's span (`chat <model>`), attributed as the current context says;
/// `None` when export is off.
pub fn model_call(model: &str, provider: &str, messages: &[impl Borrow<ChatMessage>]) -> Option<ModelCall> {
    instruments()?;
    model_call_for(Attribution::current().as_ref(), model, provider, messages)
}

/// Starts a model call's span attributed to `attribution`; `None` when export is off.
pub fn model_call_for(
    attribution: Option<&Attribution>,
    model: &str,
    provider: &str,
    messages: &[impl Borrow<ChatMessage>],
) -> Option<ModelCall> {
    let instruments = instruments()?;
    let mut metric_attributes = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.request.model", model.to_owned()),
    ];
    let mut attributes = metric_attributes.clone();
    if let Some(attribution) = attribution {
        attributes.extend(attribution.span_attributes());
        metric_attributes.extend(attribution.metric_attributes());
    }
    if instruments.include_content {
        attributes.push(KeyValue::new("gen_ai.input.messages", input_messages(messages)));
    }
    let parent = Context::current();
    let span = instruments
        .tracer
        .span_builder(format!("chat {model}"))
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(&instruments.tracer, &parent);
    Some(ModelCall {
        context: parent.with_span(span),
        started: Instant::now(),
        metric_attributes,
        requested: model.to_owned(),
    })
}

/// Sends one model call outside a turn (`call`), traced as a `chat` span attributed to
/// `attribution`.
pub async fn traced_chat<F>(
    attribution: &Attribution,
    model: &str,
    provider: &str,
    messages: &[impl Borrow<ChatMessage>],
    call: F,
) -> Result<ChatResponse, ProviderError>
where
    F: Future<Output = Result<ChatResponse, ProviderError>>,
{
    let span = model_call_for(Some(attribution), model, provider, messages);
    let response = call.await;
    if let Some(span) = span {
        span.finish(response.as_ref());
    }
    response
}

impl ModelCall {
    /// Ends the span with the reply's token counts and finish reason (or the error), and
    /// records the call's duration and tokens.
    pub fn finish(self, result: Result<&ChatResponse, &ProviderError>) {
        let Some(instruments) = instruments() else { return };
        let span = self.context.span();
        let mut metric_attributes = self.metric_attributes;
        match result {
            Ok(response) => {
                let usage = &response.usage;
                let answered = response.model.clone().unwrap_or(self.requested);
                span.set_attribute(KeyValue::new("gen_ai.response.model", answered.clone()));
                metric_attributes.push(KeyValue::new("gen_ai.response.model", answered));
                span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", as_i64(usage.prompt_tokens)));
                span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", as_i64(usage.completion_tokens)));
                span.set_attribute(KeyValue::new("gen_ai.usage.cache_read.input_tokens", as_i64(usage.cached_tokens)));
                if let Some(reason) = &response.finish_reason {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        Value::Array(opentelemetry::Array::String(vec![reason.clone().into()])),
                    ));
                }
                if instruments.include_content {
                    span.set_attribute(KeyValue::new("gen_ai.output.messages", output_messages(response)));
                }
                record_tokens(instruments, &metric_attributes, usage);
            }
            Err(error) => {
                let kind = error_type(error);
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(error.to_string()));
                metric_attributes.push(KeyValue::new("error.type", kind));
            }
        }
        instruments.duration.record(self.started.elapsed().as_secs_f64(), &metric_attributes);
        span.end();
    }
}

/// The span of one tool call.
pub struct ToolSpan(Context);

/// Starts a tool call's span (`execute_tool <name>`); `None` when export is off.
pub fn tool_call(call: &ToolCall) -> Option<ToolSpan> {
    let instruments = instruments()?;
    let name = &call.function.name;
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", name.clone()),
        KeyValue::new("gen_ai.tool.call.id", call.id.clone()),
        KeyValue::new("gen_ai.tool.type", "function"),
    ];
    if instruments.include_content {
        attributes.push(KeyValue::new("gen_ai.tool.call.arguments", call.function.arguments.clone()));
    }
    let parent = Context::current();
    let span = instruments
        .tracer
        .span_builder(format!("execute_tool {name}"))
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&instruments.tracer, &parent);
    Some(ToolSpan(parent.with_span(span)))
}

impl ToolSpan {
    /// Ends the span; an error result marks it failed.
    pub fn finish(self, result: &str, is_error: bool) {
        let span = self.0.span();
        if instruments().is_some_and(|i| i.include_content) {
            span.set_attribute(KeyValue::new("gen_ai.tool.call.result", result.to_owned()));
        }
        if is_error {
            span.set_attribute(KeyValue::new("error.type", "tool_error"));
            span.set_status(Status::error(first_line(result)));
        }
        span.end();
    }
}

fn record_tokens(instruments: &Instruments, attributes: &[KeyValue], usage: &Usage) {
    for (kind, count) in [("input", usage.prompt_tokens), ("output", usage.completion_tokens)] {
        let mut attributes = attributes.to_vec();
        attributes.push(KeyValue::new("gen_ai.token.type", kind));
        instruments.tokens.record(count, &attributes);
    }
}

/// The request's messages in the conventions' shape (role and text parts), as JSON.
fn input_messages(messages: &[impl Borrow<ChatMessage>]) -> String {
    let shaped: Vec<serde_json::Value> = messages
        .iter()
        .map(Borrow::borrow)
        .map(|message: &ChatMessage| json!({"role": message.role, "parts": [{"type": "text", "content": message.text_content()}]}))
        .collect();
    serde_json::Value::Array(shaped).to_string()
}

/// The reply in the conventions' shape: its text and tool calls, and why it ended.
fn output_messages(response: &ChatResponse) -> String {
    let mut parts = Vec::new();
    if let Some(text) = response.content.as_deref().filter(|text| !text.is_empty()) {
        parts.push(json!({"type": "text", "content": text}));
    }
    for call in &response.tool_calls {
        parts.push(json!({"type": "tool_call", "id": call.id, "name": call.function.name,
            "arguments": call.function.arguments}));
    }
    json!([{"role": "assistant", "parts": parts, "finish_reason": response.finish_reason}]).to_string()
}

/// The `error.type` of a failed model call: a low-cardinality name of what went wrong.
fn error_type(error: &ProviderError) -> &'static str {
    match error {
        ProviderError::Auth { .. } => "auth",
        ProviderError::Quota { .. } => "quota",
        ProviderError::RateLimited { .. } => "rate_limited",
        ProviderError::Server { .. } => "server",
        ProviderError::Rejected { .. } => "rejected",
        ProviderError::ContextOverflow { .. } => "context_overflow",
        ProviderError::Timeout => "timeout",
        ProviderError::Network(_) => "network",
        ProviderError::Malformed(_) => "malformed",
        ProviderError::StreamCut(_) => "stream_cut",
        ProviderError::NotConfigured(_) => "not_configured",
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(200).collect()
}

fn as_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
