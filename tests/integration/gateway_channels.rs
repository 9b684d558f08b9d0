//! Each real channel plugin through the real `oxibot gateway`, against a local fake of its
//! service and the scripted LLM: a user's message produces the model's reply in that channel.

use oxibot_tests::fakes_discord::{direct_message as discord_dm, FakeDiscord};
use oxibot_tests::fakes_slack::{direct_message, FakeSlack};
use oxibot_tests::llm::Reply;
use serde_json::json;

use super::gateway::GatewayEnv;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

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
    let user = env.llm.requests()[0]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(user.contains("hi there"), "{user}");
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
