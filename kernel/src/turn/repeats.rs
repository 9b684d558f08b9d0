//! The loop guard of a turn: it stops loops, not progress.
//!
//! - One exact call (same tool, same arguments) runs once per turn. Asked again, a read-only
//!   tool's earlier result is replayed instead of a new run, and any other tool gets a note
//!   instead of running twice (a `memory` call must not store one fact twice). A call that
//!   changed something (a write that ran) makes the earlier results stale, so after it the
//!   same read runs again, and so does `exec` of the test command after an edit.
//! - A cycle is caught as a repeated window: when the calls of the turn end with the same
//!   run of one to [`MAX_CYCLE`] calls twice in a row (`A B A B`, `A B C A B C`), the turn
//!   ends, even where a write in the cycle made each call look new.
//! - A model step that brings no new call (every call replayed or refused) makes no progress;
//!   [`MAX_STALLED_STEPS`] of those in a row end the turn. So a turn that makes no progress
//!   ends at most [`MAX_STALLED_STEPS`] model calls after its last new call.
//!
//! The notes the model reads name the tool and nothing else: no call id or other token it
//! could copy into the next call's arguments (a 0.5B model put a quoted call id into
//! `job_id`, which made every call new again).
//!
//! Small models loop (a local 0.5B model called `read_file` on one file 20 times in a row),
//! and an unattended turn would otherwise burn its whole iteration budget on it.

use std::collections::HashMap;

use serde_json::Value;

use crate::message::ToolCall;

/// Model steps in a row without a new call before the turn ends.
pub const MAX_STALLED_STEPS: u32 = 2;

/// The longest cycle of calls (in calls) the guard looks for.
pub const MAX_CYCLE: usize = 4;

/// What happens to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; this text (the earlier result with a note) is its result.
    Replay(String),
    /// Do not run it; this note is its result.
    Refuse(String),
}

impl Verdict {
    /// Whether the call runs.
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Run)
    }
}

/// One call as the guard knows it: tool name and canonical arguments.
type CallKey = (String, String);

/// Watches the calls of one turn.
#[derive(Debug, Default)]
pub struct RepeatGuard {
    /// Calls that ran since the last change, with their results once known.
    seen: HashMap<CallKey, Option<String>>,
    /// Every call of the turn, in order (refused ones included), for cycle detection.
    sequence: Vec<CallKey>,
    /// Model steps in a row that brought no new call.
    stalled_steps: u32,
    /// Whether the current step has brought a new call.
    step_progressed: bool,
    /// Whether a repeated window was found.
    cycle: bool,
}

impl RepeatGuard {
    /// Decides on `call` (`read_only`: the tool changes nothing, so its result can be
    /// replayed).
    pub fn check(&mut self, call: &ToolCall, read_only: bool) -> Verdict {
        let key = key_of(call);
        self.sequence.push(key.clone());
        let name = &call.function.name;
        if self.ends_in_cycle() {
            self.cycle = true;
            return Verdict::Refuse(format!(
                "Not run: this {name} call repeats a cycle of calls already made in this turn. The results above \
                 are all there is; answer with them or ask the user."
            ));
        }
        match self.seen.get(&key) {
            None => {
                self.seen.insert(key, None);
                self.step_progressed = true;
                Verdict::Run
            }
            Some(Some(earlier)) if read_only => Verdict::Replay(format!(
                "[Same {name} call as earlier in this turn; it was not run again. Its result, unchanged:]\n{earlier}"
            )),
            Some(_) => Verdict::Refuse(format!(
                "Not run again: {name} with exactly these arguments already ran in this turn and its result is \
                 above. Use that result, or call with different arguments if you need something else."
            )),
        }
    }

    /// Records the result of a call that ran; a call that changed something (`read_only`
    /// false, no error) makes every earlier result stale.
    pub fn record(&mut self, call: &ToolCall, read_only: bool, is_error: bool, result: &str) {
        let key = key_of(call);
        if !read_only && !is_error {
            self.seen.clear();
        }
        self.seen.insert(key, Some(result.to_owned()));
    }

    /// Ends a model step; `true` when it is time to end the turn (a cycle, or too many steps
    /// in a row without a new call).
    pub fn end_step(&mut self) -> bool {
        self.stalled_steps = if std::mem::take(&mut self.step_progressed) { 0 } else { self.stalled_steps + 1 };
        self.cycle || self.stalled_steps >= MAX_STALLED_STEPS
    }

    /// Whether the calls end with one window of calls twice in a row.
    fn ends_in_cycle(&self) -> bool {
        let calls = &self.sequence;
        (2..=MAX_CYCLE).any(|window| {
            calls.len() >= 2 * window
                && calls[calls.len() - window..] == calls[calls.len() - 2 * window..calls.len() - window]
        })
    }
}

fn key_of(call: &ToolCall) -> CallKey {
    (call.function.name.clone(), canonical(&call.function.arguments))
}

/// The arguments in one canonical form, so `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` count as
/// the same call (object keys come out sorted); text that is not JSON counts as itself.
fn canonical(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments).map(|value| value.to_string()).unwrap_or_else(|_| arguments.to_owned())
}

/// The answer that ends a turn stuck in a loop.
pub fn stuck_message(calls: &[ToolCall]) -> String {
    let mut names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    format!(
        "I stopped: I kept repeating the same tool calls ({}) without getting anything new. Tell me how to go on, \
         or rephrase the task.",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall::new(id, name, arguments)
    }

    fn run(guard: &mut RepeatGuard, c: &ToolCall, read_only: bool) -> Verdict {
        let verdict = guard.check(c, read_only);
        if verdict.runs() {
            guard.record(c, read_only, false, "the result");
        }
        verdict
    }

    #[test]
    fn a_read_is_replayed_and_a_write_refused_the_second_time() {
        let mut guard = RepeatGuard::default();
        let read = call("c1", "read_file", r#"{"path": "a.md"}"#);
        assert_eq!(run(&mut guard, &read, true), Verdict::Run);
        let Verdict::Replay(text) = run(&mut guard, &call("c2", "read_file", r#"{ "path":"a.md" }"#), true) else {
            panic!("ran again")
        };
        assert!(text.ends_with("\nthe result") && !text.contains("c1"), "{text}");
        let write = call("c3", "memory", r#"{"fact": "x"}"#);
        let mut guard = RepeatGuard::default();
        assert_eq!(run(&mut guard, &write, false), Verdict::Run);
        let Verdict::Refuse(note) = run(&mut guard, &call("c4", "memory", r#"{"fact": "x"}"#), false) else {
            panic!("stored twice")
        };
        assert!(!note.contains("c3") && !note.contains("c4"), "no id the model could copy: {note}");
    }

    #[test]
    fn a_write_makes_the_same_read_run_again() {
        let mut guard = RepeatGuard::default();
        let read = call("c1", "read_file", r#"{"path": "a.md"}"#);
        run(&mut guard, &read, true);
        run(&mut guard, &call("c2", "edit_file", r#"{"path": "a.md"}"#), false);
        assert_eq!(run(&mut guard, &read, true), Verdict::Run);
    }

    #[test]
    fn a_cycle_of_writes_is_caught_as_a_repeated_window() {
        let mut guard = RepeatGuard::default();
        let (a, b) = (call("c1", "write_file", r#"{"n": 1}"#), call("c2", "write_file", r#"{"n": 2}"#));
        for c in [&a, &b, &a] {
            assert_eq!(run(&mut guard, c, false), Verdict::Run);
            assert!(!guard.end_step());
        }
        assert!(matches!(run(&mut guard, &b, false), Verdict::Refuse(_)));
        assert!(guard.end_step(), "A B A B ends the turn");
    }

    #[test]
    fn steps_without_a_new_call_end_the_turn_and_a_new_call_resets_the_count() {
        let mut guard = RepeatGuard::default();
        let read = call("c1", "read_file", r#"{"path": "a.md"}"#);
        run(&mut guard, &read, true);
        assert!(!guard.end_step());
        run(&mut guard, &read, true);
        assert!(!guard.end_step(), "one stalled step");
        run(&mut guard, &call("c2", "read_file", r#"{"path": "b.md"}"#), true);
        assert!(!guard.end_step(), "a new call is progress");
        run(&mut guard, &read, true);
        assert!(!guard.end_step());
        run(&mut guard, &call("c3", "list_dir", "{}"), true);
        run(&mut guard, &call("c3", "list_dir", "{}"), true);
        assert!(!guard.end_step());
        run(&mut guard, &call("c2", "read_file", r#"{"path": "b.md"}"#), true);
        assert!(!guard.end_step());
        run(&mut guard, &read, true);
        assert!(guard.end_step(), "two steps in a row without a new call");
    }
}
