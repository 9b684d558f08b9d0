//! The `web` tool plugin: `web_fetch` (a page as Markdown or text in whatever charset it
//! declares, a PDF as its text), `web_search` (Brave,
//! Tavily, SearXNG, Jina, or keyless DuckDuckGo) and, when remote agents are configured, `a2a`
//! (a message to another agent over A2A, [`a2a`]), every request behind an SSRF guard.
//!
//! Settings come from the kernel in `OXIBOT_TOOL_CONFIG` ([`config`]): `tools.web`,
//! `tools.a2a` and `tools.ssrfWhitelist`. Every request, redirect hops included, goes only to addresses the
//! [`guard::SsrfGuard`] allows, and the client's resolver filters the same way, so the address
//! checked is the address connected to. Every result opens with a line marking it as untrusted
//! web content. The same URL or query more than twice in a turn is refused ([`repeat`]).
//!
//! What this crate is not: no browser (no JavaScript runs), no cache, no cookies.

pub mod a2a;
mod blank_lines;
pub mod charset;
pub mod config;
mod entry;
pub mod error;
pub mod extract;
pub mod fetch;
pub mod guard;
pub mod http;
pub mod pdf;
pub mod repeat;
pub mod search;

pub use entry::run;

use std::sync::Arc;

use oxibot_plugin::{CallContext, Plugin, ToolError, ToolOutput};
use serde_json::Value;

use crate::a2a::config::A2aSection;
use crate::config::{SearchConfig, WebConfig};
use crate::error::WebError;
use crate::http::Fetcher;
use crate::repeat::RepeatGuard;

/// How long the kernel waits for a web call: a request with all its redirects, plus slack.
pub const TOOL_TIMEOUT_SECS: u64 = 90;

/// What every call shares: the guarded HTTP client, the search settings, the repeat counts.
#[derive(Debug)]
pub struct Web {
    /// Guarded requests.
    fetcher: Fetcher,
    /// `tools.web.search`.
    search: SearchConfig,
    /// `tools.a2a`: the remote agents.
    agents: A2aSection,
    /// Refuses loops of the same URL or query.
    repeats: RepeatGuard,
}

impl Web {
    /// The plugin's state for `config`.
    pub fn new(config: &WebConfig) -> Result<Web, WebError> {
        let fetcher = Fetcher::new(config.guard()?)?;
        Ok(Web {
            fetcher,
            search: config.web.search.clone(),
            agents: config.a2a.clone(),
            repeats: RepeatGuard::default(),
        })
    }

    /// Runs `web_fetch`.
    pub async fn fetch(&self, ctx: CallContext, args: Value) -> ToolOutput {
        // The same page however it is spelled (`http://a.example` and `http://A.example/`).
        let url = args.get("url").and_then(Value::as_str).unwrap_or_default().trim();
        let url = http::parse_url(url).map_or_else(|_| url.to_owned(), |url| url.to_string());
        self.repeats.admit(ctx.session_key.as_deref(), &format!("web_fetch {url}")).map_err(ToolError::new)?;
        fetch::run(&self.fetcher, args).await
    }

    /// Runs `web_search`.
    pub async fn search(&self, ctx: CallContext, args: Value) -> ToolOutput {
        let query = args.get("query").and_then(Value::as_str).unwrap_or_default().to_lowercase();
        let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
        self.repeats.admit(ctx.session_key.as_deref(), &format!("web_search '{query}'")).map_err(ToolError::new)?;
        search::run(&self.fetcher, &self.search, args).await
    }

    /// Runs `a2a`.
    pub async fn ask_agent(&self, args: Value) -> ToolOutput {
        a2a::run(&self.fetcher, &self.agents, args).await
    }
}

/// The plugin serving the tools from `web` (`a2a` only when agents are configured).
pub fn plugin(web: Arc<Web>) -> Plugin {
    let for_search = Arc::clone(&web);
    let a2a = a2a::tool(&web.agents).map(|tool| (tool, Arc::clone(&web)));
    let plugin = Plugin::new("web")
        .static_manifest()
        .tool(fetch::tool(), move |ctx, args| {
            let web = Arc::clone(&web);
            async move { web.fetch(ctx, args).await }
        })
        .tool(search::tool(), move |ctx, args| {
            let web = Arc::clone(&for_search);
            async move { web.search(ctx, args).await }
        });
    match a2a {
        Some((tool, web)) => plugin.tool(tool, move |_ctx, args| {
            let web = Arc::clone(&web);
            async move { web.ask_agent(args).await }
        }),
        None => plugin,
    }
}
