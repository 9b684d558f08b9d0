//! Replies that never reached their chat: noted in the session's metadata (`undelivered`) when
//! the gateway gives one up, and told to the model once, inside the runtime block of the
//! session's next turn, so it knows the user did not see them.

use serde_json::{Map, Value, json};

/// Metadata key of the list of replies given up.
pub const UNDELIVERED_KEY: &str = "undelivered";
/// Key of an entry saying whether a turn has told the model about it.
const REPORTED_KEY: &str = "reported";
/// Characters of a reply kept in its note.
const KEPT_CHARS: usize = 500;
/// Characters of a reply quoted to the model.
const QUOTED_CHARS: usize = 120;

/// Adds a note that `content` could not be delivered (`error`), not yet told to the model.
pub fn note(metadata: &mut Map<String, Value>, at: &str, content: &str, error: &str) {
    let entry = json!({
        "at": at,
        "error": error,
        "content": content.chars().take(KEPT_CHARS).collect::<String>(),
        REPORTED_KEY: false,
    });
    match metadata.entry(UNDELIVERED_KEY).or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(list) => list.push(entry),
        other => *other = Value::Array(vec![entry]),
    }
}

/// The notes no turn has told the model about yet, as lines for the runtime block; each is
/// marked told. Empty when there are none (and then nothing changed).
pub fn take_unreported(metadata: &mut Map<String, Value>) -> Vec<String> {
    let Some(Value::Array(list)) = metadata.get_mut(UNDELIVERED_KEY) else { return Vec::new() };
    let mut lines = Vec::new();
    for entry in list.iter_mut().filter(|e| e.get(REPORTED_KEY) == Some(&Value::Bool(false))) {
        let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let content = text("content");
        let mut quoted: String = content.chars().take(QUOTED_CHARS).collect();
        if content.chars().count() > QUOTED_CHARS {
            quoted.push('…');
        }
        lines.push(format!(
            "Not delivered: your message \"{quoted}\" ({}) never reached this chat: {}. The user has not seen it.",
            text("at"),
            text("error"),
        ));
        entry[REPORTED_KEY] = Value::Bool(true);
    }
    lines
}

/// `recalled` (auto-recall's lines for the runtime block) with the `notes` in front.
pub fn with_notes(notes: &[String], recalled: Option<String>) -> Option<String> {
    if notes.is_empty() {
        return recalled;
    }
    let mut lines = notes.join("\n");
    if let Some(recalled) = recalled {
        lines.push('\n');
        lines.push_str(&recalled);
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_told_to_the_model_once() {
        let mut metadata = Map::new();
        note(&mut metadata, "2026-11-27T10:00:00", "The build is green.", "no request is waiting");
        let lines = take_unreported(&mut metadata);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("The build is green.") && lines[0].contains("no request is waiting"), "{lines:?}");
        assert!(take_unreported(&mut metadata).is_empty(), "told once");
        assert_eq!(metadata[UNDELIVERED_KEY].as_array().map(Vec::len), Some(1), "the note itself stays");
    }

    #[test]
    fn notes_written_before_they_were_told_are_not_told_now() {
        let mut metadata = Map::new();
        metadata.insert(UNDELIVERED_KEY.into(), json!([{"at": "x", "error": "e", "content": "old"}]));
        assert!(take_unreported(&mut metadata).is_empty());
    }

    #[test]
    fn notes_come_before_recalled_memory() {
        let notes = vec!["Not delivered: a".to_owned()];
        assert_eq!(with_notes(&notes, Some("recalled".into())).as_deref(), Some("Not delivered: a\nrecalled"));
        assert_eq!(with_notes(&[], Some("recalled".into())).as_deref(), Some("recalled"));
        assert_eq!(with_notes(&[], None), None);
    }
}
