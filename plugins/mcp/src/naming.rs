//! Tool names: `mcp_<server>_<tool>` within `^[a-zA-Z0-9_-]{1,64}$`, and the `enabledTools`
//! filter.

/// The longest tool name OpenAI-style function calling accepts.
pub const MAX_NAME_LEN: usize = 64;

/// The oxibot name of MCP tool `tool` of server `server`: `mcp_<server>_<tool>`, every other
/// character replaced by `_`, cut to 64 characters.
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp_{server}_{tool}");
    let clean: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    clean.chars().take(MAX_NAME_LEN).collect()
}

/// `server` with every character outside `[A-Za-z0-9_-]` replaced by `_`, as the kernel names
/// the bridge plugin (`mcp-<this>`).
pub fn plugin_suffix(server: &str) -> String {
    server.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// Whether `enabled_tools` lets MCP tool `tool` (oxibot name `name`) through: everything when
/// absent or holding `*`, else a tool listed by either name.
pub fn is_enabled(enabled_tools: Option<&[String]>, tool: &str, name: &str) -> bool {
    match enabled_tools {
        None => true,
        Some(list) => list.iter().any(|entry| entry == "*" || entry == tool || entry == name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitised() {
        assert_eq!(tool_name("files", "read"), "mcp_files_read");
        assert_eq!(tool_name("my.server", "get weather/now"), "mcp_my_server_get_weather_now");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn the_filter_accepts_either_name_or_a_star() {
        let list = vec!["read".to_owned(), "mcp_s_write".to_owned()];
        assert!(is_enabled(Some(&list), "read", "mcp_s_read"));
        assert!(is_enabled(Some(&list), "write", "mcp_s_write"));
        assert!(!is_enabled(Some(&list), "delete", "mcp_s_delete"));
        assert!(is_enabled(Some(&["*".to_owned()]), "delete", "mcp_s_delete"));
        assert!(is_enabled(None, "delete", "mcp_s_delete"));
        assert!(!is_enabled(Some(&[]), "delete", "mcp_s_delete"));
    }
}
