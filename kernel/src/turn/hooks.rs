//! Runner hooks: extension points around each iteration, composed with error isolation.
//!
//! A hook that returns an error or panics is logged and skipped; it never breaks the turn.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use crate::message::ToolCall;
use crate::provider::Usage;

/// What a hook may fail with: any error of its own, logged with its sources and skipped.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a hook method.
pub type HookResult<T = ()> = Result<T, HookError>;

/// Where the runner is, for `before_iteration`.
#[derive(Debug, Clone)]
pub struct IterationInfo {
    /// 1-based iteration number within the turn.
    pub iteration: u32,
    /// Messages in the request about to be sent.
    pub messages: usize,
}

/// What one model step produced, for `after_iteration`.
#[derive(Debug, Clone)]
pub struct StepInfo {
    /// 1-based iteration number.
    pub iteration: u32,
    /// Token usage of this model call.
    pub usage: Usage,
    /// Tool calls the model made (empty for the final answer).
    pub tool_calls: usize,
}

/// A set of optional callbacks around the runner's loop. Every method has a no-op default.
pub trait Hook: Send {
    /// A short name for logs.
    fn name(&self) -> &str;
    /// Before each model call.
    fn before_iteration(&mut self, _info: &IterationInfo) -> HookResult {
        Ok(())
    }
    /// Before each model call: a reason not to make it (a spending cap reached), which ends
    /// the turn with that reason as its answer.
    fn refuse_call(&mut self) -> Option<String> {
        None
    }
    /// For each streamed text delta.
    fn on_stream(&mut self, _delta: &str) -> HookResult {
        Ok(())
    }
    /// When a model call's stream is complete.
    fn on_stream_end(&mut self) -> HookResult {
        Ok(())
    }
    /// When the provider retried after partial output: the deltas so far are void.
    fn on_stream_restart(&mut self) -> HookResult {
        Ok(())
    }
    /// Before a batch of tool calls runs.
    fn before_execute_tools(&mut self, _calls: &[ToolCall]) -> HookResult {
        Ok(())
    }
    /// After each model step (and its tools).
    fn after_iteration(&mut self, _step: &StepInfo) -> HookResult {
        Ok(())
    }
    /// Post-processes the final answer.
    fn finalize_content(&mut self, content: String) -> HookResult<String> {
        Ok(content)
    }
}

/// Runs several hooks in order, isolating each one's failures.
#[derive(Default)]
pub struct CompositeHook {
    hooks: Vec<Box<dyn Hook>>,
}

impl CompositeHook {
    /// A composite of `hooks`, called in order.
    pub fn new(hooks: Vec<Box<dyn Hook>>) -> CompositeHook {
        CompositeHook { hooks }
    }

    /// Calls `before_iteration` on every hook.
    pub fn before_iteration(&mut self, info: &IterationInfo) {
        self.each("before_iteration", |h| h.before_iteration(info));
    }

    /// The first hook's reason not to make the next model call, if any.
    pub fn refuse_call(&mut self) -> Option<String> {
        self.hooks.iter_mut().find_map(|hook| hook.refuse_call())
    }

    /// Calls `on_stream` on every hook.
    pub fn on_stream(&mut self, delta: &str) {
        self.each("on_stream", |h| h.on_stream(delta));
    }

    /// Calls `on_stream_end` on every hook.
    pub fn on_stream_end(&mut self) {
        self.each("on_stream_end", |h| h.on_stream_end());
    }

    /// Calls `on_stream_restart` on every hook.
    pub fn on_stream_restart(&mut self) {
        self.each("on_stream_restart", |h| h.on_stream_restart());
    }

    /// Calls `before_execute_tools` on every hook.
    pub fn before_execute_tools(&mut self, calls: &[ToolCall]) {
        self.each("before_execute_tools", |h| h.before_execute_tools(calls));
    }

    /// Calls `after_iteration` on every hook.
    pub fn after_iteration(&mut self, step: &StepInfo) {
        self.each("after_iteration", |h| h.after_iteration(step));
    }

    /// Passes the content through every hook's `finalize_content`; a failing hook leaves
    /// the content as it was.
    pub fn finalize_content(&mut self, mut content: String) -> String {
        for hook in &mut self.hooks {
            let input = content.clone();
            match catch_unwind(AssertUnwindSafe(|| hook.finalize_content(input))) {
                Ok(Ok(output)) => content = output,
                Ok(Err(error)) => tracing::warn!(hook = hook.name(), %error, "hook finalize_content failed; ignored"),
                Err(_) => tracing::error!(hook = hook.name(), "hook finalize_content panicked; ignored"),
            }
        }
        content
    }

    fn each(&mut self, stage: &str, mut call: impl FnMut(&mut dyn Hook) -> HookResult) {
        for hook in &mut self.hooks {
            match catch_unwind(AssertUnwindSafe(|| call(hook.as_mut()))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(hook = hook.name(), stage, %error, "hook failed; ignored"),
                Err(_) => tracing::error!(hook = hook.name(), stage, "hook panicked; ignored"),
            }
        }
    }
}

/// Token totals of a session, accumulated by [`UsageHook`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Prompt tokens over all model calls.
    pub prompt_tokens: u64,
    /// Completion tokens over all model calls.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
    /// Number of model calls.
    pub calls: u64,
    /// Prompt tokens of the most recent call (the current context size).
    pub last_prompt_tokens: u64,
    /// How long each call of the running turn took, in milliseconds (taken when the turn's
    /// usage is written).
    pub turn_call_ms: Vec<u64>,
}

/// Accumulates token usage into shared totals (one per session).
pub struct UsageHook {
    totals: Arc<Mutex<UsageTotals>>,
    /// When the call in flight started.
    call_started: Option<std::time::Instant>,
}

impl UsageHook {
    /// A hook adding into `totals`.
    pub fn new(totals: Arc<Mutex<UsageTotals>>) -> UsageHook {
        UsageHook { totals, call_started: None }
    }
}

impl Hook for UsageHook {
    fn name(&self) -> &str {
        "usage"
    }

    fn before_iteration(&mut self, _info: &IterationInfo) -> HookResult {
        self.call_started = Some(std::time::Instant::now());
        Ok(())
    }

    fn after_iteration(&mut self, step: &StepInfo) -> HookResult {
        let took = self.call_started.take().map(|started| started.elapsed()).unwrap_or_default();
        let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        totals.turn_call_ms.push(crate::usage::millis(took));
        totals.prompt_tokens += step.usage.prompt_tokens;
        totals.completion_tokens += step.usage.completion_tokens;
        totals.cached_tokens += step.usage.cached_tokens;
        totals.calls += 1;
        totals.last_prompt_tokens = step.usage.prompt_tokens;
        Ok(())
    }
}

/// Keeps the text the model is streaming and has not finished yet, so a stopped turn can
/// keep what the person already saw. Emptied when a stream is complete: the runner stores
/// a finished step's text itself.
pub struct PartialReply {
    text: Arc<Mutex<String>>,
}

impl PartialReply {
    /// A hook writing into `text`, which the caller reads after a stop.
    pub fn new(text: Arc<Mutex<String>>) -> PartialReply {
        PartialReply { text }
    }

    fn text(&self) -> std::sync::MutexGuard<'_, String> {
        self.text.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Hook for PartialReply {
    fn name(&self) -> &str {
        "partial-reply"
    }

    fn before_iteration(&mut self, _info: &IterationInfo) -> HookResult {
        self.text().clear();
        Ok(())
    }

    fn on_stream(&mut self, delta: &str) -> HookResult {
        self.text().push_str(delta);
        Ok(())
    }

    fn on_stream_end(&mut self) -> HookResult {
        self.text().clear();
        Ok(())
    }

    fn on_stream_restart(&mut self) -> HookResult {
        self.text().clear();
        Ok(())
    }
}

/// Removes `<think>…</think>` blocks that some models put in their answers.
pub struct StripThinking;

impl Hook for StripThinking {
    fn name(&self) -> &str {
        "strip-thinking"
    }

    fn finalize_content(&mut self, content: String) -> HookResult<String> {
        Ok(strip_think_blocks(&content))
    }
}

/// `content` without `<think>…</think>` blocks (an unclosed block runs to the end).
pub fn strip_think_blocks(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    let mut rest = content;
    while let Some(start) = rest.find("<think>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing;
    impl Hook for Failing {
        fn name(&self) -> &str {
            "failing"
        }
        fn on_stream(&mut self, _delta: &str) -> HookResult {
            Err("boom".into())
        }
        fn finalize_content(&mut self, _content: String) -> HookResult<String> {
            panic!("hook bug")
        }
    }

    struct Counting(Arc<Mutex<u32>>);
    impl Hook for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn on_stream(&mut self, _delta: &str) -> HookResult {
            *self.0.lock().unwrap() += 1;
            Ok(())
        }
    }

    #[test]
    fn a_failing_or_panicking_hook_does_not_stop_the_others() {
        let count = Arc::new(Mutex::new(0));
        let mut hooks =
            CompositeHook::new(vec![Box::new(Failing), Box::new(Counting(count.clone())), Box::new(StripThinking)]);
        hooks.on_stream("x");
        assert_eq!(*count.lock().unwrap(), 1);
        assert_eq!(hooks.finalize_content("<think>plan</think>answer".into()), "answer");
    }

    #[test]
    fn think_blocks_are_stripped_including_unclosed_ones() {
        assert_eq!(strip_think_blocks("a<think>x</think>b<think>y</think>c"), "abc");
        assert_eq!(strip_think_blocks("answer<think>never closed"), "answer");
        assert_eq!(strip_think_blocks("plain"), "plain");
    }

    #[test]
    fn usage_hook_accumulates_per_session() {
        let totals = Arc::new(Mutex::new(UsageTotals::default()));
        let mut hook = UsageHook::new(totals.clone());
        let usage = Usage { prompt_tokens: 100, completion_tokens: 10, cached_tokens: 40, reasoning_tokens: 0 };
        hook.after_iteration(&StepInfo { iteration: 1, usage, tool_calls: 0 }).unwrap();
        hook.after_iteration(&StepInfo { iteration: 2, usage, tool_calls: 0 }).unwrap();
        let t = totals.lock().unwrap().clone();
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.cached_tokens, t.calls), (200, 20, 80, 2));
        assert_eq!(t.turn_call_ms.len(), 2, "each call's time is kept for the turn's line");
    }
}
