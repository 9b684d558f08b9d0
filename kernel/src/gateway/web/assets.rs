//! The page's files, embedded in the binary from `kernel/web/`: plain HTML, CSS and ES
//! modules, no build step. `/` is the page; the rest live under `/assets/`.

/// One embedded file.
pub struct Asset {
    /// Its `content-type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file, by URL path.
const FILES: [(&str, &str, &[u8]); 11] = [
    ("/", HTML, include_bytes!("../../../web/index.html")),
    ("/assets/style.css", CSS, include_bytes!("../../../web/style.css")),
    ("/assets/app.js", JS, include_bytes!("../../../web/app.js")),
    ("/assets/api.js", JS, include_bytes!("../../../web/api.js")),
    ("/assets/markdown.js", JS, include_bytes!("../../../web/markdown.js")),
    ("/assets/chat.js", JS, include_bytes!("../../../web/chat.js")),
    ("/assets/sessions.js", JS, include_bytes!("../../../web/sessions.js")),
    ("/assets/memory.js", JS, include_bytes!("../../../web/memory.js")),
    ("/assets/automations.js", JS, include_bytes!("../../../web/automations.js")),
    ("/assets/health.js", JS, include_bytes!("../../../web/health.js")),
    ("/assets/icon.svg", "image/svg+xml", include_bytes!("../../../web/icon.svg")),
];

/// The file served at `path`, if any.
pub fn find(path: &str) -> Option<Asset> {
    let path = if path == "/index.html" { "/" } else { path };
    FILES.iter().find(|(p, _, _)| *p == path).map(|(_, content_type, body)| Asset { content_type, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_modules_are_embedded_and_nothing_else_is_served() {
        let page = find("/").map(|a| String::from_utf8_lossy(a.body).into_owned()).unwrap_or_default();
        assert!(page.contains("/assets/app.js"), "{page}");
        assert!(find("/assets/markdown.js").is_some_and(|a| a.content_type.starts_with("text/javascript")));
        assert!(find("/assets/../Cargo.toml").is_none());
        assert!(find("/etc/passwd").is_none());
    }
}
