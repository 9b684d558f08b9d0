//! Config mistakes said plainly: keys no version knows (typos) on every command, and in
//! `oxibot status` what the gateway would refuse (issue 24, item 11).

use std::net::TcpListener;

use oxibot_tests::{TempDir, oxibot, stderr, stdout};
use serde_json::{Value, json};

/// A data dir whose `config.json` is `config`.
fn home_with(config: &Value) -> TempDir {
    let home = TempDir::new("config-checks");
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    home
}

#[test]
fn a_typo_in_the_config_is_warned_about_once_with_the_key_it_is_closest_to() {
    let home = home_with(&json!({"agents": {"defaults": {"workspace": ".", "modle": "gpt-4.1", "maxTokens": 100}}}));
    let out = oxibot(home.path(), home.path(), &["tools", "list"]);
    assert!(out.status.success(), "a typo is no error: {}", stderr(&out));
    let warning = "warning: config.json: unknown key agents.defaults.modle (did you mean model?)";
    assert_eq!(stderr(&out).matches(warning).count(), 1, "{}", stderr(&out));
    let kept: Value = serde_json::from_slice(&std::fs::read(home.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(kept["agents"]["defaults"]["modle"], "gpt-4.1", "the key is kept");
}

#[test]
fn status_lists_unknown_keys_taken_ports_bad_ports_and_an_unknown_time_zone() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let home = home_with(&json!({
        "agents": {"defaults": {"timezone": "Mars/Olympus_Mons"}},
        "gateway": {"port": port, "prot": 1},
        "channels": {"websocket": {"enabled": true, "port": 70000}}
    }));
    let out = oxibot(home.path(), home.path(), &["status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    let warnings: Vec<&str> = report.lines().filter(|line| line.starts_with("warning:")).collect();
    let expected = [
        "unknown key gateway.prot (did you mean port?)",
        &format!("gateway.port: 127.0.0.1:{port} cannot be listened on"),
        "channels.websocket.port: expected a port from 1 to 65535, got 70000",
        "agents.defaults.timezone: \"Mars/Olympus_Mons\" is not a time zone",
    ];
    for text in expected {
        assert!(warnings.iter().any(|line| line.contains(text)), "no warning with {text:?}: {report}");
    }
    assert!(!stderr(&out).contains("unknown key"), "said once, in the report: {}", stderr(&out));
}

#[test]
fn status_says_the_gateway_would_refuse_an_enabled_flag_that_is_not_true_or_false() {
    let home = home_with(&json!({"channels": {"telegram": {"enabled": "yes"}}}));
    let out = oxibot(home.path(), home.path(), &["status"]);
    let report = stdout(&out);
    assert!(
        report.lines().any(|line| line.starts_with("warning:")
            && line.contains("channels.telegram.enabled: expected true or false, got \"yes\"")
            && line.contains("refuses to start")),
        "{report}"
    );
}

#[test]
fn status_says_the_gateway_would_refuse_a_delivery_retry_window_that_is_not_a_number_of_hours() {
    let home = home_with(&json!({"channels": {"deliveryRetryHours": "two"}}));
    let report = stdout(&oxibot(home.path(), home.path(), &["status"]));
    assert!(
        report.lines().any(|line| line.starts_with("warning:")
            && line.contains("channels.deliveryRetryHours: expected a number of hours above 0 and at most 168")
            && line.contains("refuses to start")),
        "{report}"
    );
}
