//! The LLM ↔ tools loop of one turn (what `Engine::run` runs).
//!
//! Each iteration sends the conversation to the model; tool calls are run through the plugin
//! host and their results fed back, until the model answers without tools or the iteration
//! cap is hit. Every model step and every tool batch is checkpointed to the session file
//! before the loop moves on, so a killed kernel loses at most the step in flight.

use std::sync::Arc;

use oxibot_proto::ToolSpec;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::budget;
use super::builtin::{BuiltinContext, BuiltinTools};
pub use super::events::TurnEvent;
use super::hooks::{CompositeHook, IterationInfo, StepInfo};
use super::repeats::{self, RepeatGuard, Verdict};
use super::tool_batch::{self, ToolOutput};
use crate::message::{ChatMessage, Role, ToolCall};
use crate::plugin::PluginHost;
use crate::provider::{ChatRequest, ChatResponse, Provider, ProviderError, StreamEvent, Usage};
use crate::session::SessionError;
use crate::session::journal::{CALL_KEY_KEY, INTERRUPTED_KEY, call_key};

/// The answer given when the model returns nothing twice in a row.
pub const EMPTY_REPLY_FALLBACK: &str =
    "I'm sorry, I couldn't come up with a reply to that. Could you rephrase or add detail?";

/// Settings of a turn.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Model name as configured.
    pub model: String,
    /// Most tokens per reply.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Reasoning effort hint.
    pub reasoning_effort: Option<String>,
    /// Most model calls in one turn.
    pub max_iterations: u32,
    /// Stream replies (deltas reach the caller as they arrive).
    pub stream: bool,
    /// Longest tool result kept, in characters.
    pub max_tool_result_chars: usize,
    /// The model's context window, in tokens.
    pub context_window: u32,
}

/// How a turn ended.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The final answer (already stored in the session).
    pub content: String,
    /// Token usage summed over the turn's model calls.
    pub usage: Usage,
    /// Model calls made.
    pub iterations: u32,
    /// Whether the turn stopped at the iteration cap.
    pub hit_iteration_cap: bool,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The provider failed after its retries.
    #[error("{0}")]
    Provider(#[from] ProviderError),
    /// The session file could not be written.
    #[error("cannot save the session: {0}")]
    Checkpoint(#[source] CheckpointError),
    /// The estimate, before any request was sent, found that the request would only fit by
    /// leaving older turns out (a turn with [`Turn::compact_on_overflow`] only).
    #[error(
        "the request is too long for the model's context window: the conversation no longer fits the model's \
         context window (estimated)"
    )]
    EstimatedOverflow,
}

impl RunError {
    /// Whether the request did not fit the model's context window, by the provider's word or
    /// by the estimate.
    pub fn is_overflow(&self) -> bool {
        matches!(self, RunError::EstimatedOverflow | RunError::Provider(ProviderError::ContextOverflow { .. }))
    }
}

/// Why new messages of a turn could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The session file could not be written.
    #[error(transparent)]
    Store(#[from] SessionError),
    /// The session the turn belongs to is not loaded (its actor was reset mid-turn).
    #[error("the session is not loaded")]
    NotLoaded,
}

/// Stores new messages of the turn (in the session and its file) as they are produced.
pub type Checkpoint = Box<dyn FnMut(Vec<ChatMessage>) -> Result<(), CheckpointError> + Send>;

/// Records that the call with this journal key is about to be sent.
pub type RecordStart = Box<dyn FnMut(&str, &ToolCall) -> Result<(), CheckpointError> + Send>;

/// The turn journal of a session's turn: every tool call gets a key (turn id, step, call
/// index), recorded as started before it is sent; its result is stored as soon as its group
/// of calls returns, carrying the key ([`CALL_KEY_KEY`]).
pub struct Journal {
    /// The turn's id.
    pub turn: String,
    /// Tool-using steps the turn took before a restart (0 for a new turn).
    pub steps_done: u32,
    /// Calls of the last step a restart left without a result, to settle before the model
    /// is asked again.
    pub open: Vec<OpenCall>,
    /// Writes a call's `started` record.
    pub record_start: RecordStart,
}

/// A call a restart left without a result.
#[derive(Debug, Clone)]
pub struct OpenCall {
    /// The call as the model made it.
    pub call: ToolCall,
    /// Its journal key.
    pub key: String,
    /// Whether its `started` record is on disk: it may have run.
    pub started: bool,
}

/// The result the model gets for a call that was sent and never seen to finish: what it
/// asked for, and that whether it happened is unknown.
pub fn interrupted_call_result(call: &ToolCall) -> String {
    format!(
        "Error: this call was interrupted by a restart of oxibot after it was sent, so its outcome is unknown; it was \
         not run again. It was {}({}). Check whether it took effect before repeating it.",
        call.function.name, call.function.arguments
    )
}

/// Everything one turn runs with.
pub struct Turn<'a> {
    /// The model client.
    pub provider: &'a Provider,
    /// Where tools run.
    pub host: &'a PluginHost,
    /// Settings.
    pub spec: &'a RunSpec,
    /// Tools offered to the model.
    pub tools: Arc<[ToolSpec]>,
    /// Passed with every tool call, with why the turn runs.
    pub context: BuiltinContext,
    /// Tools that run inside the kernel (asked before the plugins).
    pub builtins: BuiltinTools,
    /// Extension points.
    pub hooks: CompositeHook,
    /// Progress for the caller.
    pub events: UnboundedSender<TurnEvent>,
    /// Persists new messages.
    pub checkpoint: Checkpoint,
    /// Refuses calls before they run, when set.
    pub gate: Option<Arc<dyn tool_batch::ToolGate>>,
    /// The approvals calls go through (a person's yes for `ask` calls); none lets every call
    /// through (the kernel's own memory turns, whose gate allows only memory files).
    pub approvals: Option<Arc<super::approval::Approvals>>,
    /// When the request would only fit by dropping older turns, end the turn with a context
    /// overflow instead, so the caller can have those turns archived (a session's turn);
    /// otherwise they are left out of the request.
    pub compact_on_overflow: bool,
    /// The session the turn belongs to: the LLM client keeps the wire form of the session's
    /// last request under it, so a request encodes only what changed.
    pub session: Option<&'a str>,
    /// The turn journal (a session's turn); `None` runs calls without keys.
    pub journal: Option<Journal>,
}

impl Turn<'_> {
    /// Runs the loop over `messages` (system prompt first, the user's message last).
    pub async fn run(mut self, messages: Vec<Arc<ChatMessage>>) -> Result<TurnOutcome, RunError> {
        let mut request = ChatRequest {
            model: self.spec.model.clone(),
            messages,
            tools: std::mem::take(&mut self.tools),
            max_tokens: self.spec.max_tokens,
            temperature: self.spec.temperature,
            reasoning_effort: self.spec.reasoning_effort.clone(),
        };
        let turn_id = super::approval::shown::turn_id();
        if let Some(open) = self.journal.as_mut().map(|j| std::mem::take(&mut j.open)).filter(|o| !o.is_empty()) {
            self.settle_open_calls(&mut request.messages, open, &turn_id).await?;
        }
        let mut usage = Usage::default();
        let mut retried_empty = false;
        let mut repeats = RepeatGuard::default();
        let mut iteration = 0;
        while iteration < self.spec.max_iterations {
            iteration += 1;
            let messages = &mut request.messages;
            // With compaction on, a request that fits after shrinking needs nothing more (`fit`
            // would only estimate it again); one that does not goes back to be compacted.
            if self.compact_on_overflow {
                if !budget::shrink_to_fit(messages, self.spec.context_window, self.spec.max_tokens) {
                    return Err(RunError::EstimatedOverflow);
                }
            } else {
                budget::fit(messages, self.spec.context_window, self.spec.max_tokens);
            }
            self.hooks.before_iteration(&IterationInfo { iteration, messages: messages.len() });
            if let Some(refusal) = self.hooks.refuse_call() {
                self.store(vec![ChatMessage::text(Role::Assistant, refusal.clone()).from_kernel()])?;
                return Ok(TurnOutcome {
                    content: refusal,
                    usage,
                    iterations: iteration - 1,
                    hit_iteration_cap: false,
                });
            }
            let response = match self.call_model(&request).await {
                // The first stage of the overflow guard: long tool results cut; the caller
                // compacts history if that still does not fit.
                Err(overflow @ ProviderError::ContextOverflow { .. }) => {
                    if !budget::shorten_tool_results(&mut request.messages) {
                        return Err(overflow.into());
                    }
                    tracing::warn!("the model's context overflowed; retrying with long tool results cut");
                    self.call_model(&request).await?
                }
                other => other?,
            };
            add_usage(&mut usage, &response.usage);
            self.context.usage = usage;
            self.hooks.after_iteration(&StepInfo {
                iteration,
                usage: response.usage,
                tool_calls: response.tool_calls.len(),
            });
            if !response.tool_calls.is_empty() {
                let calls = response.tool_calls.clone();
                if self.run_tools(&mut request.messages, response, &mut repeats, &turn_id).await? {
                    let content = repeats::stuck_message(&calls);
                    self.store(vec![ChatMessage::text(Role::Assistant, content.clone()).from_kernel()])?;
                    return Ok(TurnOutcome { content, usage, iterations: iteration, hit_iteration_cap: false });
                }
                continue;
            }
            let text = response.content.clone().unwrap_or_default();
            if text.trim().is_empty() && !retried_empty {
                retried_empty = true;
                continue;
            }
            let fallback = text.trim().is_empty();
            let text = if fallback { EMPTY_REPLY_FALLBACK.to_owned() } else { text };
            let content = self.hooks.finalize_content(text);
            let answer = assistant_message(&content, &response);
            self.store(vec![if fallback { answer.from_kernel() } else { answer }])?;
            return Ok(TurnOutcome { content, usage, iterations: iteration, hit_iteration_cap: false });
        }
        let content = format!(
            "I stopped after {} steps without finishing (the tool-iteration limit). Tell me to continue, or narrow the task.",
            self.spec.max_iterations
        );
        self.store(vec![ChatMessage::text(Role::Assistant, content.clone()).from_kernel()])?;
        Ok(TurnOutcome { content, usage, iterations: iteration, hit_iteration_cap: true })
    }

    /// Sends `request` (the provider retries and fails over); deltas reach the caller as they
    /// come.
    async fn call_model(&mut self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let events = self.events.clone();
        let hooks = &mut self.hooks;
        let mut on_event = |event: StreamEvent| match event {
            StreamEvent::Text(delta) => {
                hooks.on_stream(&delta);
                let _ = events.send(TurnEvent::Delta(delta));
            }
            StreamEvent::Restart => {
                hooks.on_stream_restart();
                let _ = events.send(TurnEvent::Restart);
            }
            StreamEvent::Reasoning(_) => {}
        };
        let stream = self.spec.stream;
        let span = crate::telemetry::genai::model_call(&request.model, self.provider.name(), &request.messages);
        let response = self.provider.chat_in_session(request, self.session, stream, &mut on_event).await;
        if let Some(span) = span {
            span.finish(response.as_ref());
        }
        self.hooks.on_stream_end();
        response
    }

    /// Runs one step's tool calls (repeats refused by `repeats`) and stores their results;
    /// returns whether the turn is stuck on repeats and should end.
    async fn run_tools(
        &mut self,
        messages: &mut Vec<Arc<ChatMessage>>,
        response: ChatResponse,
        repeats: &mut RepeatGuard,
        turn_id: &str,
    ) -> Result<bool, RunError> {
        let calls = response.tool_calls.clone();
        let assistant = assistant_message(response.content.as_deref().unwrap_or(""), &response);
        messages.push(Arc::new(assistant.clone()));
        self.store(vec![assistant])?;
        self.hooks.before_execute_tools(&calls);
        for call in &calls {
            let _ = self.events.send(TurnEvent::ToolStarted {
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            });
        }
        let read_only: Vec<bool> =
            calls.iter().map(|c| tool_batch::is_read_only(&self.toolbox(turn_id), &c.function.name)).collect();
        let verdicts: Vec<Verdict> = calls.iter().zip(&read_only).map(|(call, ro)| repeats.check(call, *ro)).collect();
        let to_run: Vec<ToolCall> =
            calls.iter().zip(&verdicts).filter(|(_, v)| v.runs()).map(|(c, _)| c.clone()).collect();
        let ran = match self.journal.as_mut() {
            Some(journal) => {
                journal.steps_done += 1;
                let (turn, step) = (journal.turn.clone(), journal.steps_done);
                let keyed: Vec<(ToolCall, String)> = calls
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| verdicts[*index].runs())
                    .map(|(index, call)| (call.clone(), call_key(&turn, step, index)))
                    .collect();
                self.run_journaled(messages, keyed, turn_id).await?
            }
            None => tool_batch::execute(&self.toolbox(turn_id), &to_run, self.spec.max_tool_result_chars).await,
        };
        let journaled = self.journal.is_some();
        let mut ran = ran.into_iter();
        let mut results = Vec::with_capacity(calls.len());
        for ((call, verdict), ro) in calls.iter().zip(verdicts).zip(&read_only) {
            results.push(match verdict {
                Verdict::Replay(text) => {
                    ToolOutput { message: ChatMessage::tool_result(call, text).from_kernel(), is_error: false }
                }
                Verdict::Refuse(note) => {
                    ToolOutput { message: ChatMessage::tool_result(call, note).from_kernel(), is_error: true }
                }
                Verdict::Run => {
                    let output = ran.next().unwrap_or_else(|| ToolOutput {
                        message: ChatMessage::tool_result(call, "Error: the call produced no result"),
                        is_error: true,
                    });
                    repeats.record(call, *ro, output.is_error, output.message.content.as_str().unwrap_or_default());
                    output
                }
            });
        }
        let stuck = repeats.end_step();
        for (call, output) in calls.iter().zip(&results) {
            let _ = self
                .events
                .send(TurnEvent::ToolFinished { name: call.function.name.clone(), is_error: output.is_error });
        }
        let results: Vec<ChatMessage> = results.into_iter().map(|output| output.message).collect();
        if journaled {
            // The calls' results are stored already; only the refusals are left.
            let refused: Vec<ChatMessage> =
                results.into_iter().filter(|m| !m.extra.contains_key(CALL_KEY_KEY)).collect();
            messages.extend(refused.iter().cloned().map(Arc::new));
            self.store(refused)?;
        } else {
            messages.extend(results.iter().cloned().map(Arc::new));
            self.store(results)?;
        }
        Ok(stuck)
    }

    /// Runs `calls` group by group (see [`tool_batch::groups`]): each call's `started` record
    /// before its group is sent, the group's results stored (and added to `messages`) as soon
    /// as it returns. Returns the outputs in call order.
    async fn run_journaled(
        &mut self,
        messages: &mut Vec<Arc<ChatMessage>>,
        calls: Vec<(ToolCall, String)>,
        turn_id: &str,
    ) -> Result<Vec<ToolOutput>, RunError> {
        let plain: Vec<ToolCall> = calls.iter().map(|(call, _)| call.clone()).collect();
        let groups = {
            let toolbox = self.toolbox(turn_id);
            tool_batch::groups(&toolbox, &plain)
        };
        let mut outputs = Vec::with_capacity(calls.len());
        for group in groups {
            let group = &calls[group];
            if let Some(journal) = self.journal.as_mut() {
                for (call, key) in group {
                    (journal.record_start)(key, call).map_err(RunError::Checkpoint)?;
                }
            }
            let keyed: Vec<(&ToolCall, Option<String>)> = group.iter().map(|(c, k)| (c, Some(k.clone()))).collect();
            let ran = {
                let toolbox = self.toolbox(turn_id);
                tool_batch::run_group(&toolbox, &keyed, self.spec.max_tool_result_chars).await
            };
            let ran: Vec<ToolOutput> = ran
                .into_iter()
                .zip(group)
                .map(|(mut output, (_, key))| {
                    output.message.extra.insert(CALL_KEY_KEY.to_owned(), Value::String(key.clone()));
                    output
                })
                .collect();
            let stored: Vec<ChatMessage> = ran.iter().map(|o| o.message.clone()).collect();
            messages.extend(stored.iter().cloned().map(Arc::new));
            self.store(stored)?;
            outputs.extend(ran);
        }
        Ok(outputs)
    }

    /// After a restart: each open call that may have run and does not only read gets a
    /// result saying its outcome is unknown (it is not run again); the others (read-only, or
    /// never sent) run now. Their results are stored before the model is asked.
    async fn settle_open_calls(
        &mut self,
        messages: &mut Vec<Arc<ChatMessage>>,
        open: Vec<OpenCall>,
        turn_id: &str,
    ) -> Result<(), RunError> {
        let mut to_run = Vec::new();
        for open in open {
            let read_only = tool_batch::is_read_only(&self.toolbox(turn_id), &open.call.function.name);
            if open.started && !read_only {
                tracing::warn!(tool = %open.call.function.name, key = %open.key,
                    "a call a restart interrupted is reported to the model, not run again");
                let mut result = ChatMessage::tool_result(&open.call, interrupted_call_result(&open.call));
                result.extra.insert(CALL_KEY_KEY.to_owned(), Value::String(open.key.clone()));
                result.extra.insert(INTERRUPTED_KEY.to_owned(), Value::Bool(true));
                messages.push(Arc::new(result.clone()));
                self.store(vec![result])?;
            } else {
                to_run.push((open.call, open.key));
            }
        }
        if !to_run.is_empty() {
            self.run_journaled(messages, to_run, turn_id).await?;
        }
        Ok(())
    }

    /// What the calls of turn `turn_id` run with.
    fn toolbox<'a>(&'a self, turn_id: &'a str) -> tool_batch::Toolbox<'a> {
        let approval = self.approvals.as_deref().map(|approvals| super::approval::gate::ApprovalGate {
            approvals,
            events: &self.events,
            turn: turn_id,
        });
        tool_batch::Toolbox {
            host: self.host,
            builtins: &self.builtins,
            context: &self.context,
            gate: self.gate.as_deref(),
            approval,
        }
    }

    fn store(&mut self, new_messages: Vec<ChatMessage>) -> Result<(), RunError> {
        (self.checkpoint)(new_messages).map_err(RunError::Checkpoint)
    }
}

fn assistant_message(content: &str, response: &ChatResponse) -> ChatMessage {
    let mut message = ChatMessage::text(Role::Assistant, content);
    if content.is_empty() && !response.tool_calls.is_empty() {
        message.content = Value::Null;
    }
    message.tool_calls = response.tool_calls.clone();
    message.reasoning_content = response.reasoning_content.clone();
    message.thinking_blocks = response.thinking_blocks.clone();
    message
}

fn add_usage(total: &mut Usage, step: &Usage) {
    total.prompt_tokens += step.prompt_tokens;
    total.completion_tokens += step.completion_tokens;
    total.cached_tokens += step.cached_tokens;
    total.reasoning_tokens += step.reasoning_tokens;
}
