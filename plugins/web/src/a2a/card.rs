//! Reading a remote agent's card: where its JSON-RPC endpoint is (a v1.0 card's
//! `supportedInterfaces`, else an older card's `url` with `preferredTransport` JSON-RPC).

use serde_json::Value;

/// The JSON-RPC endpoint a card names, if any.
pub fn json_rpc_endpoint(card: &Value) -> Option<String> {
    let interfaces = card.get("supportedInterfaces").and_then(Value::as_array);
    let v1 = interfaces.into_iter().flatten().find_map(|interface| {
        let binding = interface.get("protocolBinding").and_then(Value::as_str)?;
        binding.eq_ignore_ascii_case("JSONRPC").then(|| interface.get("url")?.as_str().map(str::to_owned))?
    });
    let transport = card.get("preferredTransport").and_then(Value::as_str).unwrap_or("JSONRPC");
    let older = || transport.eq_ignore_ascii_case("JSONRPC").then(|| card.get("url")?.as_str().map(str::to_owned))?;
    v1.or_else(older).filter(|url| !url.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_json_rpc_interface_of_a_v1_card_or_the_url_of_an_older_one_is_the_endpoint() {
        let v1 = json!({"supportedInterfaces": [
            {"url": "http://a.example/grpc", "protocolBinding": "GRPC"},
            {"url": "http://a.example/rpc", "protocolBinding": "JSONRPC"}
        ]});
        assert_eq!(json_rpc_endpoint(&v1).as_deref(), Some("http://a.example/rpc"));
        let older = json!({"url": "http://a.example/", "protocolVersion": "0.3.0"});
        assert_eq!(json_rpc_endpoint(&older).as_deref(), Some("http://a.example/"));
        assert_eq!(json_rpc_endpoint(&json!({"url": "http://a.example/", "preferredTransport": "GRPC"})), None);
        assert_eq!(json_rpc_endpoint(&json!({"name": "x"})), None);
    }
}
