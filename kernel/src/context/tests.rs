//! Tests of the whole builder against real temporary workspaces.

use chrono::{Duration, Utc};

use super::*;
use crate::testing::TempDir;
use builtin::builtin_path;

/// A workspace with every bootstrap file, a memory file, history, and one workspace skill.
fn full_workspace(label: &str) -> TempDir {
    let ws = TempDir::new(label);
    ws.write("AGENTS.md", "agents rules\n");
    ws.write("SOUL.md", "soul text\n");
    ws.write("USER.md", "user profile\n");
    ws.write("TOOLS.md", "tool notes\n");
    ws.write("memory/MEMORY.md", "# Long-term Memory\n\n- The user's cat is called Luna.\n");
    ws.write(
        "memory/history.jsonl",
        "{\"cursor\": 1, \"timestamp\": \"2026-04-15 14:58\", \"content\": \"Talked about cats\"}\n",
    );
    ws.write("skills/notes/SKILL.md", "---\nname: notes\ndescription: Keep notes tidy.\n---\nNotes body.\n");
    ws.write("skills/house/SKILL.md", "---\nname: house\ndescription: House rules.\nalways: true\n---\nHOUSE RULES\n");
    ws
}

/// Byte offset of `needle` in `text`, failing the test when absent.
fn position(text: &str, needle: &str) -> usize {
    text.find(needle).unwrap_or_else(|| panic!("prompt lacks {needle:?}:\n{text}"))
}

#[test]
fn prompt_has_identity_bootstrap_memory_and_skills_in_order_and_history_apart() {
    let ws = full_workspace("prompt-order");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let prompt = builder.system_prompt("cli");
    let order = [
        "# oxibot",
        "## AGENTS.md\n\nagents rules",
        "## SOUL.md\n\nsoul text",
        "## USER.md\n\nuser profile",
        "## TOOLS.md\n\ntool notes",
        "# Memory\n\n# Long-term Memory\n\n- The user's cat is called Luna.",
        "# Active Skills\n\n## Skill: house\n\nHOUSE RULES",
        "# Skills\n\n",
    ];
    let offsets: Vec<usize> = order.iter().map(|needle| position(&prompt, needle)).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "sections out of order: {offsets:?}");
    assert!(prompt.contains("\n\n---\n\n"), "sections are separated by a rule");
    assert!(!prompt.contains("name: house"), "frontmatter of the always-on skill leaked");
    assert!(!prompt.contains("Recent History"), "what changes between conversations stays out of the system prompt");
    let history = builder.recent_history().expect("a recent history");
    assert!(history.starts_with("# Recent History\n\n") && history.contains("- [2026-04-15 14:58] Talked about cats"));
}

#[test]
fn summary_lists_each_other_skill_with_its_path_and_availability() {
    let ws = full_workspace("prompt-summary");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let prompt = builder.system_prompt("cli");
    assert!(prompt.contains("Yours, in `skills/<name>/`:\n- notes: Keep notes tidy."), "{prompt}");
    builder.set_builtin_tools(vec!["cron".into()]);
    let prompt = builder.system_prompt("cli");
    assert!(prompt.contains("Built-in, in `.oxibot/skills/<name>/`:\n- cron: "), "{prompt}");
    assert!(ws.path().join(".oxibot/skills/cron/SKILL.md").is_file(), "built-in skills are copied into the workspace");
    let summary = &prompt[position(&prompt, "# Skills\n\n")..];
    assert!(!summary.contains("- house:"), "the always-on skill is not repeated in the summary");
    for skill in builder.skills().iter().filter(|s| !s.available) {
        let line = summary.lines().find(|l| l.starts_with(&format!("- {}: ", skill.name))).expect("listed");
        assert!(line.contains(&format!("(needs {})", skill.missing.join(", "))), "{line}");
    }
}

#[test]
fn missing_files_leave_their_sections_out() {
    let ws = TempDir::new("prompt-bare");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let prompt = builder.system_prompt("telegram");
    for absent in ["## AGENTS.md", "## SOUL.md", "---\n\n# Memory\n", "---\n\n# Recent History"] {
        assert!(!prompt.contains(absent), "unexpected {absent:?}");
    }
    assert!(!prompt.contains("# Active Skills") && prompt.contains("# Skills\n"));
}

#[test]
fn untouched_templates_send_only_the_soul() {
    let ws = TempDir::new("prompt-template-memory");
    write_missing_templates(ws.path()).expect("templates");
    let prompt = ContextBuilder::new(ws.path().to_path_buf()).system_prompt("cli");
    assert!(prompt.contains("## SOUL.md\n\n# Soul\n\nI am oxibot"), "{prompt}");
    for absent in ["# Memory\n", "## AGENTS.md", "## USER.md", "## TOOLS.md", "## HEARTBEAT.md", "<!--", "- Name:"] {
        assert!(!prompt.contains(absent), "{absent:?} reached the prompt:\n{prompt}");
    }
}

#[test]
fn a_filled_profile_line_reaches_the_prompt_and_the_unfilled_ones_do_not() {
    let ws = TempDir::new("prompt-template-user");
    write_missing_templates(ws.path()).expect("templates");
    let user = std::fs::read_to_string(ws.path().join("USER.md")).expect("read");
    ws.write("USER.md", &user.replace("- Name:", "- Name: Sam"));
    let prompt = ContextBuilder::new(ws.path().to_path_buf()).system_prompt("cli");
    assert!(prompt.contains("## USER.md\n\n# User\n\n## Basics\n\n- Name: Sam\n\n---"), "{prompt}");
    assert!(!prompt.contains("- Timezone:") && !prompt.contains("## Preferences"), "{prompt}");
}

#[test]
fn system_prompt_holds_no_clock() {
    let ws = full_workspace("prompt-clock");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let first = builder.system_prompt("cli");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = builder.system_prompt("cli");
    assert_eq!(first, second);
    for day in [Utc::now(), Utc::now() - Duration::days(1), Utc::now() + Duration::days(1)] {
        let date = day.format("%Y-%m-%d").to_string();
        assert!(!first.contains(&date), "system prompt contains the date {date}");
    }
}

#[test]
fn unchanged_files_are_not_read_again_and_changed_ones_are() {
    let ws = full_workspace("prompt-cache");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let first = builder.system_prompt("cli");
    let reads = builder.file_reads();
    assert!(reads >= 6, "only {reads} reads for a full workspace");
    assert_eq!(builder.system_prompt("cli"), first);
    assert_eq!(builder.file_reads(), reads, "unchanged files were read again");

    ws.write("SOUL.md", "a different soul, longer than before\n");
    let changed = builder.system_prompt("cli");
    assert_eq!(builder.file_reads(), reads + 1, "exactly the changed file is read");
    assert!(changed.contains("## SOUL.md\n\na different soul, longer than before"));
}

#[test]
fn a_workspace_skill_overrides_the_builtin_in_the_prompt() {
    let ws = TempDir::new("prompt-override");
    ws.write(
        "skills/memory/SKILL.md",
        "---\nname: memory\ndescription: My memory rules.\nalways: true\n---\nMY MEMORY RULES\n",
    );
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let prompt = builder.system_prompt("cli");
    assert!(prompt.contains("## Skill: memory\n\nMY MEMORY RULES"));
    assert!(!prompt.contains("A background process called **Dream**"), "the built-in body is still there");
    let memory = builder.skills().into_iter().find(|s| s.name == "memory").expect("memory skill");
    assert_eq!(memory.source, SkillSource::Workspace);
    assert_eq!(memory.path, ws.path().join("skills/memory/SKILL.md"));
}

#[test]
fn recent_history_respects_the_dream_cursor_and_the_caps() {
    let ws = TempDir::new("prompt-history");
    let lines: Vec<String> = (1..=120)
        .map(|n| {
            serde_json::json!({"cursor": n, "timestamp": "2026-04-15 10:00", "content": format!("entry {n}")})
                .to_string()
        })
        .collect();
    ws.write("memory/history.jsonl", &lines.join("\n"));
    ws.write("memory/.dream_cursor", "100");
    let section = ContextBuilder::new(ws.path().to_path_buf()).recent_history().expect("a section");
    assert_eq!(section.matches("\n- [2026-04-15 10:00] entry ").count(), 20);
    assert!(!section.contains("entry 100\n") && section.contains("entry 101\n") && section.ends_with("entry 120"));

    ws.write("memory/.dream_cursor", "0");
    let section = ContextBuilder::new(ws.path().to_path_buf()).recent_history().expect("a section");
    assert_eq!(section.matches("\n- [").count(), MAX_HISTORY_ENTRIES);
    assert!(section.len() < MAX_HISTORY_CHARS + 400);
}

#[test]
fn runtime_block_merges_into_the_user_text_and_strips_off_again() {
    let now = Utc::now();
    let runtime = ContextBuilder::runtime_context("discord", "42", Some("America/New_York"), now);
    assert!(runtime.starts_with(RUNTIME_OPEN) && runtime.ends_with(RUNTIME_CLOSE));
    let local = now.with_timezone(&chrono_tz::America::New_York).format("%Y-%m-%d %H:%M").to_string();
    assert!(runtime.contains(&format!("Current Time: {local}")), "{runtime}");
    assert!(runtime.contains("Channel: discord\nChat ID: 42"));
    let merged = ContextBuilder::merge_runtime("hi there", &runtime);
    assert!(merged.ends_with("\n\nhi there"));
    assert_eq!(ContextBuilder::strip_runtime(&merged), "hi there");
}

#[test]
fn a_relative_or_tilde_workspace_becomes_absolute() {
    let builder = ContextBuilder::new(std::path::PathBuf::from("some/relative/ws"));
    assert!(builder.workspace().is_absolute());
    let ws = TempDir::new("prompt-abs");
    assert_eq!(ContextBuilder::new(ws.path().to_path_buf()).workspace(), ws.path());
}

#[test]
fn a_skill_is_listed_only_where_the_built_in_tool_it_needs_is_offered() {
    let ws = TempDir::new("ctx-builtins");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let without = builder.system_prompt("cli");
    assert!(!without.contains("- cron:"), "a skill whose tool is not offered is left out: {without}");
    assert!(builder.skills().iter().any(|s| s.name == "cron" && s.missing == ["tool: cron"]));

    builder.set_builtin_tools(vec!["spawn".into(), "cron".into()]);
    let with = builder.system_prompt("cli");
    assert!(with.contains("- cron: ") && !with.contains("needs tool: cron"), "{with}");
}

#[test]
fn every_change_the_prompt_reads_shows_in_the_next_prompt_though_unchanged_prompts_are_reused() {
    let ws = full_workspace("prompt-reuse");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let first = builder.system_prompt("cli");
    assert_eq!(builder.system_prompt("cli"), first);
    assert_eq!(builder.system_prompt("cli"), first);

    ws.write("skills/notes/SKILL.md", "---\nname: notes\ndescription: Keep notes short.\n---\nNotes body.\n");
    assert!(builder.system_prompt("cli").contains("Keep notes short."), "an edited skill");
    ws.write("skills/plans/SKILL.md", "---\nname: plans\ndescription: Plan the week.\n---\nPlans body.\n");
    assert!(builder.system_prompt("cli").contains("Plan the week."), "a new skill");
    ws.write("memory/MEMORY.md", "- The user's dog is called Rex.\n");
    assert!(builder.system_prompt("cli").contains("Rex"), "an edited memory");
    std::fs::remove_file(ws.path().join("TOOLS.md")).expect("remove");
    assert!(!builder.system_prompt("cli").contains("## TOOLS.md"), "a removed bootstrap file");
    std::fs::remove_file(builtin_path(ws.path(), "weather")).expect("remove");
    builder.system_prompt("cli");
    assert!(builtin_path(ws.path(), "weather").exists(), "a removed built-in copy is written again");
}

#[test]
fn a_prompt_built_once_sets_no_watch_and_the_second_build_starts_watching() {
    let ws = full_workspace("prompt-watch-late");
    let mut builder = ContextBuilder::new(ws.path().to_path_buf());
    let first = builder.system_prompt("cli");
    assert!(!builder.freshness.is_watching(), "a one-shot run's only build set watches");
    assert_eq!(builder.system_prompt("cli"), first);
    assert!(builder.freshness.is_watching(), "a second build watches for the third");
    ws.write("memory/MEMORY.md", "- Prefers tea.\n");
    assert!(builder.system_prompt("cli").contains("Prefers tea."), "an edit after the watch started");
}
