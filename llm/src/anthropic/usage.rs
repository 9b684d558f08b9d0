//! What an Anthropic reply says about how it ended and the tokens it used, in OpenAI terms:
//! read alike from a whole message and from a stream's events.

use serde_json::Value;

use crate::types::Usage;

/// Anthropic's stop reason in OpenAI words.
pub(crate) fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        other => other,
    }
    .to_owned()
}

/// Anthropic's token counts: input is split into uncached, cache-written and cache-read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnthropicUsage {
    input: u64,
    cache_creation: u64,
    cache_read: u64,
    output: u64,
}

impl AnthropicUsage {
    /// These counts with the ones present in `usage` replacing them (streams send the input
    /// counts first and the output count last).
    pub(crate) fn merged(self, usage: &Value) -> AnthropicUsage {
        let get = |key: &str, old: u64| usage.get(key).and_then(Value::as_u64).unwrap_or(old);
        AnthropicUsage {
            input: get("input_tokens", self.input),
            cache_creation: get("cache_creation_input_tokens", self.cache_creation),
            cache_read: get("cache_read_input_tokens", self.cache_read),
            output: get("output_tokens", self.output),
        }
    }
}

impl From<AnthropicUsage> for Usage {
    fn from(u: AnthropicUsage) -> Usage {
        Usage {
            prompt_tokens: u.input + u.cache_creation + u.cache_read,
            completion_tokens: u.output,
            cached_tokens: u.cache_read,
            // Anthropic counts thinking in `output_tokens` and reports no share of its own.
            reasoning_tokens: 0,
        }
    }
}
