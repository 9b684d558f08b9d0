//! The loop guard of a turn: a tool call repeated with the same name and the same arguments
//! runs twice at most; after that the model gets a note pointing at the earlier result instead
//! of a new run, and a turn whose model keeps asking only for such repeats is ended.
//!
//! Small models do this (a local 0.5B model called `read_file` on one file 20 times in a row),
//! and an unattended turn would otherwise burn its whole iteration budget on it.

use std::collections::HashMap;

use serde_json::Value;

use crate::message::ToolCall;

/// How often one exact call runs in a turn.
const MAX_RUNS: u32 = 2;

/// Model steps in a row made only of refused repeats before the turn ends.
const MAX_REFUSED_STEPS: u32 = 3;

/// What happens to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; this note is its result.
    Refuse(String),
}

/// Counts the calls of one turn.
#[derive(Debug, Default)]
pub struct RepeatGuard {
    /// `(tool, canonical arguments)` → runs so far and the id of the first one.
    seen: HashMap<(String, String), (u32, String)>,
    /// Model steps in a row whose every call was refused.
    refused_steps: u32,
}

impl RepeatGuard {
    /// Decides on `call`, counting it when it runs.
    pub fn check(&mut self, call: &ToolCall) -> Verdict {
        let key = (call.function.name.clone(), canonical(&call.function.arguments));
        let (runs, first) = self.seen.entry(key).or_insert_with(|| (0, call.id.clone()));
        if *runs >= MAX_RUNS {
            return Verdict::Refuse(format!(
                "Not run again: {} with exactly these arguments already ran {runs} times in this turn (first as call \
                 {first}); its result is above. Use it, or change the arguments if you need something else.",
                call.function.name
            ));
        }
        *runs += 1;
        Verdict::Run
    }

    /// Records a model step; `true` when it is time to end the turn (the model asked only
    /// for refused repeats too many steps in a row).
    pub fn step(&mut self, all_refused: bool) -> bool {
        self.refused_steps = if all_refused { self.refused_steps + 1 } else { 0 };
        self.refused_steps >= MAX_REFUSED_STEPS
    }
}

/// The arguments in one canonical form, so `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` count as
/// the same call (object keys come out sorted); text that is not JSON counts as itself.
fn canonical(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments).map(|value| value.to_string()).unwrap_or_else(|_| arguments.to_owned())
}

/// The answer that ends a turn stuck on repeats.
pub fn stuck_message(calls: &[ToolCall]) -> String {
    let mut names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
    names.dedup();
    format!(
        "I stopped: I kept repeating the same tool call ({}) without getting anything new. Tell me how to go on, or \
         rephrase the task.",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall::new(id, "read_file", arguments)
    }

    #[test]
    fn the_same_call_runs_twice_then_gets_a_note_pointing_at_the_first() {
        let mut guard = RepeatGuard::default();
        assert_eq!(guard.check(&call("c1", r#"{"path": "a.md"}"#)), Verdict::Run);
        assert_eq!(guard.check(&call("c2", r#"{ "path":"a.md" }"#)), Verdict::Run);
        let Verdict::Refuse(note) = guard.check(&call("c3", r#"{"path": "a.md"}"#)) else { panic!("ran a third time") };
        assert!(note.contains("c1") && note.contains("read_file"), "{note}");
        assert_eq!(guard.check(&call("c4", r#"{"path": "b.md"}"#)), Verdict::Run, "other arguments are another call");
    }

    #[test]
    fn key_order_does_not_make_a_call_new() {
        let mut guard = RepeatGuard::default();
        guard.check(&call("c1", r#"{"path": "a.md", "offset": 1}"#));
        guard.check(&call("c2", r#"{"offset": 1, "path": "a.md"}"#));
        assert!(matches!(guard.check(&call("c3", r#"{"path":"a.md","offset":1}"#)), Verdict::Refuse(_)));
    }

    #[test]
    fn only_consecutive_refused_steps_end_the_turn() {
        let mut guard = RepeatGuard::default();
        assert!(!guard.step(true));
        assert!(!guard.step(true));
        assert!(!guard.step(false), "a step with a real call resets the count");
        assert!(!guard.step(true));
        assert!(!guard.step(true));
        assert!(guard.step(true));
    }
}
