//! `tools.approval`: which tool calls run at once (`allow`), wait for a person's yes (`ask`) or
//! never run (`deny`), per tool name (a trailing `*` matches a prefix, as in `mcp_*`) and per
//! argument pattern. Parsed once with the config; a wrong value names its key.
//!
//! ```json
//! "approval": {
//!   "exec": "ask",
//!   "write_file": {"paths": {"notes/**": "allow"}, "default": "ask"},
//!   "message": {"otherChats": "ask"},
//!   "mcp_*": "ask",
//!   "timeoutSecs": 300,
//!   "terminal": "allow"
//! }
//! ```
//!
//! The defaults (no `approval` key) ask before `exec`, `cron` changes, a `message` to another
//! chat and every MCP tool, and allow the rest; in the terminal (`oxibot agent`), where the
//! person watches each call as it starts and can stop it, `ask` becomes `allow`
//! (`"terminal": "ask"` turns the prompt on there too).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// What the policy says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Run it.
    Allow,
    /// Run it only after a person said yes.
    Ask,
    /// Never run it.
    Deny,
}

impl Outcome {
    fn parse(value: &Value) -> Result<Outcome, String> {
        match value.as_str() {
            Some("allow") => Ok(Outcome::Allow),
            Some("ask") => Ok(Outcome::Ask),
            Some("deny") => Ok(Outcome::Deny),
            _ => Err(format!("expected \"allow\", \"ask\" or \"deny\", got {value}")),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Allow => "allow",
            Outcome::Ask => "ask",
            Outcome::Deny => "deny",
        })
    }
}

/// The rule of one tool (or tool pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    /// The outcome when no argument pattern matches.
    pub default: Outcome,
    /// Per argument name, glob patterns of its value and their outcome, first match wins
    /// (`paths` is read as the `path` argument).
    pub arguments: Vec<(String, Vec<(String, Outcome)>)>,
    /// The outcome for a call aimed at another chat than the turn's (`message`'s
    /// `otherChats`), when set.
    pub other_chats: Option<Outcome>,
}

impl ToolRule {
    /// A rule that says `outcome` for every call.
    pub fn always(outcome: Outcome) -> ToolRule {
        ToolRule { default: outcome, arguments: Vec::new(), other_chats: None }
    }

    fn parse(value: &Value) -> Result<ToolRule, (String, String)> {
        let Value::Object(fields) = value else {
            return Outcome::parse(value).map(ToolRule::always).map_err(|m| (String::new(), m));
        };
        let mut rule = ToolRule::always(Outcome::Allow);
        for (key, value) in fields {
            let at = |message: String| (key.clone(), message);
            match key.as_str() {
                "default" => rule.default = Outcome::parse(value).map_err(at)?,
                "otherChats" | "other_chats" => rule.other_chats = Some(Outcome::parse(value).map_err(at)?),
                argument => rule
                    .arguments
                    .push((argument_name(argument), patterns(value).map_err(|(k, m)| (format!("{key}.{k}"), m))?)),
            }
        }
        Ok(rule)
    }

    /// What this rule says about a call with `arguments`; `other_chat` is whether it is aimed
    /// at another chat than the turn's.
    pub fn decide(&self, arguments: &Value, other_chat: bool) -> Outcome {
        if other_chat && let Some(outcome) = self.other_chats {
            return outcome;
        }
        for (name, patterns) in &self.arguments {
            let Some(value) = arguments.get(name).and_then(Value::as_str) else { continue };
            if let Some((_, outcome)) = patterns.iter().find(|(pattern, _)| glob_matches(pattern, value)) {
                return *outcome;
            }
        }
        self.default
    }
}

/// `paths` names the `path` argument (the file tools' name for it).
fn argument_name(key: &str) -> String {
    if key == "paths" { "path".to_owned() } else { key.to_owned() }
}

fn patterns(value: &Value) -> Result<Vec<(String, Outcome)>, (String, String)> {
    let Value::Object(map) = value else {
        return Err((String::new(), format!("expected an object of patterns and outcomes, got {value}")));
    };
    map.iter()
        .map(|(pattern, outcome)| Ok((pattern.clone(), Outcome::parse(outcome).map_err(|m| (pattern.clone(), m))?)))
        .collect()
}

/// The whole `tools.approval` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Tool name or pattern (`mcp_*`) and its rule, in the order written; an exact name wins
    /// over a pattern.
    pub rules: Vec<(String, ToolRule)>,
    /// How long a call waits for a person's answer before it counts as denied.
    pub timeout_secs: u64,
    /// What `ask` means in the terminal (`oxibot agent`): `allow` (the default) or `ask`.
    pub terminal: Outcome,
    /// Whether the rules are the built-in defaults (no `tools.approval` in the config).
    pub is_default: bool,
}

/// How long a call waits for an answer unless `timeoutSecs` says otherwise.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

impl Default for ApprovalPolicy {
    fn default() -> Self {
        let ask = || ToolRule::always(Outcome::Ask);
        ApprovalPolicy {
            rules: vec![
                ("exec".to_owned(), ask()),
                ("cron".to_owned(), ask()),
                (
                    "message".to_owned(),
                    ToolRule { default: Outcome::Allow, arguments: Vec::new(), other_chats: Some(Outcome::Ask) },
                ),
                ("mcp_*".to_owned(), ask()),
            ],
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            terminal: Outcome::Allow,
            is_default: true,
        }
    }
}

impl ApprovalPolicy {
    /// Reads a `tools.approval` value; `Err((key, message))` names the key inside it.
    pub fn from_value(value: &Value) -> Result<ApprovalPolicy, (String, String)> {
        let Value::Object(fields) = value else {
            return Err((String::new(), format!("expected an object of tools and rules, got {value}")));
        };
        let mut policy = ApprovalPolicy {
            rules: Vec::new(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            terminal: Outcome::Allow,
            is_default: false,
        };
        for (key, value) in fields {
            match key.as_str() {
                "timeoutSecs" | "timeout_secs" => {
                    policy.timeout_secs = value
                        .as_u64()
                        .filter(|secs| *secs > 0)
                        .ok_or_else(|| (key.clone(), format!("expected a positive number of seconds, got {value}")))?;
                }
                "terminal" => {
                    policy.terminal = Outcome::parse(value).map_err(|m| (key.clone(), m))?;
                }
                tool => {
                    let rule = ToolRule::parse(value)
                        .map_err(|(k, m)| (if k.is_empty() { tool.to_owned() } else { format!("{tool}.{k}") }, m))?;
                    policy.rules.push((tool.to_owned(), rule));
                }
            }
        }
        Ok(policy)
    }

    /// The rule for `tool`: its own, else the first pattern that matches it, else allow.
    pub fn rule(&self, tool: &str) -> ToolRule {
        let exact = self.rules.iter().find(|(name, _)| name == tool);
        let pattern = || self.rules.iter().find(|(name, _)| name.contains('*') && glob_matches(name, tool));
        exact.or_else(pattern).map_or_else(|| ToolRule::always(Outcome::Allow), |(_, rule)| rule.clone())
    }

    /// One line per rule, as `oxibot status` and `oxibot approvals list` show them.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> =
            self.rules.iter().map(|(tool, rule)| format!("{tool}: {}", describe_rule(rule))).collect();
        lines.push("everything else: allow".to_owned());
        lines
    }
}

fn describe_rule(rule: &ToolRule) -> String {
    let mut parts = Vec::new();
    for (argument, patterns) in &rule.arguments {
        for (pattern, outcome) in patterns {
            parts.push(format!("{argument} {pattern} → {outcome}"));
        }
    }
    if let Some(outcome) = rule.other_chats {
        parts.push(format!("other chats → {outcome}"));
    }
    if parts.is_empty() {
        return rule.default.to_string();
    }
    parts.push(format!("otherwise {}", rule.default));
    parts.join(", ")
}

impl<'de> Deserialize<'de> for ApprovalPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        ApprovalPolicy::from_value(&value).map_err(|(key, message)| {
            let at = if key.is_empty() { String::new() } else { format!("`{key}`: ") };
            serde::de::Error::custom(format!("{at}{message}"))
        })
    }
}

/// Whether `text` matches the glob `pattern`: `*` matches any run of characters but `/`,
/// `**` any run at all, `?` one character but `/`; everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches_from(&pattern, &text)
}

fn matches_from(pattern: &[char], text: &[char]) -> bool {
    match pattern {
        [] => text.is_empty(),
        ['*', '*', rest @ ..] => (0..=text.len()).any(|skip| matches_from(rest, &text[skip..])),
        ['*', rest @ ..] => (0..=text.len())
            .take_while(|&skip| skip == 0 || text[skip - 1] != '/')
            .any(|skip| matches_from(rest, &text[skip..])),
        ['?', rest @ ..] => text.first().is_some_and(|c| *c != '/') && matches_from(rest, &text[1..]),
        [c, rest @ ..] => text.first() == Some(c) && matches_from(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_issue_example_reads_as_written() {
        let policy = ApprovalPolicy::from_value(&json!({
            "exec": "ask",
            "write_file": {"paths": {"notes/**": "allow"}, "default": "ask"},
            "message": {"otherChats": "ask"},
            "mcp_*": "ask"
        }))
        .unwrap();
        assert_eq!(policy.rule("exec").decide(&json!({"command": "ls"}), false), Outcome::Ask);
        let write = policy.rule("write_file");
        assert_eq!(write.decide(&json!({"path": "notes/a/b.md"}), false), Outcome::Allow);
        assert_eq!(write.decide(&json!({"path": "src/main.rs"}), false), Outcome::Ask);
        assert_eq!(policy.rule("message").decide(&json!({}), true), Outcome::Ask);
        assert_eq!(policy.rule("message").decide(&json!({}), false), Outcome::Allow);
        assert_eq!(policy.rule("mcp_github_create_issue").decide(&json!({}), false), Outcome::Ask);
        assert_eq!(policy.rule("read_file").decide(&json!({}), false), Outcome::Allow);
    }

    #[test]
    fn a_wrong_outcome_names_its_key() {
        let (key, message) =
            ApprovalPolicy::from_value(&json!({"write_file": {"paths": {"a/*": "maybe"}}})).unwrap_err();
        assert_eq!(key, "write_file.paths.a/*");
        assert!(message.contains("\"maybe\""), "{message}");
    }

    #[test]
    fn the_defaults_ask_before_exec_cron_other_chats_and_mcp() {
        let policy = ApprovalPolicy::default();
        assert_eq!(policy.rule("exec").default, Outcome::Ask);
        assert_eq!(policy.rule("cron").default, Outcome::Ask);
        assert_eq!(policy.rule("mcp_x_y").default, Outcome::Ask);
        assert_eq!(policy.rule("write_file").default, Outcome::Allow);
        assert_eq!(policy.terminal, Outcome::Allow);
    }

    #[test]
    fn globs_keep_single_stars_inside_one_directory() {
        assert!(glob_matches("notes/*", "notes/a.md"));
        assert!(!glob_matches("notes/*", "notes/a/b.md"));
        assert!(glob_matches("notes/**", "notes/a/b.md"));
        assert!(glob_matches("mcp_*", "mcp_server_tool"));
        assert!(!glob_matches("mcp_*", "exec"));
    }
}
