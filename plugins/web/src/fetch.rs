//! The `web_fetch` tool: its manifest entry, arguments and handler.

use oxibot_plugin::{Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::extract::{self, ExtractMode};
use crate::http::Fetcher;

/// Characters returned when the call does not say.
pub const DEFAULT_MAX_CHARS: usize = 50_000;
/// The fewest characters a call may ask for.
const MIN_MAX_CHARS: usize = 100;

/// What the model reads about the tool.
const DESCRIPTION: &str = "Fetch a public URL as text (HTML as Markdown, PDFs as text).";

/// The arguments of one call.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    /// The URL.
    url: String,
    /// Markdown or text.
    #[serde(default, alias = "extract_mode")]
    extract_mode: ExtractMode,
    /// The most characters to return.
    #[serde(default, alias = "max_chars")]
    max_chars: Option<usize>,
}

/// The `web_fetch` tool's manifest entry.
pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "extractMode": {"type": "string", "enum": ["markdown", "text"]},
            "maxChars": {"type": "integer"}
        },
        "required": ["url"]
    });
    Tool::new("web_fetch", DESCRIPTION, schema).read_only().timeout_secs(crate::TOOL_TIMEOUT_SECS)
}

/// Fetches the URL of `args` and renders it for the model.
pub async fn run(fetcher: &Fetcher, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let max_chars = args.max_chars.unwrap_or(DEFAULT_MAX_CHARS).max(MIN_MAX_CHARS);
    let fetched = fetcher.get(&args.url).await.map_err(ToolError::from)?;
    let url = fetched.url.clone();
    // Parsing a PDF (or a large page) is CPU work; it runs off the async threads.
    let mode = args.extract_mode;
    let extracted = tokio::task::spawn_blocking(move || extract::extract(&fetched, mode))
        .await
        .map_err(|e| ToolError::new(format!("reading the content of {url} failed: {e}")))?;
    let mut out = extract::untrusted_header(url.as_str());
    if crate::http::parse_url(&args.url).is_ok_and(|asked| asked != url) {
        out.push_str(&format!("\nRequested: {}", args.url.trim()));
    }
    if let Some(title) = &extracted.title {
        out.push_str(&format!("\nTitle: {title}"));
    }
    out.push_str("\n\n");
    out.push_str(&extract::truncate(&extracted.text, max_chars));
    Ok(out)
}
