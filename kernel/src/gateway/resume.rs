//! Finding messages a crash left unanswered: sessions of enabled channels whose file ends
//! with a user message. Only the first and last lines of each file are read.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::agent::session_actor::CHANNEL_METADATA_KEY;
use crate::session::SessionKey;

/// A session to resume: its key and the channel details of its last message.
#[derive(Debug, Clone, PartialEq)]
pub struct Unanswered {
    /// The session.
    pub key: SessionKey,
    /// The channel details stored with the message.
    pub metadata: Value,
}

/// Sessions in `sessions_dir` of the `channels` given whose last message is the user's.
pub fn unanswered(sessions_dir: &Path, channels: &[&str]) -> Vec<Unanswered> {
    let Ok(entries) = std::fs::read_dir(sessions_dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|path| inspect(&path).ok().flatten())
        .filter(|u| channels.contains(&u.key.channel()))
        .collect()
}

fn inspect(path: &Path) -> std::io::Result<Option<Unanswered>> {
    let mut file = File::open(path)?;
    let mut first = String::new();
    BufReader::new(&mut file).read_line(&mut first)?;
    let header: Value = serde_json::from_str(first.trim()).unwrap_or(Value::Null);
    let Some(key) = header.get("key").and_then(Value::as_str).and_then(SessionKey::parse) else { return Ok(None) };
    let last = last_line(&mut file)?;
    let message: Value = serde_json::from_str(last.trim()).unwrap_or(Value::Null);
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Ok(None);
    }
    let metadata = message.get(CHANNEL_METADATA_KEY).cloned().unwrap_or(Value::Null);
    Ok(Some(Unanswered { key, metadata }))
}

/// The file's last non-empty line (at most its last 1 MiB).
fn last_line(file: &mut File) -> std::io::Result<String> {
    let len = file.metadata()?.len();
    let start = len.saturating_sub(1 << 20);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TempDir;

    #[test]
    fn only_channel_sessions_ending_with_a_user_message_are_found() {
        let dir = TempDir::new("resume");
        let write = |name: &str, key: &str, last: &str| {
            let header = format!("{{\"_type\": \"metadata\", \"key\": \"{key}\"}}");
            std::fs::write(
                dir.path().join(name),
                format!("{header}\n{{\"role\": \"user\", \"content\": \"a\"}}\n{last}\n"),
            )
            .unwrap();
        };
        write(
            "telegram_1.jsonl",
            "telegram:1",
            r#"{"role": "user", "content": "b", "channel_metadata": {"message_id": 5}}"#,
        );
        write("telegram_2.jsonl", "telegram:2", r#"{"role": "assistant", "content": "done"}"#);
        write("cli_direct.jsonl", "cli:direct", r#"{"role": "user", "content": "c"}"#);
        let found = unanswered(dir.path(), &["telegram"]);
        assert_eq!(found, [Unanswered { key: "telegram:1".into(), metadata: serde_json::json!({"message_id": 5}) }]);
    }
}
