//! Turning an MCP `CallToolResult` (as JSON) into the text the model reads.
//!
//! Text blocks are joined with newlines; images and audio are described by type and size
//! (the model cannot see base64); embedded resources are rendered as their text (or described
//! when binary); resource links name their URI. With no content, structured content is shown
//! as JSON.

use serde_json::Value;

/// The text of a result's content.
pub fn render(result: &Value) -> String {
    let blocks: Vec<String> = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().map(render_block).collect(),
        _ => Vec::new(),
    };
    if blocks.is_empty() {
        return match result.get("structuredContent") {
            Some(structured) if !structured.is_null() => structured.to_string(),
            _ => "(no output)".to_owned(),
        };
    }
    blocks.join("\n")
}

/// Whether the server flagged the result as a tool error.
pub fn is_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool).unwrap_or(false)
}

fn render_block(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_owned(),
        kind @ ("image" | "audio") => {
            format!("[{kind}: {}, {} bytes]", or_unknown(field("mimeType")), decoded_len(field("data")))
        }
        "resource" => render_resource(block.get("resource").unwrap_or(&Value::Null)),
        "resource_link" => format!("[resource link: {} ({})]", field("uri"), or_unknown(field("mimeType"))),
        other => format!("[unsupported content type: {}]", or_unknown(other)),
    }
}

fn render_resource(resource: &Value) -> String {
    let field = |key: &str| resource.get(key).and_then(Value::as_str);
    let uri = field("uri").unwrap_or_default();
    match (field("text"), field("blob")) {
        (Some(text), _) => format!("[resource: {uri}]\n{text}"),
        (None, Some(blob)) => {
            format!(
                "[resource: {uri}, {}, {} bytes]",
                or_unknown(field("mimeType").unwrap_or_default()),
                decoded_len(blob)
            )
        }
        (None, None) => format!("[resource: {uri}]"),
    }
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() { "unknown type" } else { text }
}

/// The size of the bytes base64 text `data` encodes.
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_blocks_are_joined_with_newlines() {
        let result = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(render(&result), "a\nb");
        assert!(!is_error(&result));
    }

    #[test]
    fn images_are_described_by_type_and_size() {
        let result = json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]});
        assert_eq!(render(&result), "[image: image/png, 5 bytes]");
    }

    #[test]
    fn resources_are_rendered_as_their_text() {
        let result = json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "hi"}}]});
        assert_eq!(render(&result), "[resource: file:///a]\nhi");
    }

    #[test]
    fn structured_content_shows_when_there_is_no_content() {
        assert_eq!(render(&json!({"content": [], "structuredContent": {"x": 1}})), r#"{"x":1}"#);
        assert_eq!(render(&json!({"content": []})), "(no output)");
    }

    #[test]
    fn an_error_flag_is_read() {
        assert!(is_error(&json!({"content": [], "isError": true})));
    }

    #[test]
    fn base64_sizes_account_for_padding() {
        assert_eq!(decoded_len(""), 0);
        assert_eq!(decoded_len("aGk="), 2);
        assert_eq!(decoded_len("aGVs"), 3);
        assert_eq!(decoded_len("aGk"), 2);
    }
}
