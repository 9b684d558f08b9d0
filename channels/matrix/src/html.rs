//! Markdown as models write it → the `formatted_body` of a Matrix message
//! (`org.matrix.custom.html`), through a CommonMark parser. HTML the model wrote is shown as
//! text, never passed on as markup; a reply that is one plain paragraph gets no HTML at all.

use pulldown_cmark::{Event, Options, Parser, html};

/// The `format` of an HTML message body.
pub const FORMAT: &str = "org.matrix.custom.html";

/// The HTML of `markdown`, or `None` when it is plain text (the `body` says it all).
pub fn to_html(markdown: &str) -> Option<String> {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        // Raw HTML from the model is escaped like any other text.
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut rendered = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut rendered, events);
    let rendered = rendered.trim_end();
    if rendered.is_empty() || is_plain_paragraph(rendered) {
        return None;
    }
    Some(rendered.to_owned())
}

/// `<p>text</p>` with no markup (entities aside) inside.
fn is_plain_paragraph(html: &str) -> bool {
    html.strip_prefix("<p>")
        .and_then(|rest| rest.strip_suffix("</p>"))
        .is_some_and(|inner| !inner.contains('<') && !inner.contains('&'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html_with_code_blocks_links_and_lists() {
        let html = to_html("## Result\n**Done**: see [the log](https://x.io/log?a=1&b=2)\n\n- one\n- two\n\n```rust\nlet x = 1 < 2;\n```").unwrap();
        assert!(html.starts_with("<h2>Result</h2>\n<p><strong>Done</strong>: see <a href=\"https://x.io/log?a=1&amp;b=2\">the log</a></p>"), "{html}");
        assert!(html.contains("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"), "{html}");
        assert!(html.ends_with("<pre><code class=\"language-rust\">let x = 1 &lt; 2;\n</code></pre>"), "{html}");
    }

    #[test]
    fn plain_text_needs_no_html() {
        assert_eq!(to_html("just words"), None);
        assert_eq!(to_html(""), None);
        assert_eq!(to_html("a & b").as_deref(), Some("<p>a &amp; b</p>"));
    }

    #[test]
    fn html_written_by_the_model_is_shown_as_text() {
        let html = to_html("hi <script>alert(1)</script> *there*").unwrap();
        assert_eq!(html, "<p>hi &lt;script&gt;alert(1)&lt;/script&gt; <em>there</em></p>");
        let block = to_html("<div onclick=\"x\">\nhello\n</div>").unwrap();
        assert!(!block.contains("<div"), "{block}");
    }
}
