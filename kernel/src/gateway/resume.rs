//! Finding the sessions a crash left with messages unanswered: those the session store says
//! may hold one (an open inbox, or an older file ending with a user message), of the
//! gateway's enabled channels.

use crate::session::{SessionKey, SessionStorage};

/// Sessions of `channels` that may hold a message accepted and never answered.
pub fn unanswered(store: &dyn SessionStorage, channels: &[&str]) -> Vec<SessionKey> {
    store
        .unanswered()
        .iter()
        .filter_map(|key| SessionKey::parse(key))
        .filter(|key| channels.contains(&key.channel()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionStore;
    use crate::testing::TempDir;

    #[test]
    fn channel_sessions_with_an_open_inbox_or_ending_with_a_user_message_are_found() {
        let dir = TempDir::new("resume");
        let write = |name: &str, key: &str, metadata: &str, last: &str| {
            let header = format!("{{\"_type\": \"metadata\", \"key\": \"{key}\", \"metadata\": {metadata}}}");
            std::fs::write(
                dir.path().join(name),
                format!("{header}\n{{\"role\": \"user\", \"content\": \"a\"}}\n{last}\n"),
            )
            .unwrap();
        };
        let answer = r#"{"role": "assistant", "content": "done"}"#;
        write("a.jsonl", "telegram:1", "{}", r#"{"role": "user", "content": "b"}"#);
        write("b.jsonl", "telegram:2", "{}", answer);
        write("c.jsonl", "telegram:3", r#"{"inbox_open": true}"#, answer);
        write("d.jsonl", "cli:direct", "{}", r#"{"role": "user", "content": "c"}"#);
        let store = SessionStore::in_dir(dir.path());
        let mut found: Vec<String> = unanswered(&store, &["telegram"]).iter().map(|k| k.to_string()).collect();
        found.sort();
        assert_eq!(found, ["telegram:1", "telegram:3"]);
    }
}
