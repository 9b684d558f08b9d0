//! What a plugin may register: tool names that belong to the kernel or a bundled plugin
//! ([`ReservedNames`]), and the size caps on a tool's description and schema
//! ([`check_size`]). The registry applies both before any clash by precedence.

use std::collections::BTreeMap;

use oxibot_proto::ToolSpec;

/// The tools of the bundled tool plugins, by plugin. A plugin that is not bundled may offer
/// one of these names only when its `plugins` entry lists it in `replaces`, so a config entry
/// or a dropped-in file cannot take `exec` or `read_file` from the sandboxed plugins by
/// accident (known before the bundled plugins finish starting, so there is no window in which
/// another plugin holds the name). A test checks the list against what the plugins announce.
pub const BUNDLED_TOOLS: &[(&str, &[&str])] = &[
    ("fs", &["read_file", "write_file", "edit_file", "list_dir", "glob", "grep"]),
    ("shell", &["exec"]),
    ("web", &["web_fetch", "web_search"]),
];

/// The channels the `oxibot` executable can have built in (`oxibot __channel <name>`); a
/// packager may leave some out (the kernel's `channel-<name>` features).
pub const BUNDLED_CHANNELS: &[&str] = &[
    "a2a",
    "api",
    "dingtalk",
    "discord",
    "email",
    "feishu",
    "loopback",
    "matrix",
    "mattermost",
    "qq",
    "signal",
    "slack",
    "telegram",
    "websocket",
    "wecom",
];

/// Longest tool description accepted, in bytes: every request carries it.
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Longest parameter schema accepted, in bytes of its JSON text.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// Tool names no plugin takes without saying so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedNames {
    /// The kernel's built-in tools (`message`, `spawn`, `cron`, `memory`): the kernel answers
    /// these itself, so a plugin's tool of the same name would never run; it is refused.
    pub builtins: Vec<String>,
    /// Tool name → the bundled plugin that has it (see [`BUNDLED_TOOLS`]).
    pub bundled: BTreeMap<String, String>,
}

impl Default for ReservedNames {
    /// The bundled plugins' tools; no built-ins (the binary adds those it has).
    fn default() -> Self {
        let bundled = BUNDLED_TOOLS
            .iter()
            .flat_map(|(plugin, tools)| tools.iter().map(|tool| ((*tool).to_owned(), (*plugin).to_owned())))
            .collect();
        ReservedNames { builtins: Vec::new(), bundled }
    }
}

/// Who is claiming a tool name.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// Discovery precedence (lower wins a clash between plugins of the same standing).
    pub index: usize,
    /// Whether the plugin is a bundled one.
    pub bundled: bool,
    /// Bundled tool names its config entry says it replaces.
    pub replaces: &'a [String],
}

impl Claimant<'_> {
    /// Whether this plugin holds `tool` with a bundled plugin's standing: it is bundled, or
    /// its entry says it replaces the tool.
    pub fn protected(&self, tool: &str) -> bool {
        self.bundled || self.replaces.iter().any(|name| name == tool)
    }
}

impl ReservedNames {
    /// Why `claimant` may not offer `tool`, if the name is reserved against it.
    pub fn refusal(&self, claimant: &Claimant<'_>, tool: &str) -> Option<String> {
        if self.builtins.iter().any(|name| name == tool) {
            return Some(format!(
                "tool '{tool}' is a built-in tool of the kernel, which answers it itself; rename the plugin's tool"
            ));
        }
        let owner = self.bundled.get(tool)?;
        (!claimant.protected(tool)).then(|| bundled_refusal(tool, owner))
    }
}

/// Why a plugin without `replaces` cannot take `tool` from the bundled plugin `owner`.
pub fn bundled_refusal(tool: &str, owner: &str) -> String {
    format!(
        "tool '{tool}' belongs to the bundled plugin '{owner}'; a `plugins` entry takes it over only with \"replaces\": [\"{tool}\"], else rename the plugin's tool"
    )
}

/// Why `tool` is too big to offer, if it is: every request carries its description and
/// schema, so one plugin could otherwise make every turn slow and costly.
pub fn check_size(tool: &ToolSpec) -> Option<String> {
    let description = tool.description.len();
    if description > MAX_DESCRIPTION_BYTES {
        return Some(format!(
            "tool '{}' has a description of {description} bytes, more than the {MAX_DESCRIPTION_BYTES} allowed; shorten it",
            tool.name
        ));
    }
    let schema = serde_json::to_string(&tool.parameters).map_or(0, |text| text.len());
    if schema > MAX_SCHEMA_BYTES {
        return Some(format!(
            "tool '{}' has a parameter schema of {schema} bytes, more than the {MAX_SCHEMA_BYTES} allowed; simplify it",
            tool.name
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, description: &str, parameters: serde_json::Value) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        }
    }

    fn claimant<'a>(bundled: bool, replaces: &'a [String]) -> Claimant<'a> {
        Claimant { plugin: "p", index: 0, bundled, replaces }
    }

    #[test]
    fn a_bundled_name_is_refused_unless_the_entry_replaces_it() {
        let reserved = ReservedNames::default();
        let refusal = reserved.refusal(&claimant(false, &[]), "exec").unwrap();
        assert!(
            refusal.contains("bundled plugin 'shell'") && refusal.contains("\"replaces\": [\"exec\"]"),
            "{refusal}"
        );
        assert_eq!(reserved.refusal(&claimant(false, &["exec".to_owned()]), "exec"), None);
        assert_eq!(reserved.refusal(&claimant(true, &[]), "read_file"), None);
        assert_eq!(reserved.refusal(&claimant(false, &[]), "weather"), None);
    }

    #[test]
    fn a_built_in_name_is_refused_even_with_replaces() {
        let reserved = ReservedNames { builtins: vec!["cron".to_owned()], ..ReservedNames::default() };
        let refusal = reserved.refusal(&claimant(false, &["cron".to_owned()]), "cron").unwrap();
        assert!(refusal.contains("built-in"), "{refusal}");
    }

    #[test]
    fn descriptions_and_schemas_over_their_caps_are_refused() {
        assert_eq!(check_size(&spec("ok", &"d".repeat(MAX_DESCRIPTION_BYTES), json!({}))), None);
        let long = check_size(&spec("long", &"d".repeat(200_000), json!({}))).unwrap();
        assert!(long.contains("200000 bytes") && long.contains("4096"), "{long}");
        let big = json!({"type": "object", "description": "s".repeat(MAX_SCHEMA_BYTES)});
        let schema = check_size(&spec("big", "fine", big)).unwrap();
        assert!(schema.contains("parameter schema") && schema.contains("16384"), "{schema}");
    }
}
