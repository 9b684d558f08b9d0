//! `web_search` against local servers speaking each provider's real response format, with the
//! base URL pointed at them through the config.

use oxibot_plugin::CallContext;
use serde_json::{Value, json};

use crate::server::{Reply, Server, serve, web};

/// The config for `provider` at `base` with `key`, the local servers whitelisted.
fn config(provider: &str, base: &str, key: &str) -> String {
    json!({
        "web": {"search": {"provider": provider, "apiKey": key, "baseUrl": base}},
        "ssrfWhitelist": ["127.0.0.1/32"]
    })
    .to_string()
}

/// Runs one search.
async fn search(config: &str, args: Value) -> String {
    web(config).search(CallContext::default(), args).await.unwrap()
}

/// A server answering every request with `body` as `content_type`.
async fn recorded(content_type: &'static str, body: &'static str) -> Server {
    serve(move |_| Reply::ok(content_type, body)).await
}

const BRAVE: &str = r#"{"query": {"original": "green tea"}, "type": "search", "web": {"type": "search",
  "results": [
    {"title": "Green tea - Wikipedia", "url": "https://en.wikipedia.org/wiki/Green_tea", "is_source_local": false,
     "description": "<strong>Green tea</strong> is a type of tea made from Camellia sinensis leaves.", "language": "en"},
    {"title": "How to Brew", "url": "https://tea.example/brew", "description": "Steep for 2&#x27;3 minutes."}
  ]}}"#;

#[tokio::test]
async fn brave_results_are_listed_and_the_key_is_sent() {
    let server = recorded("application/json", BRAVE).await;
    let out =
        search(&config("brave", &server.url("/res/v1/web/search"), "bk"), json!({"query": "green tea", "count": 2}))
            .await;
    assert!(out.contains("(Brave)"), "{out}");
    assert!(
        out.contains("1. Green tea - Wikipedia\n   https://en.wikipedia.org/wiki/Green_tea\n   Green tea is a type"),
        "{out}"
    );
    assert!(out.contains("2. How to Brew"), "{out}");
    let request = &server.received()[0];
    assert_eq!(request.header("x-subscription-token"), Some("bk"));
    assert_eq!(request.target, "/res/v1/web/search?q=green+tea&count=2");
}

const TAVILY: &str = r#"{"query": "green tea", "follow_up_questions": null, "answer": null, "images": [],
  "results": [{"title": "Green Tea Benefits", "url": "https://health.example/green-tea",
    "content": "Green tea is loaded with antioxidants.", "score": 0.98, "raw_content": null}],
  "response_time": 1.2}"#;

#[tokio::test]
async fn tavily_is_asked_by_post_with_a_bearer_key() {
    let server = recorded("application/json", TAVILY).await;
    let out = search(&config("tavily", &server.url("/search"), "tk"), json!({"query": "green tea"})).await;
    assert!(
        out.contains("1. Green Tea Benefits\n   https://health.example/green-tea\n   Green tea is loaded"),
        "{out}"
    );
    let request = &server.received()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.header("authorization"), Some("Bearer tk"));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body, json!({"query": "green tea", "max_results": 5}));
}

const SEARXNG: &str = r#"{"query": "green tea", "number_of_results": 0, "results": [
  {"url": "https://searx.example/a", "title": "A result", "content": "First snippet", "engine": "bing",
   "engines": ["bing"], "positions": [1], "score": 1.0, "category": "general"},
  {"url": "https://searx.example/b", "title": "B result", "content": "Second snippet", "engine": "brave"}],
  "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}"#;

#[tokio::test]
async fn searxng_is_asked_for_json_under_its_base_url() {
    let server = recorded("application/json", SEARXNG).await;
    let out = search(&config("searxng", &server.url("/"), ""), json!({"query": "green tea", "count": 1})).await;
    assert!(out.contains("1. A result\n   https://searx.example/a\n   First snippet"), "{out}");
    assert!(!out.contains("B result"), "count limits the list: {out}");
    assert_eq!(server.received()[0].target, "/search?q=green+tea&format=json");
}

const JINA: &str = r#"{"code": 200, "status": 20000, "data": [
  {"title": "Green tea guide", "url": "https://jina.example/guide", "description": "A guide to green tea.",
   "content": "Long page content...", "usage": {"tokens": 512}}],
  "meta": {"usage": {"tokens": 512}}}"#;

#[tokio::test]
async fn jina_results_are_listed_and_the_key_is_sent() {
    let server = recorded("application/json", JINA).await;
    let out = search(&config("jina", &server.url("/"), "jk"), json!({"query": "green tea"})).await;
    assert!(out.contains("1. Green tea guide\n   https://jina.example/guide\n   A guide to green tea."), "{out}");
    let request = &server.received()[0];
    assert_eq!(request.header("authorization"), Some("Bearer jk"));
    assert_eq!(request.header("accept"), Some("application/json"));
}

const DUCKDUCKGO: &str = r#"<!DOCTYPE html><html><body><div class="serp__results"><div id="links" class="results">
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fen.wikipedia.org%2Fwiki%2FGreen_tea&amp;rut=8d2f">Green tea - <b>Wikipedia</b></a>
    </h2>
    <div class="result__extras"><div class="result__extras__url"><a class="result__url" href="//duckduckgo.com/l/?uddg=x">en.wikipedia.org/wiki/Green_tea</a></div></div>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fen.wikipedia.org%2Fwiki%2FGreen_tea&amp;rut=8d2f"><b>Green</b> <b>tea</b> is a type of tea that is made from Camellia sinensis leaves &amp; buds.</a>
  </div>
</div>
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://direct.example/page">Direct link</a></h2>
    <a class="result__snippet" href="https://direct.example/page">Second snippet.</a>
  </div>
</div>
</div></div></body></html>"#;

#[tokio::test]
async fn duckduckgo_needs_no_key_and_its_html_is_parsed() {
    let server = recorded("text/html", DUCKDUCKGO).await;
    let out = search(&config("duckduckgo", &server.url("/html/"), ""), json!({"query": "green tea"})).await;
    assert!(
        out.contains(
            "1. Green tea - Wikipedia\n   https://en.wikipedia.org/wiki/Green_tea\n   Green tea is a type of tea that is \
             made from Camellia sinensis leaves & buds."
        ),
        "{out}"
    );
    assert!(out.contains("2. Direct link\n   https://direct.example/page\n   Second snippet."), "{out}");
    assert_eq!(server.received()[0].target, "/html/?q=green+tea");
}

#[tokio::test]
async fn a_keyed_provider_without_a_key_falls_back_to_duckduckgo_with_a_note() {
    let config = json!({"web": {"search": {"provider": "tavily"}}}).to_string();
    let web = web(&config);
    // Without a key and with the internet out of reach the fallback fails, but the plan says why.
    let plan = oxibot_tool_web::search::Plan::new(
        &oxibot_tool_web::config::WebConfig::parse(&config).unwrap().web.search,
        |_| None,
    );
    assert!(plan.note.unwrap().contains("TAVILY_API_KEY"));
    let refused = web.search(CallContext::default(), json!({"query": ""})).await.unwrap_err();
    assert_eq!(refused.message(), "the query is empty");
}

#[tokio::test]
async fn a_search_endpoint_on_a_private_address_is_refused_unless_whitelisted() {
    let server = recorded("application/json", SEARXNG).await;
    let config = json!({"web": {"search": {"provider": "searxng", "baseUrl": server.url("/")}}}).to_string();
    let error = web(&config).search(CallContext::default(), json!({"query": "tea"})).await.unwrap_err();
    assert!(error.message().starts_with("refused: 127.0.0.1"), "{error}");
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn the_same_query_a_third_time_in_a_turn_is_refused_whatever_its_case() {
    let server = recorded("application/json", SEARXNG).await;
    let web = web(&config("searxng", &server.url("/"), ""));
    web.search(CallContext::default(), json!({"query": "green tea"})).await.unwrap();
    web.search(CallContext::default(), json!({"query": "Green  Tea "})).await.unwrap();
    let error = web.search(CallContext::default(), json!({"query": "GREEN TEA"})).await.unwrap_err();
    assert!(error.message().contains("already done 2 times in this turn"), "{error}");
    assert_eq!(server.received().len(), 2);
}
