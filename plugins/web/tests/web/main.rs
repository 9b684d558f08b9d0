//! Tests of the web plugin against local HTTP servers: the SSRF guard (`fetch`), page
//! rendering, PDFs and legacy charsets (`documents`), and every search provider's recorded
//! wire format (`search`).
#![allow(clippy::unwrap_used)]

/// `web_fetch` of PDFs and of pages in legacy charsets.
mod documents;
/// `web_fetch` and the SSRF guard.
mod fetch;
/// `web_search` with each provider.
mod search;
/// A tiny scripted HTTP server.
mod server;
