//! The token counts of a Chat Completions reply, read alike from a whole reply and from a
//! stream's usage chunk.

use serde_json::Value;

use crate::types::Usage;

/// `usage`, with cached tokens from wherever the provider puts them and reasoning tokens from
/// `completion_tokens_details`.
pub(crate) fn parse_usage(usage: &Value) -> Usage {
    let number = |path: &[&str]| path.iter().try_fold(usage, |v, key| v.get(key)).and_then(Value::as_u64).unwrap_or(0);
    let cached = [&["prompt_tokens_details", "cached_tokens"][..], &["cached_tokens"], &["prompt_cache_hit_tokens"]]
        .iter()
        .map(|path| number(path))
        .find(|n| *n > 0)
        .unwrap_or(0);
    Usage {
        prompt_tokens: number(&["prompt_tokens"]),
        completion_tokens: number(&["completion_tokens"]),
        cached_tokens: cached,
        reasoning_tokens: number(&["completion_tokens_details", "reasoning_tokens"]),
    }
}
