//! Turning an MCP `CallToolResult` (as JSON) into the text the model reads.
//!
//! Text blocks are joined with newlines. Images and audio are saved to the media directory
//! ([`MediaDir`]) and named by path, type and size (the model cannot see base64). Embedded
//! resources become their text: a text resource as it is, a blob of a textual type decoded, any
//! other blob saved like an image. Resource links name their URI. With no content, structured
//! content is shown as JSON.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value;

use crate::media::MediaDir;

/// Standard base64, padded or not (servers differ).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The text of a result's content; binary blocks are saved to `media` under names starting
/// with `tool`.
pub fn render(result: &Value, media: &MediaDir, tool: &str) -> String {
    let blocks: Vec<String> = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().map(|block| render_block(block, media, tool)).collect(),
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

fn render_block(block: &Value, media: &MediaDir, tool: &str) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_owned(),
        kind @ ("image" | "audio") => save(kind, field("data"), or_unknown(field("mimeType")), media, tool),
        "resource" => render_resource(block.get("resource").unwrap_or(&Value::Null), media, tool),
        "resource_link" => format!("[resource link: {} ({})]", field("uri"), or_unknown(field("mimeType"))),
        other => format!("[unsupported content type: {}]", or_unknown(other)),
    }
}

fn render_resource(resource: &Value, media: &MediaDir, tool: &str) -> String {
    let field = |key: &str| resource.get(key).and_then(Value::as_str);
    let uri = field("uri").unwrap_or_default();
    let mime = field("mimeType").unwrap_or_default();
    let heading = if mime.is_empty() { format!("[resource: {uri}]") } else { format!("[resource: {uri} ({mime})]") };
    match (field("text"), field("blob")) {
        (Some(text), _) => format!("{heading}\n{text}"),
        (None, Some(blob)) => match decode(blob) {
            Some(bytes) if is_textual(mime) && std::str::from_utf8(&bytes).is_ok() => {
                format!("{heading}\n{}", String::from_utf8_lossy(&bytes))
            }
            _ => format!("{heading}\n{}", save("resource", blob, or_unknown(mime), media, tool)),
        },
        (None, None) => heading,
    }
}

/// Saves base64 `data` of type `mime` and says where, or says why not.
fn save(kind: &str, data: &str, mime: &str, media: &MediaDir, tool: &str) -> String {
    let Some(bytes) = decode(data) else { return format!("[{kind}: {mime}; its data is not valid base64]") };
    let size = bytes.len();
    match media.save(tool, mime, &bytes) {
        Ok(path) => format!("[{kind} saved to {} ({mime}, {size} bytes)]", path.display()),
        Err(error) => {
            format!("[{kind}: {mime}, {size} bytes; could not be saved to {}: {error}]", media.path().display())
        }
    }
}

/// The bytes of base64 `data`, whitespace ignored.
fn decode(data: &str) -> Option<Vec<u8>> {
    let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    BASE64.decode(compact).ok()
}

/// Types whose bytes are text.
fn is_textual(mime: &str) -> bool {
    let mime = mime.split(';').next().unwrap_or_default().trim();
    mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(mime, "application/json" | "application/xml" | "application/javascript" | "application/yaml")
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() { "unknown type" } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A media dir unique to one test, removed when dropped.
    struct Scratch(MediaDir);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("oxibot-mcp-render-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Scratch(MediaDir::new(dir))
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.path());
        }
    }

    /// The path in a `… saved to PATH (…` reference.
    fn saved_path(text: &str) -> std::path::PathBuf {
        let start = text.find(" saved to ").unwrap() + " saved to ".len();
        let end = start + text[start..].find(" (").unwrap();
        std::path::PathBuf::from(&text[start..end])
    }

    #[test]
    fn text_blocks_are_joined_with_newlines() {
        let media = Scratch::new("text");
        let result = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(render(&result, &media.0, "t"), "a\nb");
        assert!(!is_error(&result));
    }

    #[test]
    fn an_image_is_saved_and_named_by_path_type_and_size() {
        let media = Scratch::new("image");
        let result = json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]});
        let text = render(&result, &media.0, "mcp_s_shot");
        assert!(text.starts_with("[image saved to ") && text.ends_with(" (image/png, 5 bytes)]"), "{text}");
        let path = saved_path(&text);
        assert!(path.starts_with(media.0.path()) && path.extension().unwrap() == "png", "{}", path.display());
        assert_eq!(std::fs::read(path).unwrap(), b"hello");
    }

    #[test]
    fn an_image_that_cannot_be_saved_or_decoded_is_still_described() {
        let blocked = Scratch::new("blocked");
        std::fs::write(blocked.0.path(), "a file where the directory should be").unwrap();
        let result = json!({"content": [{"type": "image", "data": "aGk", "mimeType": "image/gif"}]});
        let text = render(&result, &blocked.0, "t");
        assert!(text.starts_with("[image: image/gif, 2 bytes; could not be saved to "), "{text}");
        let bad = json!({"content": [{"type": "audio", "data": "%%%", "mimeType": "audio/wav"}]});
        assert_eq!(render(&bad, &blocked.0, "t"), "[audio: audio/wav; its data is not valid base64]");
    }

    #[test]
    fn text_resources_and_textual_blobs_read_as_text_and_other_blobs_are_saved() {
        let media = Scratch::new("resource");
        let text = json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "hi"}}]});
        assert_eq!(render(&text, &media.0, "t"), "[resource: file:///a]\nhi");
        let blob = json!({"type": "resource", "resource": {"uri": "file:///b.json", "mimeType": "application/json", "blob": "eyJhIjoxfQ=="}});
        assert_eq!(
            render(&json!({"content": [blob]}), &media.0, "t"),
            "[resource: file:///b.json (application/json)]\n{\"a\":1}"
        );
        let binary = json!({"type": "resource", "resource": {"uri": "file:///c.pdf", "mimeType": "application/pdf", "blob": "JVBERg=="}});
        let out = render(&json!({"content": [binary]}), &media.0, "t");
        assert!(out.starts_with("[resource: file:///c.pdf (application/pdf)]\n[resource saved to "), "{out}");
        assert_eq!(std::fs::read(saved_path(&out)).unwrap(), b"%PDF");
    }

    #[test]
    fn structured_content_shows_when_there_is_no_content() {
        let media = Scratch::new("structured");
        assert_eq!(render(&json!({"content": [], "structuredContent": {"x": 1}}), &media.0, "t"), r#"{"x":1}"#);
        assert_eq!(render(&json!({"content": []}), &media.0, "t"), "(no output)");
    }

    #[test]
    fn an_error_flag_is_read() {
        assert!(is_error(&json!({"content": [], "isError": true})));
    }
}
