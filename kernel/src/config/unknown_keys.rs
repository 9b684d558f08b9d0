//! Keys of `config.json` that no version of the schema knows, most often typos (`"modle"`).
//! They are kept (nanobot's schema allows extra keys) and only reported, with the closest
//! known key. Only sections whose keys are all known here are checked: a channel's section
//! belongs to its plugin and is not.

use serde_json::Value;

/// The keys of each checked section, by its path (`*` stands for any name). Keys are
/// compared in camelCase, so `max_tokens` is `maxTokens`.
const SECTIONS: &[(&str, &[&str])] = &[
    ("", &["agents", "channels", "providers", "gateway", "tools", "plugins", "memory", "telemetry", "cluster"]),
    ("telemetry", &["otlpEndpoint", "includeContent"]),
    ("agents", &["defaults"]),
    (
        "agents.defaults",
        &[
            "workspace",
            "model",
            "provider",
            "maxTokens",
            "contextWindowTokens",
            "temperature",
            "maxToolIterations",
            "timezone",
            "fallbackModels",
            "maxConcurrentSubagents",
            "reasoningEffort",
            "dream",
            "pricing",
            "budgets",
            "subagentModel",
            "consolidationModel",
            "memoryWindow",
        ],
    ),
    ("providers.*", &["apiKey", "apiBase", "extraHeaders", "textToolCalls"]),
    ("gateway", &["host", "port", "token", "webUi", "heartbeat"]),
    ("tools", &["restrictToWorkspace", "mcpServers", "exec", "web", "a2a", "ssrfWhitelist", "approval"]),
    ("plugins.*", &["name", "command", "args", "env", "enabled", "allowPaths"]),
];

/// A key no checked section knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// Its dotted path, e.g. `agents.defaults.modle` (list items by index).
    pub path: String,
    /// The known key it is closest to, when one is close.
    pub suggestion: Option<&'static str>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown key {}", self.path)?;
        if let Some(known) = self.suggestion {
            write!(f, " (did you mean {known}?)")?;
        }
        Ok(())
    }
}

/// The unknown keys of a whole config document, in key order.
pub fn unknown_keys(document: &Value) -> Vec<UnknownKey> {
    let mut found = Vec::new();
    check(document, "", "", &mut found);
    found
}

/// Checks `value` at `path` (as written) whose schema section is `section` (with `*`).
fn check(value: &Value, path: &str, section: &str, found: &mut Vec<UnknownKey>) {
    let join = |base: &str, key: &str| if base.is_empty() { key.to_owned() } else { format!("{base}.{key}") };
    match value {
        Value::Object(map) => {
            let known = SECTIONS.iter().find(|(name, _)| *name == section).map(|(_, keys)| *keys);
            for (key, child) in map {
                let camel = camel_case(key);
                if let Some(known) = known
                    && !known.contains(&camel.as_str())
                {
                    found.push(UnknownKey { path: join(path, key), suggestion: closest(&camel, known) });
                    continue;
                }
                let child_section = join(section, &camel);
                let wildcard = join(section, "*");
                if is_checked(&child_section) {
                    check(child, &join(path, key), &child_section, found);
                } else if is_checked(&wildcard) {
                    check(child, &join(path, key), &wildcard, found);
                }
            }
        }
        Value::Array(items) => {
            let wildcard = join(section, "*");
            if is_checked(&wildcard) {
                for (index, item) in items.iter().enumerate() {
                    check(item, &join(path, &index.to_string()), &wildcard, found);
                }
            }
        }
        _ => {}
    }
}

/// Whether `section` or a section below it is checked.
fn is_checked(section: &str) -> bool {
    SECTIONS.iter().any(|(name, _)| *name == section || name.starts_with(&format!("{section}.")))
}

/// `max_tokens` → `maxTokens`; camelCase keys are left as they are.
fn camel_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The known key nearest to `key`, if it is near enough to be a likely typo.
fn closest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let key = key.to_lowercase();
    known
        .iter()
        .map(|candidate| (edit_distance(&key, &candidate.to_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Single-character insertions, deletions, substitutions and swaps of neighbours
/// (so `modle` is one step from `model`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths(document: Value) -> Vec<String> {
        unknown_keys(&document).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_typo_is_reported_with_the_key_it_is_closest_to() {
        assert_eq!(
            paths(json!({"agents": {"defaults": {"modle": "x", "max_tokens": 10}}})),
            ["unknown key agents.defaults.modle (did you mean model?)"]
        );
        assert_eq!(paths(json!({"gateway": {"prot": 1}})), ["unknown key gateway.prot (did you mean port?)"]);
    }

    #[test]
    fn a_key_far_from_every_known_one_is_reported_without_a_guess() {
        assert_eq!(paths(json!({"wallpaper": true})), ["unknown key wallpaper"]);
    }

    #[test]
    fn provider_and_plugin_entries_are_checked_but_channel_sections_are_not() {
        assert_eq!(
            paths(json!({
                "providers": {"openai": {"apiKye": "k"}},
                "plugins": [{"command": "x", "enabeld": false}],
                "channels": {"telegram": {"anything": 1}},
                "tools": {"exec": {"timeout": 60}}
            })),
            [
                "unknown key plugins.0.enabeld (did you mean enabled?)",
                "unknown key providers.openai.apiKye (did you mean apiKey?)"
            ]
        );
    }

    #[test]
    fn snake_case_spellings_of_known_keys_are_known() {
        assert!(paths(json!({"tools": {"restrict_to_workspace": true, "mcp_servers": {}}})).is_empty());
    }
}
