//! Standing approvals: "always" answers and `oxibot approvals grant`, kept in
//! `<data dir>/approvals.json` and read on every check (so a grant or revoke from another
//! process applies at once).
//!
//! A grant names a tool (or a tool pattern such as `mcp_github_*`) and, optionally, one
//! argument and a glob its value must match. An `exec` grant never covers a command with
//! shell syntax beyond one simple command (`;`, `&`, `|`, `$`, backticks, redirections,
//! newlines) unless the grant's pattern is that very command: a "safe command" pattern
//! checked on the text would otherwise let `git status; rm -rf ~` through.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::approval::glob_matches;
use crate::fsutil;

/// One standing approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingGrant {
    /// The tool, or a pattern of tool names.
    pub tool: String,
    /// The argument the pattern is about (`command`, `path`, …); none covers every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// A glob the argument's value must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The value must be the pattern itself, character for character ("always" for a call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
}

impl StandingGrant {
    /// The grant "always" gives for a call: `exec` for that exact command, the file tools for
    /// that exact path, `message` for that chat, any other tool whole.
    pub fn for_call(tool: &str, arguments: &Value) -> StandingGrant {
        let argument = match tool {
            "exec" => Some("command"),
            "write_file" | "edit_file" => Some("path"),
            "message" => Some("chat_id"),
            _ => None,
        };
        let pattern = argument.and_then(|name| arguments.get(name)).and_then(Value::as_str).map(str::to_owned);
        match pattern {
            Some(pattern) => StandingGrant {
                tool: tool.to_owned(),
                argument: argument.map(str::to_owned),
                pattern: Some(pattern),
                exact: true,
            },
            None => StandingGrant { tool: tool.to_owned(), argument: None, pattern: None, exact: false },
        }
    }

    /// Whether this grant covers `tool` called with `arguments`.
    pub fn covers(&self, tool: &str, arguments: &Value) -> bool {
        if !(self.tool == tool || (self.tool.contains('*') && glob_matches(&self.tool, tool))) {
            return false;
        }
        let (Some(argument), Some(pattern)) = (&self.argument, &self.pattern) else { return true };
        let Some(value) = arguments.get(argument).and_then(Value::as_str) else { return false };
        if self.exact || (tool == "exec" && argument == "command" && has_shell_syntax(value)) {
            return pattern == value;
        }
        glob_matches(pattern, value)
    }

    /// The grant in one line.
    pub fn describe(&self) -> String {
        match (&self.argument, &self.pattern) {
            (Some(argument), Some(pattern)) if self.exact => format!("{} {argument}=={pattern}", self.tool),
            (Some(argument), Some(pattern)) => format!("{} {argument}={pattern}", self.tool),
            _ => self.tool.clone(),
        }
    }
}

/// Whether `command` is more than one simple command to `sh`.
fn has_shell_syntax(command: &str) -> bool {
    command.chars().any(|c| matches!(c, ';' | '&' | '|' | '$' | '`' | '<' | '>' | '\n' | '(' | ')' | '\\'))
}

/// The file of standing approvals.
#[derive(Debug, Default, Serialize, Deserialize)]
struct GrantsFile {
    #[serde(default)]
    grants: Vec<StandingGrant>,
}

/// Why the standing approvals could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum StandingError {
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The standing approvals of one data dir.
#[derive(Debug, Clone)]
pub struct StandingGrants {
    /// `<data dir>/approvals.json`.
    path: PathBuf,
}

impl StandingGrants {
    /// The standing approvals kept in `data_dir`.
    pub fn in_data_dir(data_dir: &Path) -> StandingGrants {
        StandingGrants { path: data_dir.join("approvals.json") }
    }

    /// Every grant; an unreadable file grants nothing (and is logged).
    pub fn list(&self) -> Vec<StandingGrant> {
        match std::fs::read(&self.path) {
            Ok(bytes) => match serde_json::from_slice::<GrantsFile>(&bytes) {
                Ok(file) => file.grants,
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error, "standing approvals unreadable; none apply");
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        }
    }

    /// The first grant covering the call, described.
    pub fn covering(&self, tool: &str, arguments: &Value) -> Option<String> {
        self.list().into_iter().find(|grant| grant.covers(tool, arguments)).map(|grant| grant.describe())
    }

    /// Adds `grant` (once).
    pub fn add(&self, grant: StandingGrant) -> Result<(), StandingError> {
        let mut grants = self.list();
        if !grants.contains(&grant) {
            grants.push(grant);
        }
        self.save(grants)
    }

    /// Removes the grants whose one-line form is `described`; returns how many.
    pub fn revoke(&self, described: &str) -> Result<usize, StandingError> {
        let grants = self.list();
        let before = grants.len();
        let kept: Vec<StandingGrant> = grants.into_iter().filter(|grant| grant.describe() != described).collect();
        let removed = before - kept.len();
        self.save(kept)?;
        Ok(removed)
    }

    fn save(&self, grants: Vec<StandingGrant>) -> Result<(), StandingError> {
        let bytes = serde_json::to_vec_pretty(&GrantsFile { grants }).unwrap_or_default();
        fsutil::write_atomic(&self.path, &bytes)
            .map_err(|source| StandingError::Write { path: self.path.clone(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_exec_pattern_never_covers_a_command_with_more_behind_it() {
        let grant = StandingGrant {
            tool: "exec".into(),
            argument: Some("command".into()),
            pattern: Some("git status*".into()),
            exact: false,
        };
        assert!(grant.covers("exec", &json!({"command": "git status --short"})));
        assert!(!grant.covers("exec", &json!({"command": "git status; rm -rf ~"})));
        assert!(!grant.covers("exec", &json!({"command": "git status $(rm -rf ~)"})));
        assert!(!grant.covers("write_file", &json!({"command": "git status"})));
    }

    #[test]
    fn always_for_a_command_covers_that_command_only() {
        let grant = StandingGrant::for_call("exec", &json!({"command": "make test && echo ok"}));
        assert!(grant.covers("exec", &json!({"command": "make test && echo ok"})));
        assert!(!grant.covers("exec", &json!({"command": "make test && echo ok; id"})));
        let files = StandingGrant::for_call("write_file", &json!({"path": "notes/*.md"}));
        assert!(!files.covers("write_file", &json!({"path": "notes/a.md"})));
    }
}
