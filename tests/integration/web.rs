//! The web plugin through `oxibot agent`: the scripted LLM calls `web_fetch` on a local HTTP
//! server, and the page reaches the model as Markdown (a PDF as its text, a windows-1252 page
//! decoded) — or, without the server whitelisted, the model reads the SSRF guard's refusal.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use oxibot_tests::llm::Reply;
use oxibot_tests::{stderr, stdout};
use serde_json::{Value, json};

use crate::agent::AgentEnv;

const PAGE: &str = "<!DOCTYPE html><html><head><title>Oolong notes</title></head><body>\
    <nav>Skip me</nav><article><h1>Oolong</h1><p>Brew at <strong>90 °C</strong> for \
    <a href=\"https://tea.example/oolong\">three minutes</a>.</p></article></body></html>";

/// Serves `PAGE` to every request on 127.0.0.1, on a thread that lives as long as the test
/// binary; returns the port.
fn serve_page() -> u16 {
    serve("text/html; charset=utf-8", PAGE.as_bytes().to_vec())
}

/// Serves `body` as `content_type` to every request on 127.0.0.1, like [`serve_page`].
fn serve(content_type: &'static str, body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = (&stream).write_all(head.as_bytes());
            let _ = (&stream).write_all(&body);
        }
    });
    port
}

/// A one-page PDF showing `text` in Helvetica, its cross-reference table's offsets real.
fn pdf(text: &str) -> Vec<u8> {
    let content = format!("BT /F1 18 Tf 72 720 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
            .to_owned(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()),
    ];
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (n, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{object}\nendobj\n", n + 1));
    }
    let xref = out.len();
    out.push_str(&format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1));
    for offset in offsets {
        out.push_str(&format!("{offset:010} 00000 n \n"));
    }
    out.push_str(&format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1));
    out.into_bytes()
}

/// An agent whose config has `tools` and whose model fetches `url` once, then answers.
fn fetch_through_agent(tools: Value, url: &str) -> String {
    let env = AgentEnv::new();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("config.json")).unwrap()).unwrap();
    config["tools"] = tools;
    env.write_config(&config);
    let arguments = json!({"url": url}).to_string();
    env.llm.push(Reply::ToolCalls(vec![("web_fetch".into(), arguments)]));
    env.llm.push(Reply::Text("Brew oolong at 90 °C.".into()));
    let out = env.agent("how hot for oolong?");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Brew oolong at 90 °C.");
    let second = &env.llm.requests()[1];
    let tool_message =
        second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").expect("tool result sent back");
    tool_message["content"].as_str().unwrap().to_owned()
}

#[test]
fn web_fetch_returns_a_whitelisted_local_page_to_the_model_as_markdown() {
    let port = serve_page();
    let url = format!("http://127.0.0.1:{port}/oolong");
    let content = fetch_through_agent(json!({"ssrfWhitelist": ["127.0.0.1/32"]}), &url);
    assert!(content.starts_with(&format!("[External content from {url}")), "{content}");
    assert!(content.contains("Title: Oolong notes"), "{content}");
    assert!(content.contains("# Oolong"), "{content}");
    assert!(content.contains("Brew at **90 °C** for [three minutes](https://tea.example/oolong)."), "{content}");
    assert!(!content.contains("Skip me"), "{content}");
}

#[test]
fn web_fetch_of_a_local_server_that_is_not_whitelisted_is_refused_to_the_model() {
    let port = serve_page();
    let content = fetch_through_agent(json!({}), &format!("http://localhost:{port}/"));
    assert!(content.contains("refused: localhost resolves to"), "{content}");
    assert!(!content.contains("Oolong"), "{content}");
}

#[test]
fn web_fetch_returns_the_text_of_a_pdf_to_the_model() {
    let port = serve("application/pdf", pdf("Oolong brews at ninety degrees"));
    let url = format!("http://127.0.0.1:{port}/oolong.pdf");
    let content = fetch_through_agent(json!({"ssrfWhitelist": ["127.0.0.1/32"]}), &url);
    assert!(content.contains("[text of a PDF document (application/pdf, "), "{content}");
    assert!(content.contains("Oolong brews at ninety degrees"), "{content}");
}

#[test]
fn web_fetch_decodes_a_windows_1252_page_for_the_model() {
    let page = b"<html><head><meta charset=windows-1252><title>Th\xe9</title></head><body><p>Brew at 90 \xb0C \x96 not boiling.</p></body></html>";
    let port = serve("text/html", page.to_vec());
    let content = fetch_through_agent(json!({"ssrfWhitelist": ["127.0.0.1/32"]}), &format!("http://127.0.0.1:{port}/"));
    assert!(content.contains("Title: Thé"), "{content}");
    assert!(content.contains("Brew at 90 °C – not boiling."), "{content}");
}
