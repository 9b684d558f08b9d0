//! What a skill needs to run — programs on `PATH`, environment variables, an operating system —
//! read from its frontmatter, and which of those needs this machine does not meet.
//!
//! nanobot puts them in a JSON `metadata` field under a namespace key:
//! `metadata: {"nanobot":{"requires":{"bins":["gh"],"env":["GITHUB_TOKEN"]},"always":true}}`.
//! The namespaces `oxibot`, `nanobot` and `openclaw` are accepted, in that order of preference;
//! a top-level `requires` field is accepted too.

use std::path::Path;

use serde_json::Value;

use super::frontmatter::Frontmatter;

/// Namespaces of the `metadata` object that may hold oxibot's settings, most preferred first.
const NAMESPACES: &[&str] = &["oxibot", "nanobot", "openclaw"];

/// The settings a skill's frontmatter gives under `metadata` (and `requires`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SkillMeta {
    /// Programs that must be found on `PATH`.
    pub(crate) bins: Vec<String>,
    /// Environment variables that must be set and non-empty.
    pub(crate) env: Vec<String>,
    /// Operating systems the skill supports (`linux`, `darwin`, `windows`); empty means any.
    pub(crate) os: Vec<String>,
    /// Whether `metadata` asks for the skill to be always loaded.
    pub(crate) always: bool,
    /// Kernel built-in tools (`cron`, `spawn`, `message`) that must be offered where the
    /// skill is used (an oxibot addition: `requires.tools`).
    pub(crate) tools: Vec<String>,
}

impl SkillMeta {
    /// Reads the settings from a parsed frontmatter.
    pub(crate) fn from_frontmatter(front: &Frontmatter) -> SkillMeta {
        let inner = front
            .get("metadata")
            .map(json_object)
            .and_then(|metadata| NAMESPACES.iter().find_map(|ns| metadata.get(*ns).filter(|v| v.is_object()).cloned()));
        let inner = inner.unwrap_or(Value::Null);
        let requires = inner.get("requires").cloned().or_else(|| front.get("requires").map(json_object));
        let requires = requires.unwrap_or(Value::Null);
        SkillMeta {
            bins: strings(requires.get("bins")),
            env: strings(requires.get("env")),
            os: strings(inner.get("os")).into_iter().map(|os| os.to_ascii_lowercase()).collect(),
            always: inner.get("always").and_then(Value::as_bool).unwrap_or(false),
            tools: strings(requires.get("tools")),
        }
    }

    /// The needs this machine does not meet, e.g. `bin: gh`, `env: GITHUB_TOKEN`.
    pub(crate) fn missing(&self) -> Vec<String> {
        let bins = self.bins.iter().filter(|bin| !on_path(bin)).map(|bin| format!("bin: {bin}"));
        let env = self.env.iter().filter(|var| !env_is_set(var)).map(|var| format!("env: {var}"));
        let mut missing: Vec<String> = bins.chain(env).collect();
        let current = current_os();
        if !self.os.is_empty() && !self.os.iter().any(|os| os == current) {
            missing.push(format!("os: {} (this is {current})", self.os.join(" or ")));
        }
        missing
    }
}

/// A value that may be a JSON object written as a string (as some tools emit it) as a value.
fn json_object(value: &Value) -> Value {
    match value {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

/// A list of strings, or one string, as a list; anything else as an empty list.
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// This machine's operating system in the names skills use.
fn current_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Whether environment variable `name` is set to something non-empty.
fn env_is_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|value| !value.is_empty())
}

/// Whether `bin` names an executable file: a path as given, or a name found on `PATH`.
pub(crate) fn on_path(bin: &str) -> bool {
    if bin.contains(std::path::MAIN_SEPARATOR) {
        return is_executable(Path::new(bin));
    }
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        let candidate = dir.join(bin);
        is_executable(&candidate) || (cfg!(windows) && is_executable(&candidate.with_extension("exe")))
    })
}

/// Whether `path` is a regular file that may be executed.
fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::frontmatter;

    fn meta(text: &str) -> SkillMeta {
        let (front, _) = frontmatter::split(text);
        SkillMeta::from_frontmatter(&front.expect("frontmatter"))
    }

    #[test]
    fn requirements_are_read_from_any_accepted_namespace() {
        for ns in ["oxibot", "nanobot", "openclaw"] {
            let text = format!(
                "---\nmetadata: {{\"{ns}\":{{\"requires\":{{\"bins\":[\"gh\"],\"env\":[\"T\"]}},\"always\":true}}}}\n---\n"
            );
            let m = meta(&text);
            assert_eq!(m.bins, ["gh"], "{ns}");
            assert_eq!(m.env, ["T"], "{ns}");
            assert!(m.always, "{ns}");
        }
    }

    #[test]
    fn oxibot_namespace_wins_over_nanobot() {
        let m = meta(
            "---\nmetadata: {\"nanobot\":{\"requires\":{\"bins\":[\"a\"]}},\"oxibot\":{\"requires\":{\"bins\":[\"b\"]}}}\n---\n",
        );
        assert_eq!(m.bins, ["b"]);
    }

    #[test]
    fn a_top_level_requires_field_is_accepted() {
        let m = meta("---\nrequires: {\"bins\": [\"grep\"]}\n---\n");
        assert_eq!(m.bins, ["grep"]);
    }

    #[test]
    fn missing_programs_variables_and_systems_are_named() {
        let m = SkillMeta {
            bins: vec!["sh".into(), "oxibot-no-such-program".into()],
            env: vec!["PATH".into(), "OXIBOT_SURELY_UNSET_VAR".into()],
            os: vec!["plan9".into()],
            always: false,
            tools: Vec::new(),
        };
        let missing = m.missing();
        assert_eq!(missing[0], "bin: oxibot-no-such-program");
        assert_eq!(missing[1], "env: OXIBOT_SURELY_UNSET_VAR");
        assert!(missing[2].starts_with("os: plan9"), "{missing:?}");
        assert_eq!(missing.len(), 3);
    }
}
