//! The token counts of a reply: read from the `usage` the kernel puts in the metadata of the
//! outbound message that ends a model's turn, and written as each OpenAI API reports them.

use serde_json::{Value, json};

/// Tokens a reply cost; all zero when the kernel sent none (a command's reply).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    /// Input tokens, cached ones included.
    pub prompt: u64,
    /// Output tokens.
    pub completion: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached: u64,
}

impl TokenUsage {
    /// The counts in an outbound message's metadata (`usage.prompt_tokens`, …).
    pub fn from_metadata(metadata: &Value) -> TokenUsage {
        let usage = &metadata["usage"];
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        TokenUsage {
            prompt: count("prompt_tokens"),
            completion: count("completion_tokens"),
            cached: count("cached_tokens"),
        }
    }

    /// Input and output tokens together.
    pub fn total(&self) -> u64 {
        self.prompt + self.completion
    }

    /// As Chat Completions reports it.
    pub fn chat(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.total(),
            "prompt_tokens_details": {"cached_tokens": self.cached}
        })
    }

    /// As the Responses API reports it.
    pub fn responses(&self) -> Value {
        json!({
            "input_tokens": self.prompt,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.total()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_come_from_the_metadata_and_missing_ones_are_zero() {
        let usage = TokenUsage::from_metadata(
            &json!({"request_id": "r", "usage": {"prompt_tokens": 12, "completion_tokens": 5, "cached_tokens": 3}}),
        );
        assert_eq!(usage, TokenUsage { prompt: 12, completion: 5, cached: 3 });
        assert_eq!(usage.chat()["total_tokens"], 17);
        assert_eq!(usage.chat()["prompt_tokens_details"]["cached_tokens"], 3);
        assert_eq!(usage.responses()["input_tokens"], 12);
        assert_eq!(usage.responses()["output_tokens"], 5);
        assert_eq!(TokenUsage::from_metadata(&json!({})), TokenUsage::default());
        assert_eq!(TokenUsage::from_metadata(&Value::Null), TokenUsage::default());
    }
}
