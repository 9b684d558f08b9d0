//! A user message too long for the model: its whole text is saved as a file in the workspace
//! (so nothing the user sent is lost), and the conversation keeps its beginning plus a note
//! that tells the model where the rest is and how to read it.

use std::path::Path;

use crate::fsutil::write_atomic;
use crate::turn::budget::SAFETY_TOKENS;

/// Where long messages are saved, relative to the workspace.
pub const UPLOADS_DIR: &str = "uploads";

/// Characters of a long message kept in the conversation itself.
const KEPT_CHARS: usize = 2_000;

/// A message may take at most this share of the prompt budget (the history and the system
/// prompt need the rest).
const MAX_SHARE_OF_BUDGET: u64 = 2;

/// Bytes per token of the cheap estimate the turn budget also uses.
const BYTES_PER_TOKEN: u64 = 3;

/// The longest message, in bytes, a model with `context_window` tokens and replies of
/// `max_tokens` is sent whole.
pub fn limit_bytes(context_window: u32, max_tokens: u32) -> u64 {
    let budget = context_window.saturating_sub(max_tokens).saturating_sub(SAFETY_TOKENS).max(1024);
    u64::from(budget) / MAX_SHARE_OF_BUDGET * BYTES_PER_TOKEN
}

/// The text to keep in the conversation for `text` when it is longer than `limit` bytes:
/// the whole text goes to `<workspace>/uploads/<name>` first. `None` when it fits.
pub fn shorten(workspace: &Path, name: &str, text: &str, limit: u64) -> std::io::Result<Option<String>> {
    if text.len() as u64 <= limit {
        return Ok(None);
    }
    let relative = format!("{UPLOADS_DIR}/{name}");
    write_atomic(&workspace.join(&relative), text.as_bytes())?;
    let head: String = text.chars().take(KEPT_CHARS).collect();
    let total = text.chars().count();
    Ok(Some(format!(
        "{head}\n\n[This message is {total} characters long, more than can be read at once; only its first \
         {KEPT_CHARS} characters are shown here. The whole message is saved in the workspace as {relative}: \
         read it in parts with read_file (offset and limit) before answering.]"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn a_message_within_the_limit_is_left_alone() {
        let dir = TempDir::new("oversize-fits");
        assert_eq!(shorten(dir.path(), "m.md", "hello", 100).unwrap(), None);
        assert!(!dir.path().join(UPLOADS_DIR).exists());
    }

    #[test]
    fn a_long_message_is_saved_whole_and_the_conversation_keeps_its_start_and_a_pointer() {
        let dir = TempDir::new("oversize-long");
        let text = format!("START {}", "é".repeat(10_000));
        let kept = shorten(dir.path(), "m.md", &text, 1_000).unwrap().unwrap();
        assert_eq!(dir.read("uploads/m.md"), text, "nothing of the message is lost");
        assert!(kept.starts_with("START "));
        assert!(kept.contains("uploads/m.md") && kept.contains("10006 characters"), "{kept}");
        assert!(kept.len() < 10_000);
    }

    #[test]
    fn the_limit_leaves_most_of_the_budget_to_the_rest_of_the_prompt() {
        assert_eq!(limit_bytes(65_536, 8_192), (65_536 - 8_192 - 1_024) / 2 * 3);
        assert_eq!(limit_bytes(1_000, 4_000), 1_024 / 2 * 3, "a tiny window still takes a short message");
    }
}
