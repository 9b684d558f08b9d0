//! Escaping text for the markup chat services parse: `&`, `<` and `>` as entities, which is
//! what Telegram's HTML parse mode and Slack's mrkdwn both ask for.

/// `text` with `&`, `<` and `>` written as `&amp;`, `&lt;` and `&gt;`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    text.chars().for_each(|c| push_escaped(&mut out, c));
    out
}

/// Appends `c` to `out`, as an entity when it is `&`, `<` or `>`.
pub fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        _ => out.push(c),
    }
}

/// The character an entity written by [`escape`] (or `&quot;`) stands for; `None` for any
/// other text.
pub fn unescape_entity(entity: &str) -> Option<&'static str> {
    match entity {
        "&lt;" => Some("<"),
        "&gt;" => Some(">"),
        "&amp;" => Some("&"),
        "&quot;" => Some("\""),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ampersands_and_angle_brackets_become_entities_and_nothing_else_changes() {
        let cases = [
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("\"quotes\" and 'é' stay", "\"quotes\" and 'é' stay"),
        ];
        for (text, escaped) in cases {
            assert_eq!(escape(text), escaped);
        }
    }

    #[test]
    fn every_entity_escape_writes_reads_back_as_its_character() {
        for c in ['&', '<', '>'] {
            let mut out = String::new();
            push_escaped(&mut out, c);
            assert_eq!(unescape_entity(&out), Some(c.to_string().as_str()));
        }
        assert_eq!(unescape_entity("&quot;"), Some("\""));
        assert_eq!(unescape_entity("&nbsp;"), None);
    }
}
