//! Each real channel plugin through the real `oxibot gateway`, against a local fake of its
//! service and the scripted LLM: a user's message produces the model's reply in that channel,
//! also after the channel's plugin was killed.

use oxibot_tests::wait::block_on;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use oxibot_tests::channels::free_port;
use oxibot_tests::fakes_dingtalk::{BATCH_SEND, FakeDingTalk, one_to_one_text};
use oxibot_tests::fakes_discord::{FakeDiscord, direct_message as discord_dm};
use oxibot_tests::fakes_email::{FakeMail, verified_mail};
use oxibot_tests::fakes_feishu::{FakeFeishu, MESSAGES, direct_text as feishu_dm};
use oxibot_tests::fakes_matrix::{DM_ROOM, FakeMatrix, GROUP_ROOM, text as matrix_text};
use oxibot_tests::fakes_mattermost::{FakeMattermost, post as mattermost_post};
use oxibot_tests::fakes_qq::{FakeQq, c2c_message as qq_dm, user_messages as qq_user_messages};
use oxibot_tests::fakes_signal::{FakeSignal, direct_text as signal_dm};
use oxibot_tests::fakes_slack::{FakeSlack, direct_message};
use oxibot_tests::fakes_telegram::{FakeTelegram, private_text, user as telegram_user};
use oxibot_tests::fakes_wecom::{FakeWeCom, direct_text as wecom_dm};
use oxibot_tests::llm::Reply;
use oxibot_tests::procs::{sigkill, wait_until};
use oxibot_tests::{TempDir, http};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::gateway::GatewayEnv;

#[test]
fn a_slack_direct_message_gets_the_models_reply_in_slack() {
    let slack = FakeSlack::start();
    let env = GatewayEnv::with_channels(json!({"slack": slack.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("slack");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        slack.wait_connections(1).await;
        slack.deliver("env-1", direct_message("D1", "U42", "hi there", "1700000000.000100"), 0).await;
        let posts = slack.wait_calls("chat.postMessage", 1).await;
        assert_eq!(posts[0].body["channel"], "D1");
        assert_eq!(posts[0].body["text"], "Hello from *the model*", "Markdown became mrkdwn");
        slack.wait_ack("env-1").await;
    });
    let user =
        env.llm.requests()[0]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(user.contains("hi there"), "{user}");
}

#[test]
fn a_dingtalk_message_gets_the_models_reply_in_dingtalk() {
    let dingtalk = FakeDingTalk::start();
    let env =
        GatewayEnv::with_channels(json!({"dingtalk": dingtalk.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("dingtalk");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        dingtalk.wait_connections(1).await;
        dingtalk.deliver("frame-1", one_to_one_text("msg-1", "staff42", "Ada", "hi there")).await;
        let sends = dingtalk.wait_calls(BATCH_SEND, 1).await;
        assert_eq!(sends[0].body["userIds"], json!(["staff42"]));
        assert_eq!(sends[0].msg_param()["text"], "Hello from **the model**", "DingTalk takes the Markdown as it is");
        dingtalk.wait_ack("frame-1").await;
    });
    let user =
        env.llm.requests()[0]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(user.contains("hi there"), "{user}");
    assert!(env.session_file("dingtalk:staff42").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_dingtalk_plugin_comes_back_and_later_messages_get_their_reply() {
    let dingtalk = FakeDingTalk::start();
    let env =
        GatewayEnv::with_channels(json!({"dingtalk": dingtalk.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("dingtalk");
    block_on(dingtalk.wait_connections(1));
    let pid = env.plugin_status("dingtalk")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("dingtalk");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the dingtalk plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        dingtalk.wait_connections(2).await;
        dingtalk.deliver("frame-2", one_to_one_text("msg-2", "staff42", "Ada", "are you there?")).await;
        let sends = dingtalk.wait_calls(BATCH_SEND, 1).await;
        assert_eq!(sends[0].msg_param()["text"], "still here");
        dingtalk.wait_ack("frame-2").await;
    });
}

#[test]
fn a_feishu_direct_message_gets_the_models_reply_streamed_into_one_card() {
    let feishu = FakeFeishu::start();
    let env = GatewayEnv::with_channels(json!({"feishu": feishu.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("feishu");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        feishu.wait_connections(1).await;
        feishu.push_event("frame-1", &feishu_dm("om_1", "ou_ada", "hi there")).await;
        feishu.wait_answer("frame-1").await;
        let cards = feishu.wait_calls(MESSAGES, 1).await;
        assert_eq!(cards[0].body["receive_id"], "ou_ada");
        let card = cards[0].body["content"].as_str().unwrap().to_owned();
        oxibot_tests::wait::eventually("the card shows the final reply", || {
            let updates = feishu.calls_like("PATCH", "/open-apis/im/v1/messages/om_bot_1");
            let shown =
                updates.last().map_or(card.clone(), |update| update.body["content"].as_str().unwrap().to_owned());
            shown.contains("Hello from **the model**")
        })
        .await;
    });
    assert_eq!(feishu.calls(MESSAGES).len(), 1, "the reply is one card");
    assert!(env.session_file("feishu:ou_ada").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_feishu_plugin_comes_back_and_later_messages_get_their_reply() {
    let feishu = FakeFeishu::start();
    let section = feishu.config(json!({"enabled": true, "allowFrom": "*", "streaming": false}));
    let env = GatewayEnv::with_channels(json!({"feishu": section}));
    let _gateway = env.start_with("feishu");
    block_on(feishu.wait_connections(1));
    let pid = env.plugin_status("feishu")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("feishu");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the feishu plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        feishu.wait_connections(2).await;
        feishu.push_event("frame-2", &feishu_dm("om_2", "ou_ada", "are you there?")).await;
        let cards = feishu.wait_calls(MESSAGES, 1).await;
        assert_eq!(cards[0].card_markdown(), "still here");
        feishu.wait_answer("frame-2").await;
    });
}

#[test]
fn a_matrix_message_gets_the_models_reply_in_its_room_and_a_sender_outside_allow_from_gets_none() {
    let matrix = FakeMatrix::start();
    let section = matrix.config(json!({"enabled": true, "allowFrom": ["@ada:fake.test"]}));
    let env = GatewayEnv::with_channels(json!({"matrix": section}));
    let _gateway = env.start_with("matrix");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        matrix.wait_sync_from("s0").await;
        matrix.push(GROUP_ROOM, vec![matrix_text("$eve", "@eve:fake.test", "let me in")]);
        matrix.push(DM_ROOM, vec![matrix_text("$ada", "@ada:fake.test", "hi there")]);
        let sent = matrix.wait_sent(1).await;
        assert_eq!(sent[0].room, DM_ROOM);
        assert_eq!(sent[0].content["body"], "Hello from **the model**");
        assert_eq!(sent[0].content["formatted_body"], "<p>Hello from <strong>the model</strong></p>");
        matrix.wait_sync_from("s2").await;
    });
    assert_eq!(matrix.sent().len(), 1, "the sender outside allowFrom was answered");
    assert_eq!(env.llm.requests().len(), 1);
    assert!(env.session_file(&format!("matrix:{DM_ROOM}")).contains("hi there"), "the session is named after the room");
}

#[test]
fn a_sigkilled_matrix_plugin_comes_back_and_later_messages_get_their_reply() {
    let matrix = FakeMatrix::start();
    let env = GatewayEnv::with_channels(json!({"matrix": matrix.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("matrix");
    block_on(matrix.wait_sync_from("s0"));
    let pid = env.plugin_status("matrix")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("matrix");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the matrix plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        matrix.push(DM_ROOM, vec![matrix_text("$m2", "@ada:fake.test", "are you there?")]);
        let sent = matrix.wait_sent(1).await;
        assert_eq!(sent[0].content["body"], "still here");
    });
    assert_eq!(matrix.syncs().iter().filter(|since| since.is_none()).count(), 1, "the new instance lost its position");
}

// Issue 27, finding 1: a 502 on part 2 of a 3-part reply posted part 1 twice, because the
// retry had a new outbound id and so new transaction ids.
#[test]
fn a_matrix_reply_retried_after_a_failed_part_posts_each_part_once() {
    let matrix = FakeMatrix::start();
    let env = GatewayEnv::with_channels(json!({"matrix": matrix.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with_env("matrix", &[("OXIBOT_DELIVERY_RETRY_DELAYS_MS", "50")]);
    block_on(matrix.wait_sync_from("s0"));
    let part = |n: usize| format!("part {n} {}", "x".repeat(9_000));
    env.llm.push(Reply::Text(format!("{}\n\n{}\n\n{}", part(1), part(2), part(3))));
    matrix.fail_send_number(2, 502);
    block_on(async {
        matrix.push(DM_ROOM, vec![matrix_text("$long", "@ada:fake.test", "write a lot")]);
        matrix.wait_sent(3).await;
    });
    std::thread::sleep(Duration::from_millis(500));
    let bodies: Vec<String> =
        matrix.sent().iter().map(|sent| sent.content["body"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(bodies.len(), 3, "each part posted once: {:?}", bodies.iter().map(|b| &b[..8]).collect::<Vec<_>>());
    for (n, body) in bodies.iter().enumerate() {
        assert!(body.starts_with(&format!("part {}", n + 1)), "part {} is {:?}", n + 1, &body[..8]);
    }
    assert!(env.log().contains("delivered after retrying"), "the failed part was retried: {}", env.log());
}

#[test]
fn a_mattermost_direct_message_gets_the_models_reply_streamed_into_one_post() {
    let mattermost = FakeMattermost::start();
    let section = mattermost.config(json!({"enabled": true, "allowFrom": ["ada"]}));
    let env = GatewayEnv::with_channels(json!({"mattermost": section}));
    let _gateway = env.start_with("mattermost");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        mattermost.wait_greeted(1).await;
        mattermost.post(mattermost_post("p1", "dmchan", "ada", "hi there"), "D").await;
        let created = mattermost.wait_requests("POST", "/api/v4/posts", 1).await;
        assert_eq!(created[0].body["channel_id"], "dmchan");
        oxibot_tests::wait::eventually("the post shows the final reply", || {
            mattermost.post_text("botpost1").as_deref() == Some("Hello from **the model**")
        })
        .await;
    });
    assert_eq!(mattermost.requests("POST", "/api/v4/posts").len(), 1, "the reply is one post");
    assert!(env.session_file("mattermost:dmchan").contains("hi there"), "the session is named after the channel");
}

#[test]
fn a_sigkilled_mattermost_plugin_comes_back_and_later_messages_get_their_reply() {
    let mattermost = FakeMattermost::start();
    let section = mattermost.config(json!({"enabled": true, "allowFrom": "*", "streaming": false}));
    let env = GatewayEnv::with_channels(json!({"mattermost": section}));
    let _gateway = env.start_with("mattermost");
    block_on(mattermost.wait_greeted(1));
    let pid = env.plugin_status("mattermost")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("mattermost");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the mattermost plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        mattermost.wait_greeted(2).await;
        mattermost.post(mattermost_post("p2", "dmchan", "ada", "are you there?"), "D").await;
        let created = mattermost.wait_requests("POST", "/api/v4/posts", 1).await;
        assert_eq!(created[0].body["message"], "still here");
    });
}

#[test]
fn a_signal_message_from_dm_allow_from_gets_the_models_reply_and_a_stranger_only_a_pairing_code() {
    let signal = FakeSignal::start();
    // nanobot's Signal keys: no top-level allowFrom, the channel's own list instead.
    let section = signal.config(json!({"enabled": true, "dm": {"policy": "allowlist", "allowFrom": ["+15551234567"]}}));
    let env = GatewayEnv::with_channels(json!({"signal": section}));
    let _gateway = env.start_with("signal");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        signal.wait_streams(1).await;
        signal.receive(signal_dm("+15557654321", "Eve", "let me in", 1_700_000_000_000)).await;
        let to_eve = signal.wait_calls("send", 1).await;
        assert_eq!(to_eve[0].params["recipient"], json!(["+15557654321"]));
        signal.receive(signal_dm("+15551234567", "Ada", "hi there", 1_700_000_000_100)).await;
        let sends = signal.wait_calls("send", 2).await;
        assert_eq!(
            sends[1].params,
            json!({"recipient": ["+15551234567"], "message": "Hello from the model", "textStyle": ["11:9:BOLD"]})
        );
    });
    let to_eve = signal.calls("send")[0].params["message"].as_str().unwrap().to_owned();
    assert!(to_eve.contains("oxibot pairing approve "), "the stranger got no pairing code: {to_eve}");
    assert_eq!(env.llm.requests().len(), 1);
    assert!(env.session_file("signal:+15551234567").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_signal_plugin_comes_back_and_later_messages_get_their_reply() {
    let signal = FakeSignal::start();
    let env = GatewayEnv::with_channels(json!({"signal": signal.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("signal");
    block_on(signal.wait_streams(1));
    let pid = env.plugin_status("signal")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("signal");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the signal plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        signal.wait_streams(2).await;
        signal.receive(signal_dm("+15551234567", "Ada", "are you there?", 1_700_000_000_200)).await;
        let sends = signal.wait_calls("send", 1).await;
        assert_eq!(sends[0].params["message"], "still here");
    });
}

#[test]
fn a_discord_direct_message_gets_the_models_reply_in_discord() {
    let discord = FakeDiscord::start();
    let env = GatewayEnv::with_channels(json!({"discord": discord.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("discord");
    env.llm.push(Reply::Text("Hello from the model".into()));
    block_on(async {
        discord.wait_until("the gateway identifies", |d| !d.identifies().is_empty()).await;
        discord.message_create(discord_dm("111", "dm-7", "42", "alice", "hi there"));
        discord.wait_until("the reply is posted", |d| !d.posts().is_empty()).await;
    });
    let post = &discord.posts()[0];
    assert!(post.path.ends_with("/channels/dm-7/messages"), "{}", post.path);
    assert_eq!(post.json["content"], "Hello from the model");
    assert_eq!(post.json["message_reference"]["message_id"], "111");
}

#[test]
fn a_telegram_message_gets_the_models_reply_in_telegram() {
    let telegram = FakeTelegram::start();
    let media = TempDir::new("telegram-media");
    let mut section = telegram.config(media.path());
    section["allowFrom"] = json!(["42"]);
    let env = GatewayEnv::with_channels(json!({"telegram": section}));
    let _gateway = env.start_with("telegram");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    telegram.push_message(private_text(5, &telegram_user(42, "Ada", "ada"), "hi there"));
    // The reply streams: sent with the first delta, then edited into the final text.
    let final_text =
        block_on(telegram.wait_for("editMessageText", |body| body["text"] == "Hello from <b>the model</b>"));
    assert_eq!((final_text["chat_id"].as_i64(), final_text["parse_mode"].as_str()), (Some(42), Some("HTML")));
    let first = &telegram.calls_of("sendMessage")[0];
    assert_eq!(first["chat_id"], 42);
}

// Issue 25, item 5: plugins wrote every line to stderr, which the kernel logged at INFO.
#[test]
fn a_channel_plugins_warning_is_in_the_gateway_log_at_warn_level() {
    let telegram = FakeTelegram::start();
    let media = TempDir::new("telegram-media");
    let mut section = telegram.config(media.path());
    section["groupPolicy"] = json!("sometimes");
    let env = GatewayEnv::with_channels(json!({"telegram": section}));
    let _gateway = env.start_with("telegram");
    let warned = || env.gateway_log().lines().any(|line| line.contains("unknown groupPolicy"));
    assert!(wait_until(Duration::from_secs(10), warned), "no warning logged: {}", env.gateway_log());
    let log = env.gateway_log();
    let line = log.lines().find(|line| line.contains("unknown groupPolicy")).unwrap_or_default();
    assert!(line.contains(" WARN ") && line.contains("telegram"), "{line}");
}

#[test]
fn a_websocket_client_gets_the_reply_streamed_then_whole() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let _gateway = env.start_with("websocket");
    env.llm.push(Reply::Text("Hello from the model".into()));
    block_on(async {
        let (mut socket, _) = tokio_tungstenite::connect_async(env.ws_url(port, "room1")).await.unwrap();
        socket.send(WsMessage::text(json!({"type": "message", "text": "hi there"}).to_string())).await.unwrap();
        let mut kinds = Vec::new();
        loop {
            let frame = socket.next().await.unwrap().unwrap();
            let WsMessage::Text(text) = frame else { continue };
            let frame: Value = serde_json::from_str(&text).unwrap();
            kinds.push(frame["type"].as_str().unwrap().to_owned());
            if frame["type"] == "message" {
                assert_eq!(frame["text"], "Hello from the model");
                break;
            }
        }
        assert!(kinds.contains(&"accepted".to_owned()) && kinds.contains(&"delta".to_owned()), "{kinds:?}");
    });
}

#[test]
fn the_api_channel_answers_a_standard_openai_request_whole_and_streamed() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port, "allowFrom": "*"}}));
    let _gateway = env.start_with("api");
    env.llm.push(Reply::Text("Hello from the model".into()));
    env.llm.push(Reply::Text("Streamed hello".into()));
    let key = env.api_authorization();
    let auth = [("Authorization", key.as_str())];
    block_on(async {
        let models = http::get(port, "/v1/models", &auth).await.json().await;
        assert_eq!(models["object"], "list");
        let body = json!({"model": "oxibot", "messages": [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}], "temperature": 0.2, "session_id": "s1"});
        let reply = http::post_json(port, "/v1/chat/completions", &auth, &body).await.json().await;
        assert_eq!(reply["object"], "chat.completion");
        assert_eq!(reply["choices"][0]["message"]["content"], "Hello from the model");

        let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "again"}], "stream": true, "session_id": "s1"});
        let mut stream = http::post_json(port, "/v1/chat/completions", &auth, &body).await;
        let mut text = String::new();
        let mut done = false;
        while let Some(event) = stream.next_event().await {
            if event == "[DONE]" {
                done = true;
                break;
            }
            let chunk: Value = serde_json::from_str(&event).unwrap();
            text.push_str(chunk["choices"][0]["delta"]["content"].as_str().unwrap_or_default());
        }
        assert!(done, "the stream ends with [DONE]");
        assert_eq!(text, "Streamed hello");
    });
    let session = env.session_file("api:s1");
    assert!(session.contains("\"hi\"") && session.contains("\"again\""), "one session keeps both turns: {session}");
}

/// The official `openai` Python client against the API channel of a real gateway: both
/// endpoints, plain and streamed, each reporting the scripted LLM's real token counts.
#[test]
fn the_official_openai_client_reads_real_token_counts_from_completions_and_responses_plain_and_streamed() {
    use oxibot_tests::llm::{CACHED_TOKENS, COMPLETION_TOKENS, PROMPT_TOKENS};
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port}}));
    let _gateway = env.start_with("api");
    for text in ["Plain chat answer", "Streamed chat answer", "Plain responses answer", "Streamed responses answer"] {
        env.llm.push(Reply::Text(text.into()));
    }
    oxibot_tests::needs::python_module("openai", "openai");
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/openai_client.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .arg("py-client")
        .arg(env.secret("api"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "is the openai package installed (python3 -m pip install openai)? stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (prompt, completion, cached) = (PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS);
    let chat_usage =
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
    for (key, text) in [("chat", "Plain chat answer"), ("chat_stream", "Streamed chat answer")] {
        assert_eq!(got[key]["text"], text, "{got:#}");
        let usage = &got[key]["usage"];
        for field in ["prompt_tokens", "completion_tokens", "total_tokens"] {
            assert_eq!(usage[field], chat_usage[field], "{key}: {usage}");
        }
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], cached, "{key}: {usage}");
    }
    assert_eq!(got["responses"]["text"], "Plain responses answer");
    assert_eq!(got["responses"]["status"], "completed");
    assert_eq!(got["responses_stream"]["text"], "Streamed responses answer");
    assert_eq!(got["responses_stream"]["final_text"], "Streamed responses answer");
    let kinds = got["responses_stream"]["kinds"].as_array().unwrap();
    assert_eq!(kinds.first().unwrap(), "response.created");
    assert!(kinds.contains(&json!("response.output_text.delta")), "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), "response.completed");
    for key in ["responses", "responses_stream"] {
        let usage = &got[key]["usage"];
        assert_eq!(usage["input_tokens"], prompt, "{key}: {usage}");
        assert_eq!(usage["output_tokens"], completion, "{key}: {usage}");
        assert_eq!(usage["total_tokens"], prompt + completion, "{key}: {usage}");
        assert_eq!(usage["input_tokens_details"]["cached_tokens"], cached, "{key}: {usage}");
    }
    let session = env.session_file("api:py-client");
    assert!(session.contains("responses, streamed"), "all four turns are in one session: {session}");
}

#[test]
fn one_gateway_with_all_five_channels_answers_in_each_and_stops_cleanly_on_sigterm() {
    let (telegram, discord, slack) = (FakeTelegram::start(), FakeDiscord::start(), FakeSlack::start());
    let media = TempDir::new("all-media");
    let (ws_port, api_port) = (free_port(), free_port());
    let env = GatewayEnv::with_channels(json!({
        "telegram": telegram.config(media.path()),
        "discord": discord.config(json!({"enabled": true, "allowFrom": "*"})),
        "slack": slack.config(json!({"enabled": true, "allowFrom": "*"})),
        "websocket": {"enabled": true, "port": ws_port, "allowFrom": "*"},
        "api": {"enabled": true, "port": api_port, "allowFrom": "*"}
    }));
    let mut gateway = env.start_with("telegram");
    for channel in ["discord", "slack", "websocket", "api"] {
        env.wait_running(channel);
    }
    let reply = |n: usize| Reply::Text(format!("answer {n}"));
    block_on(async {
        env.llm.push(reply(1));
        telegram.push_message(private_text(5, &telegram_user(42, "Ada", "ada"), "from telegram"));
        telegram.wait_for("editMessageText", |b| b["text"] == "answer 1").await;

        env.llm.push(reply(2));
        discord.wait_until("identified", |d| !d.identifies().is_empty()).await;
        discord.message_create(discord_dm("111", "dm-7", "42", "alice", "from discord"));
        discord.wait_until("posted", |d| d.posts().iter().any(|p| p.json["content"] == "answer 2")).await;

        env.llm.push(reply(3));
        slack.wait_connections(1).await;
        slack.deliver("env-1", direct_message("D1", "U42", "from slack", "1700000000.000100"), 0).await;
        slack.wait_calls("chat.postMessage", 1).await;

        env.llm.push(reply(4));
        let (mut socket, _) = tokio_tungstenite::connect_async(env.ws_url(ws_port, "room")).await.unwrap();
        socket.send(WsMessage::text(json!({"type": "message", "text": "from websocket"}).to_string())).await.unwrap();
        loop {
            let Some(Ok(WsMessage::Text(text))) = socket.next().await else { panic!("the websocket closed") };
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["type"] == "message" {
                assert_eq!(frame["text"], "answer 4");
                break;
            }
        }

        env.llm.push(reply(5));
        let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "from api"}]});
        let key = env.api_authorization();
        let answer =
            http::post_json(api_port, "/v1/chat/completions", &[("Authorization", &key)], &body).await.json().await;
        assert_eq!(answer["choices"][0]["message"]["content"], "answer 5");
    });
    assert_eq!(slack.calls("chat.postMessage")[0].body["text"], "answer 3");
    assert!(gateway.terminate_and_wait().success(), "SIGTERM ends the gateway with status 0");
}

#[test]
fn a_default_api_channel_answers_a_local_client_without_a_pairing_code() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port}}));
    let _gateway = env.start_with("api");
    env.llm.push(Reply::Text("Hello, local client".into()));
    let key = env.api_authorization();
    let reply = block_on(async {
        let body = json!({"model": "oxibot", "messages": [{"role": "user", "content": "hi"}]});
        http::post_json(port, "/v1/chat/completions", &[("Authorization", &key)], &body).await.json().await
    });
    assert_eq!(reply["choices"][0]["message"]["content"], "Hello, local client");
}

/// Issue 29, item 7c: a reply the turn sent with the `message` tool reached an API client
/// with all-zero `usage`, though the model call that wrote it had cost tokens.
#[test]
fn an_api_reply_sent_with_the_message_tool_carries_the_turns_token_counts() {
    use oxibot_tests::llm::{CACHED_TOKENS, COMPLETION_TOKENS, PROMPT_TOKENS};
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"api": {"enabled": true, "port": port}}));
    let _gateway = env.start_with("api");
    env.llm.push(Reply::ToolCalls(vec![("message".into(), json!({"content": "Sent by the tool."}).to_string())]));
    env.llm.push(Reply::Text("Done.".into()));
    let key = env.api_authorization();
    let reply = block_on(async {
        let body =
            json!({"model": "oxibot", "session_id": "s-tool", "messages": [{"role": "user", "content": "tell me"}]});
        http::post_json(port, "/v1/chat/completions", &[("Authorization", &key)], &body).await.json().await
    });
    assert_eq!(reply["choices"][0]["message"]["content"], "Sent by the tool.", "{reply:#}");
    let usage = &reply["usage"];
    assert_eq!(usage["prompt_tokens"], PROMPT_TOKENS, "the model call that asked for the send: {usage}");
    assert_eq!(usage["completion_tokens"], COMPLETION_TOKENS, "{usage}");
    assert_eq!(usage["total_tokens"], PROMPT_TOKENS + COMPLETION_TOKENS, "{usage}");
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], CACHED_TOKENS, "{usage}");
}

#[test]
fn a_default_websocket_channel_answers_a_local_client_without_a_pairing_code() {
    let port = free_port();
    let env = GatewayEnv::with_channels(json!({"websocket": {"enabled": true, "port": port}}));
    let _gateway = env.start_with("websocket");
    env.llm.push(Reply::Text("Hello, socket".into()));
    block_on(async {
        let (mut socket, _) = tokio_tungstenite::connect_async(env.ws_url(port, "r1")).await.unwrap();
        socket.send(WsMessage::text(json!({"type": "message", "text": "hi"}).to_string())).await.unwrap();
        loop {
            let WsMessage::Text(text) = socket.next().await.unwrap().unwrap() else { continue };
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["type"] == "message" {
                assert_eq!(frame["text"], "Hello, socket");
                break;
            }
        }
    });
}

#[test]
fn a_wecom_message_gets_the_models_reply_streamed_on_its_callback() {
    let wecom = FakeWeCom::start();
    let env = GatewayEnv::with_channels(json!({"wecom": wecom.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("wecom");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        wecom.wait_subscriptions(1).await;
        wecom.deliver("req-1", wecom_dm("msg-1", "ada", "hi there")).await;
        let replies = wecom.wait_finished_reply("req-1").await;
        assert_eq!(replies.last().unwrap().stream_content(), "Hello from **the model**");
    });
    assert!(wecom.frames("aibot_send_msg").is_empty(), "the reply answered the callback");
    assert!(env.session_file("wecom:ada").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_wecom_plugin_comes_back_and_later_messages_get_their_reply() {
    let wecom = FakeWeCom::start();
    let env = GatewayEnv::with_channels(json!({"wecom": wecom.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("wecom");
    block_on(wecom.wait_subscriptions(1));
    let pid = env.plugin_status("wecom")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("wecom");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the wecom plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        wecom.wait_subscriptions(2).await;
        wecom.deliver("req-2", wecom_dm("msg-2", "ada", "are you there?")).await;
        let replies = wecom.wait_finished_reply("req-2").await;
        assert_eq!(replies.last().unwrap().stream_content(), "still here");
    });
}

#[test]
fn a_qq_message_gets_the_models_reply_as_a_passive_reply() {
    let qq = FakeQq::start();
    let env = GatewayEnv::with_channels(json!({"qq": qq.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("qq");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        qq.wait_ready(1).await;
        qq.dispatch("C2C_MESSAGE_CREATE", qq_dm("msg-1", "U_ADA", "hi there")).await;
        let sends = qq.wait_sends(&qq_user_messages("U_ADA"), 2).await;
        let texts: Vec<&str> = sends.iter().map(|send| send.text()).collect();
        assert!(texts.contains(&"⏳ Processing..."), "nanobot's notice: {texts:?}");
        assert!(texts.contains(&"Hello from **the model**"), "{texts:?}");
        assert!(sends.iter().all(|send| send.body["msg_id"] == "msg-1"), "both are passive replies");
    });
    assert!(env.session_file("qq:U_ADA").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_qq_plugin_comes_back_and_later_messages_get_their_reply() {
    let qq = FakeQq::start();
    let section = qq.config(json!({"enabled": true, "allowFrom": "*", "ackMessage": ""}));
    let env = GatewayEnv::with_channels(json!({"qq": section}));
    let _gateway = env.start_with("qq");
    block_on(qq.wait_ready(1));
    let pid = env.plugin_status("qq")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("qq");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the qq plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        qq.wait_ready(2).await;
        qq.dispatch("C2C_MESSAGE_CREATE", qq_dm("msg-2", "U_ADA", "are you there?")).await;
        let sends = qq.wait_sends(&qq_user_messages("U_ADA"), 1).await;
        assert_eq!(sends[0].text(), "still here");
    });
}

#[test]
fn an_email_gets_the_models_reply_by_mail_in_its_thread() {
    let fake = FakeMail::start();
    let env = GatewayEnv::with_channels(json!({"email": fake.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("email");
    env.llm.push(Reply::Text("Hello from **the model**".into()));
    block_on(async {
        fake.wait_logins(1).await;
        let uid = fake.deliver(&verified_mail("ada@sender.test", "<m1@sender.test>", "Question", "hi there"));
        let sent = fake.wait_sent(1).await;
        assert_eq!(sent[0].to, ["ada@sender.test"]);
        assert_eq!(sent[0].body(), "Hello from **the model**");
        assert_eq!(sent[0].header("In-Reply-To").as_deref(), Some("<m1@sender.test>"));
        fake.wait_seen(uid).await;
    });
    assert!(env.session_file("email:ada@sender.test").contains("hi there"), "the session is named after the sender");
}

#[test]
fn a_sigkilled_email_plugin_comes_back_and_later_mail_gets_its_reply() {
    let fake = FakeMail::start();
    let env = GatewayEnv::with_channels(json!({"email": fake.config(json!({"enabled": true, "allowFrom": "*"}))}));
    let _gateway = env.start_with("email");
    block_on(fake.wait_logins(1));
    let pid = env.plugin_status("email")["pid"].as_u64().unwrap();
    sigkill(pid as u32);
    let restarted = || {
        let status = env.plugin_status("email");
        status["state"] == "running" && status["pid"].as_u64().is_some_and(|new| new != pid)
    };
    assert!(wait_until(Duration::from_secs(15), restarted), "the email plugin did not come back");
    env.llm.push(Reply::Text("still here".into()));
    block_on(async {
        fake.wait_logins(2).await;
        fake.deliver(&verified_mail("ada@sender.test", "<m2@sender.test>", "Again", "are you there?"));
        let sent = fake.wait_sent(1).await;
        assert_eq!(sent[0].body(), "still here");
    });
}
