//! `tools.a2a`: the remote agents the `a2a` tool may talk to, by the name the model uses.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `tools.a2a`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct A2aSection {
    /// Name → remote agent.
    pub agents: BTreeMap<String, RemoteAgent>,
}

/// One remote agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RemoteAgent {
    /// Its base URL (the card is at `<url>/.well-known/agent-card.json`), or the card's URL.
    pub url: String,
    /// The key sent as `Authorization: Bearer`, if it wants one.
    #[serde(alias = "api_key")]
    pub api_key: Option<String>,
    /// What the model reads about it in the tool's description.
    pub description: Option<String>,
}

impl RemoteAgent {
    /// Where its agent card is.
    pub fn card_url(&self) -> String {
        let url = self.url.trim();
        if url.ends_with(".json") {
            url.to_owned()
        } else {
            format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_is_at_the_well_known_path_below_the_url_unless_the_url_names_a_card() {
        let agent = |url: &str| RemoteAgent { url: url.into(), ..RemoteAgent::default() };
        assert_eq!(agent("http://a.example/").card_url(), "http://a.example/.well-known/agent-card.json");
        assert_eq!(agent("http://a.example/x/card.json").card_url(), "http://a.example/x/card.json");
    }
}
