//! The search providers and their wire formats: Brave (`web.results[]` of title, url,
//! description), Tavily (`results[]` of title, url, content), SearXNG (`results[]` of title,
//! url, content), Jina (`data[]` of title, url, description), and DuckDuckGo's HTML endpoint
//! (`a.result__a` links with `a.result__snippet` text; the links go through `/l/?uddg=`).

use serde_json::{Value, json};

use super::Plan;
use crate::error::WebError;
use crate::extract::decode_entities;
use crate::http::{Fetched, Fetcher};

/// A search service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Brave Search API.
    Brave,
    /// Tavily.
    Tavily,
    /// A SearXNG instance (its JSON format must be enabled).
    Searxng,
    /// Jina's search endpoint.
    Jina,
    /// DuckDuckGo's HTML page; needs no key.
    DuckDuckGo,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The page title.
    pub title: String,
    /// The page URL.
    pub url: String,
    /// A short excerpt.
    pub snippet: String,
}

impl Provider {
    /// The provider named `name` (lowercase) in the config.
    pub fn from_name(name: &str) -> Option<Provider> {
        Some(match name {
            "brave" => Provider::Brave,
            "tavily" => Provider::Tavily,
            "searxng" | "searx" => Provider::Searxng,
            "jina" => Provider::Jina,
            "duckduckgo" | "ddg" | "" => Provider::DuckDuckGo,
            _ => return None,
        })
    }

    /// Its name for people.
    pub fn label(self) -> &'static str {
        match self {
            Provider::Brave => "Brave",
            Provider::Tavily => "Tavily",
            Provider::Searxng => "SearXNG",
            Provider::Jina => "Jina",
            Provider::DuckDuckGo => "DuckDuckGo",
        }
    }

    /// The environment variable holding its key, for providers that need one.
    pub fn key_variable(self) -> Option<&'static str> {
        match self {
            Provider::Brave => Some("BRAVE_API_KEY"),
            Provider::Tavily => Some("TAVILY_API_KEY"),
            Provider::Jina => Some("JINA_API_KEY"),
            Provider::Searxng | Provider::DuckDuckGo => None,
        }
    }

    /// Its public endpoint (`baseUrl` replaces it; SearXNG has none).
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Provider::Brave => "https://api.search.brave.com/res/v1/web/search",
            Provider::Tavily => "https://api.tavily.com/search",
            Provider::Searxng => "",
            Provider::Jina => "https://s.jina.ai/",
            Provider::DuckDuckGo => "https://html.duckduckgo.com/html/",
        }
    }
}

/// Sends the plan's request and parses the answer.
pub async fn ask(fetcher: &Fetcher, plan: &Plan, query: &str, count: u32) -> Result<Vec<Hit>, WebError> {
    let key = plan.api_key.clone().unwrap_or_default();
    let count_text = count.to_string();
    let fetched = match plan.provider {
        Provider::Brave => {
            let build = |client: &reqwest::Client, url| {
                client
                    .get(with_query(url, &[("q", query), ("count", &count_text)]))
                    .header("Accept", "application/json")
                    .header("X-Subscription-Token", &key)
            };
            fetcher.send(&plan.endpoint, build).await?
        }
        Provider::Tavily => {
            let body = json!({"query": query, "max_results": count}).to_string();
            let build = |client: &reqwest::Client, url| {
                client
                    .post(url)
                    .bearer_auth(&key)
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/json")
                    .body(body)
            };
            fetcher.send(&plan.endpoint, build).await?
        }
        Provider::Searxng => {
            let build =
                |client: &reqwest::Client, url| client.get(with_query(url, &[("q", query), ("format", "json")]));
            fetcher.send(&plan.endpoint, build).await?
        }
        Provider::Jina => {
            let build = |client: &reqwest::Client, url| {
                client.get(with_query(url, &[("q", query)])).bearer_auth(&key).header("Accept", "application/json")
            };
            fetcher.send(&plan.endpoint, build).await?
        }
        Provider::DuckDuckGo => {
            let build = |client: &reqwest::Client, url| client.get(with_query(url, &[("q", query)]));
            fetcher.send(&plan.endpoint, build).await?
        }
    };
    parse(plan.provider, &fetched)
}

/// `url` with `pairs` appended to its query.
fn with_query(mut url: url::Url, pairs: &[(&str, &str)]) -> url::Url {
    url.query_pairs_mut().extend_pairs(pairs);
    url
}

/// Parses a provider's response body.
pub fn parse(provider: Provider, fetched: &Fetched) -> Result<Vec<Hit>, WebError> {
    if provider == Provider::DuckDuckGo {
        return Ok(parse_duckduckgo(&String::from_utf8_lossy(&fetched.body)));
    }
    let body: Value = serde_json::from_slice(&fetched.body)
        .map_err(|e| WebError::BadResponse { provider: provider.label(), reason: e.to_string() })?;
    let (list, snippet) = match provider {
        Provider::Brave => (body.pointer("/web/results"), "description"),
        Provider::Jina => (body.get("data"), "description"),
        _ => (body.get("results"), "content"),
    };
    let Some(list) = list else {
        // Brave omits `web` when nothing matched.
        return Ok(Vec::new());
    };
    let items = list
        .as_array()
        .ok_or_else(|| WebError::BadResponse { provider: provider.label(), reason: "results are not a list".into() })?;
    let text = |item: &Value, key: &str| item.get(key).and_then(Value::as_str).map(clean).unwrap_or_default();
    Ok(items
        .iter()
        .map(|item| Hit { title: text(item, "title"), url: text(item, "url"), snippet: text(item, snippet) })
        .filter(|hit| !hit.url.is_empty())
        .collect())
}

/// Results of DuckDuckGo's HTML page.
fn parse_duckduckgo(html: &str) -> Vec<Hit> {
    const LINK: &str = "class=\"result__a\"";
    const SNIPPET: &str = "class=\"result__snippet\"";
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(found) = html[from..].find(LINK) {
        let at = from + found;
        from = at + LINK.len();
        let tag_start = html[..at].rfind('<').unwrap_or(at);
        let Some(tag_end) = html[at..].find('>').map(|i| at + i) else { break };
        let Some(href) = attribute(&html[tag_start..tag_end], "href") else { continue };
        let title_end = html[tag_end..].find("</a>").map_or(html.len(), |i| tag_end + i);
        let title = clean(&html[tag_end + 1..title_end]);
        let next = html[from..].find(LINK).map_or(html.len(), |i| from + i);
        let snippet = html[title_end..next].find(SNIPPET).map(|i| title_end + i).and_then(|s| {
            let open = s + html[s..].find('>')? + 1;
            let close = html[open..].find("</").map_or(next, |i| open + i);
            let close = html[open..next].find("</a>").map_or(close, |i| open + i);
            Some(clean(&html[open..close]))
        });
        hits.push(Hit { title, url: result_url(&href), snippet: snippet.unwrap_or_default() });
    }
    hits
}

/// The value of `name="…"` in a tag's text, entities decoded.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let marker = format!("{name}=\"");
    let start = tag.find(&marker)? + marker.len();
    let end = start + tag[start..].find('"')?;
    Some(decode_entities(&tag[start..end]))
}

/// The target of a DuckDuckGo link: the `uddg` parameter of its redirect link, else the link.
fn result_url(href: &str) -> String {
    let absolute = if href.starts_with("//") { format!("https:{href}") } else { href.to_owned() };
    let target = url::Url::parse(&absolute)
        .ok()
        .and_then(|url| url.query_pairs().find(|(key, _)| key == "uddg").map(|(_, value)| value.into_owned()));
    target.unwrap_or(absolute)
}

/// Text without tags, entities decoded and whitespace collapsed.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    decode_entities(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckduckgo_links_are_unwrapped_and_tags_stripped() {
        let html = r#"<div class="result"><h2 class="result__title"><a rel="nofollow" class="result__a"
            href="//duckduckgo.com/l/?uddg=https%3A%2F%2Ftea.example%2Fgreen%3Fa%3D1&amp;rut=abc">Green <b>tea</b></a></h2>
            <a class="result__snippet" href="x">All about <b>green</b> tea &amp; more.</a></div>"#;
        let hits = parse_duckduckgo(html);
        assert_eq!(
            hits,
            [Hit {
                title: "Green tea".into(),
                url: "https://tea.example/green?a=1".into(),
                snippet: "All about green tea & more.".into()
            }]
        );
    }
}
