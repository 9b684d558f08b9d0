//! The memory prompts (`templates/agent/*.md`, embedded) and the texts built around them:
//! a slice of conversation as a transcript, and Dream's inputs.

use crate::context::ContextBuilder;
use crate::message::{ChatMessage, Role};

use crate::history::HistoryEntry;

/// System prompt of the summarising call.
pub const CONSOLIDATE: &str = include_str!("../../../templates/agent/consolidate.md");
/// System prompt of Dream's analysis.
pub const DREAM_PHASE1: &str = include_str!("../../../templates/agent/dream_phase1.md");
/// System prompt of Dream's editing run.
pub const DREAM_PHASE2: &str = include_str!("../../../templates/agent/dream_phase2.md");

/// System prompt of the silent turn that saves what matters before a slice is archived.
pub const MEMORY_FLUSH: &str = include_str!("../../../templates/agent/memory_flush.md");

/// Longest tool output quoted in a transcript, in characters.
const TOOL_OUTPUT_CHARS: usize = 300;

/// `messages` as a plain transcript, one block per message: `[time] ROLE: text`. Texts the
/// kernel wrote (loop-guard stops and notes, errors, fallbacks) are left out: they are not
/// the conversation and must not come back as memory.
pub fn transcript(messages: &[ChatMessage]) -> String {
    messages
        .iter()
        .filter(|m| !m.is_from_kernel())
        .map(transcript_line)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn transcript_line(message: &ChatMessage) -> String {
    let time = message.timestamp.as_deref().map(minute).map(|t| format!("[{t}] ")).unwrap_or_default();
    let text = ContextBuilder::strip_runtime(&message.text_content());
    let text = text.trim();
    match message.role {
        Role::User => format!("{time}USER: {text}"),
        Role::Assistant if !message.tool_calls.is_empty() => {
            let tools: Vec<&str> = message.tool_calls.iter().map(|c| c.function.name.as_str()).collect();
            let said = if text.is_empty() { String::new() } else { format!(" {text}") };
            format!("{time}ASSISTANT (used {}):{said}", tools.join(", "))
        }
        Role::Assistant if text.is_empty() => String::new(),
        Role::Assistant => format!("{time}ASSISTANT: {text}"),
        Role::Tool => {
            let name = message.name.as_deref().unwrap_or("tool");
            format!("{time}TOOL {name}: {}", cut(text, TOOL_OUTPUT_CHARS))
        }
        Role::System => String::new(),
    }
}

/// The user message of the summarising call.
pub fn consolidation_input(messages: &[ChatMessage]) -> String {
    format!("## Conversation to archive\n\n{}", transcript(messages))
}

/// The summary the summarising prompt asks for when nothing is worth keeping.
pub const NOTHING_NOTABLE: &str = "- (nothing notable)";

/// Whether `summary` keeps nothing: empty, or the prompt's "nothing notable" line.
pub fn is_nothing_notable(summary: &str) -> bool {
    let text = summary.trim();
    text.is_empty() || text.trim_start_matches("- ").trim().eq_ignore_ascii_case("(nothing notable)")
}

/// Whether `summary` repeats its own instructions (`prompt`) instead of summarising: at least
/// half of its lines of some length are lines of the prompt. A weak model does this.
pub fn echoes_prompt(summary: &str, prompt: &str) -> bool {
    let normalize = |line: &str| line.trim().trim_start_matches("- ").trim().to_lowercase();
    let prompt_lines: Vec<String> = prompt.lines().map(normalize).filter(|l| l.len() >= 12).collect();
    let lines: Vec<String> = summary.lines().map(normalize).filter(|l| l.len() >= 12).collect();
    let echoed = lines.iter().filter(|line| prompt_lines.iter().any(|p| p.contains(line.as_str()))).count();
    echoed > 0 && echoed * 2 >= lines.len()
}

/// What is archived when summarising fails: the transcript itself, marked.
pub fn raw_archive(messages: &[ChatMessage]) -> String {
    format!("[RAW] {} messages\n{}", messages.len(), transcript(messages))
}

/// `2026-04-03T00:02:11.123` → `2026-04-03 00:02` (other text is kept as it is).
pub fn minute(timestamp: &str) -> String {
    let head: String = timestamp.chars().take(16).collect();
    head.replacen('T', " ", 1)
}

/// The current content of the three memory files, as Dream sees them.
pub struct MemoryFiles {
    /// `memory/MEMORY.md`.
    pub memory: String,
    /// `SOUL.md`.
    pub soul: String,
    /// `USER.md`.
    pub user: String,
}

impl MemoryFiles {
    /// The files' section of both Dream prompts.
    pub fn render(&self, today: &str) -> String {
        format!(
            "## Current Date\n{today}\n\n## Current MEMORY.md ({} chars)\n{}\n\n## Current SOUL.md ({} chars)\n{}\n\n## Current USER.md ({} chars)\n{}",
            self.memory.chars().count(),
            self.memory,
            self.soul.chars().count(),
            self.soul,
            self.user.chars().count(),
            self.user
        )
    }
}

/// The user message of Dream's analysis.
pub fn dream_phase1_input(batch: &[HistoryEntry], files: &MemoryFiles, today: &str) -> String {
    let history: Vec<String> = batch.iter().map(|e| format!("[{}] {}", e.timestamp, e.content)).collect();
    format!("## Conversation History\n{}\n\n{}", history.join("\n"), files.render(today))
}

/// The user message of Dream's editing run.
pub fn dream_phase2_input(analysis: &str, files: &MemoryFiles, today: &str, skills: &[String]) -> String {
    let skills = if skills.is_empty() {
        "(none)".to_owned()
    } else {
        skills.iter().map(|s| format!("- {s}")).collect::<Vec<_>>().join("\n")
    };
    format!("## Analysis Result\n{analysis}\n\n{}\n\n## Existing Skills\n{skills}", files.render(today))
}

/// Dream's analysis without the findings that repeat an example of its prompt instead of a
/// fact from the history: a finding with a `<placeholder>`, or whose text is in the prompt
/// (a small model "found" the prompt's own example fact).
pub fn drop_prompt_examples(analysis: &str) -> String {
    let prompt = DREAM_PHASE1.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let from_prompt = |line: &str| {
        let Some((_, body)) = line.trim().split_once(']') else { return false };
        let body = body.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        let placeholder = body.find('<').is_some_and(|open| body[open..].contains('>'));
        placeholder || (body.len() >= 8 && prompt.contains(&body))
    };
    analysis.lines().filter(|line| !from_prompt(line)).collect::<Vec<_>>().join("\n")
}

/// Whether Dream's analysis asks for no change at all.
pub fn analysis_is_skip(analysis: &str) -> bool {
    let findings: Vec<&str> = analysis.lines().map(str::trim).filter(|l| l.starts_with('[')).collect();
    findings.is_empty() || findings.iter().all(|l| l.starts_with("[SKIP]"))
}

/// `text` cut to `max` characters, with `…` when anything was left out.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn a_transcript_names_speakers_tools_and_times_and_drops_the_runtime_block() {
        let mut user = ChatMessage::text(Role::User, "Where is my backup?");
        user.timestamp = Some("2026-04-03T00:02:11.5".into());
        let call = ToolCall::new("c", "exec", "{}");
        let mut step = ChatMessage::text(Role::Assistant, "");
        step.tool_calls = vec![call.clone()];
        let output = ChatMessage::tool_result(&call, "x".repeat(1000));
        let answer = ChatMessage::text(Role::Assistant, "In /srv/backup.");
        let text = transcript(&[ChatMessage::text(Role::System, "sys"), user, step, output, answer]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[2026-04-03 00:02] USER: Where is my backup?");
        assert_eq!(lines[1], "ASSISTANT (used exec):");
        assert!(lines[2].starts_with("TOOL exec: xxx") && lines[2].chars().count() < 320);
        assert_eq!(lines[3], "ASSISTANT: In /srv/backup.");
    }

    #[test]
    fn a_raw_archive_is_marked_and_keeps_every_message() {
        let raw = raw_archive(&[ChatMessage::text(Role::User, "a"), ChatMessage::text(Role::Assistant, "b")]);
        assert_eq!(raw, "[RAW] 2 messages\nUSER: a\nASSISTANT: b");
    }

    #[test]
    fn only_an_analysis_with_nothing_but_skip_is_a_skip() {
        assert!(analysis_is_skip("[SKIP]"));
        assert!(analysis_is_skip("Nothing to do."));
        assert!(!analysis_is_skip("[USER] lives in Lyon\n[SKIP]"));
    }

    #[test]
    fn a_summary_of_nothing_or_of_the_instructions_is_recognised() {
        assert!(
            is_nothing_notable(NOTHING_NOTABLE)
                && is_nothing_notable("  (nothing notable)\n")
                && is_nothing_notable("")
        );
        assert!(!is_nothing_notable("- user's dog is called Pixel"));
        let parroted = "- what the user said about themselves: name, location, work, habits, preferences, plans;\n\
                        - Answer with the bullet list only.";
        assert!(echoes_prompt(parroted, CONSOLIDATE));
        assert!(!echoes_prompt("- user's dog is called Pixel\n- moved the backup to /srv/b", CONSOLIDATE));
    }

    #[test]
    fn findings_that_repeat_the_prompts_examples_are_dropped() {
        let analysis = "[USER] lives in <new city> (not <old city>)\n[USER] owns a <pet> named <name>\n\
                        [SOUL] talked about pets\n[USER] keeps bees on the roof";
        assert_eq!(drop_prompt_examples(analysis), "[USER] keeps bees on the roof");
        assert!(analysis_is_skip(&drop_prompt_examples("[USER] owns a <pet> named <name>")));
    }

    #[test]
    fn the_prompts_use_no_example_a_real_user_could_have() {
        for prompt in [CONSOLIDATE, DREAM_PHASE1, DREAM_PHASE2] {
            for name in ["Luna", "Tokyo", "Osaka"] {
                assert!(!prompt.contains(name), "{name}");
            }
        }
    }

    #[test]
    fn the_prompts_are_embedded() {
        assert!(CONSOLIDATE.contains("bullet"));
        assert!(DREAM_PHASE1.contains("[MEMORY-REMOVE]"));
        assert!(DREAM_PHASE2.contains("edit_file"));
    }
}
