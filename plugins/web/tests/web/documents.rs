//! `web_fetch` of what is not UTF-8 HTML: PDFs (built here, one page's stream compressed as
//! real PDFs do) read as their text, and pages in legacy charsets decoded by the header's
//! charset or the page's `<meta>`.

use std::io::Write;

use oxibot_plugin::CallContext;
use serde_json::json;

use crate::server::{Reply, serve, web};

/// Only the local test servers are whitelisted.
const LOCAL_ONLY: &str = r#"{"ssrfWhitelist": ["127.0.0.1/32"]}"#;

fn ctx() -> CallContext {
    CallContext { session_key: Some("t:docs".to_owned()), ..CallContext::default() }
}

/// A PDF with one page per entry, each showing its text in Helvetica; a page whose flag is set
/// has its content stream compressed (FlateDecode). Offsets in the cross-reference table are
/// real, so any reader takes it.
fn pdf(pages: &[(&str, bool)]) -> Vec<u8> {
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let kids: Vec<String> = (0..pages.len()).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {} >>", kids.join(" "), pages.len()).into_bytes());
    objects.push(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec());
    for (i, (text, compressed)) in pages.iter().enumerate() {
        let page = format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        );
        objects.push(page.into_bytes());
        let content = format!("BT /F1 18 Tf 72 720 Td ({text}) Tj ET").into_bytes();
        let (content, filter) = if *compressed {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&content).unwrap();
            (encoder.finish().unwrap(), " /Filter /FlateDecode")
        } else {
            (content, "")
        };
        let mut stream = format!("<< /Length {}{filter} >>\nstream\n", content.len()).into_bytes();
        stream.extend_from_slice(&content);
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (n, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", n + 1).as_bytes());
        out.extend_from_slice(object);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    let trailer = format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1);
    out.extend_from_slice(trailer.as_bytes());
    out
}

#[tokio::test]
async fn a_pdf_comes_back_as_its_text_page_by_page() {
    let document = pdf(&[("Oolong brews at ninety degrees", false), ("Green tea wants caf\\351 patience", true)]);
    let size = document.len();
    let server = serve(move |_| Reply::ok("application/pdf", document.clone())).await;
    let out = web(LOCAL_ONLY).fetch(ctx(), json!({"url": server.url("/tea.pdf")})).await.unwrap();
    assert!(out.starts_with("[External content from http://127.0.0.1:"), "{out}");
    assert!(out.contains(&format!("[text of a PDF document (application/pdf, {size} bytes, 2 pages)]")), "{out}");
    let first = out.find("[page 1]").expect("page 1 marked");
    let second = out.find("[page 2]").expect("page 2 marked");
    assert!(out[first..second].contains("Oolong brews at ninety degrees"), "{out}");
    assert!(out[second..].contains("Green tea wants café patience"), "the compressed page, WinAnsi decoded: {out}");
}

#[tokio::test]
async fn a_pdf_served_as_a_generic_binary_is_recognised_by_its_signature() {
    let document = pdf(&[("Sencha notes", true)]);
    let server = serve(move |_| Reply::ok("application/octet-stream", document.clone())).await;
    let out = web(LOCAL_ONLY).fetch(ctx(), json!({"url": server.url("/download")})).await.unwrap();
    assert!(out.contains("1 pages)]\n\nSencha notes"), "{out}");
    assert!(!out.contains("[page 1]"), "a single page is not marked: {out}");
}

#[tokio::test]
async fn a_pdf_without_text_says_so_instead_of_returning_nothing() {
    let document = pdf(&[("", false)]);
    let server = serve(move |_| Reply::ok("application/pdf", document.clone())).await;
    let out = web(LOCAL_ONLY).fetch(ctx(), json!({"url": server.url("/scan.pdf")})).await.unwrap();
    assert!(out.contains("1 pages) with no text to extract; it may hold only scanned images]"), "{out}");
}

#[tokio::test]
async fn pages_in_legacy_charsets_are_decoded_by_their_header_or_meta() {
    let server = serve(|request| match request.target.as_str() {
        "/cp1252" => Reply::ok("text/html; charset=windows-1252", &b"<html><body><p>\x93Caf\xe9\x94 \x80 5</p></body></html>"[..]),
        "/latin1" => Reply::ok("text/plain; charset=ISO-8859-1", &b"cr\xe8me br\xfbl\xe9e"[..]),
        // Shift_JIS declared only in the page: 日本茶 (Japanese tea).
        "/sjis" => Reply::ok(
            "text/html",
            &b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"><title>\x93\xfa\x96\x7b\x92\x83</title></head><body><p>\x93\xfa\x96\x7b\x92\x83</p></body></html>"[..],
        ),
        _ => Reply::ok("text/html", &b"<html><body><p>sans d\xe9claration</p></body></html>"[..]),
    })
    .await;
    let web = web(LOCAL_ONLY);
    let fetch = |path: &str| web.fetch(ctx(), json!({"url": server.url(path), "extractMode": "text"}));
    let cp1252 = fetch("/cp1252").await.unwrap();
    assert!(cp1252.ends_with("\u{201c}Café\u{201d} € 5"), "{cp1252}");
    assert!(fetch("/latin1").await.unwrap().ends_with("crème brûlée"));
    let sjis = fetch("/sjis").await.unwrap();
    assert!(sjis.contains("Title: 日本茶") && sjis.ends_with("日本茶"), "{sjis}");
    let undeclared = fetch("/plain").await.unwrap();
    assert!(undeclared.ends_with("sans déclaration"), "invalid UTF-8 reads as windows-1252: {undeclared}");
}
