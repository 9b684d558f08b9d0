//! The `message` built-in tool: the assistant sends a message on its own — to the chat it is
//! talking in, or to another channel's chat — through the gateway's delivery (retried until
//! the channel acknowledges it). Normal replies stay plain text; this is for proactive and
//! cross-channel sends.

use std::path::{Path, PathBuf};

use oxibot_proto::ToolSpec;
use serde_json::{Value, json};

use super::dispatch::{Dispatcher, Target};
use crate::session::SessionKey;
use crate::turn::builtin::{BuiltinContext, BuiltinTool, ToolFuture, ToolReply};

/// The tool's name, as models know it.
pub const NAME: &str = "message";

/// Sends messages through a [`Dispatcher`].
pub struct MessageTool {
    dispatcher: Dispatcher,
    /// Where attachments may come from while the workspace restriction is on, besides the
    /// workspace (the media directory channels save downloads to).
    media_dir: Option<PathBuf>,
}

impl MessageTool {
    /// A tool sending through `dispatcher`; `media_dir` is also allowed for attachments.
    pub fn new(dispatcher: Dispatcher, media_dir: Option<PathBuf>) -> MessageTool {
        MessageTool { dispatcher, media_dir }
    }

    async fn send(&self, arguments: Value, context: &BuiltinContext) -> ToolReply {
        let content = match arguments.get("content").and_then(Value::as_str) {
            Some(text) if !text.trim().is_empty() => text.to_owned(),
            _ => return ToolReply::error("`content` is required: the text of the message"),
        };
        let target = match target_of(&arguments, context) {
            Ok(target) => target,
            Err(problem) => return ToolReply::error(problem),
        };
        let media = match self.attachments(&arguments, context) {
            Ok(media) => media,
            Err(problem) => return ToolReply::error(problem),
        };
        let from = context.call.session_key.as_deref().map(SessionKey::from);
        let (channel, chat_id) = match &target {
            Target::Chat { channel, chat_id } => (channel.clone(), chat_id.clone()),
            Target::LastActive => (String::new(), String::new()),
        };
        let attached = media.len();
        match self.dispatcher.send_from_turn(target, content, media, from, Some(context.usage)).await {
            Ok(()) if attached > 0 => {
                ToolReply::ok(format!("Message sent to {channel}:{chat_id} with {attached} attachment(s)."))
            }
            Ok(()) => ToolReply::ok(format!("Message sent to {channel}:{chat_id}.")),
            Err(problem) => ToolReply::error(format!("the message was not delivered: {problem}")),
        }
    }

    /// The `media` paths, resolved against the workspace; each must be a file, and inside the
    /// workspace or the media directory while the restriction is on.
    fn attachments(&self, arguments: &Value, context: &BuiltinContext) -> Result<Vec<String>, String> {
        let Some(list) = arguments.get("media").filter(|m| !m.is_null()) else { return Ok(Vec::new()) };
        let Some(list) = list.as_array() else { return Err("`media` must be a list of file paths".to_owned()) };
        let workspace = Path::new(&context.call.workspace);
        let mut paths = Vec::with_capacity(list.len());
        for item in list {
            let Some(text) = item.as_str() else { return Err("`media` must be a list of file paths".to_owned()) };
            let path = workspace.join(crate::paths::expand_tilde(Path::new(text)));
            let real = path.canonicalize().map_err(|error| format!("cannot attach {text}: {error}"))?;
            if !real.is_file() {
                return Err(format!("cannot attach {text}: not a file"));
            }
            if context.call.restrict_to_workspace && !self.may_attach(&real, workspace) {
                return Err(format!(
                    "cannot attach {text}: only files inside the workspace can be sent while tools are restricted to it"
                ));
            }
            paths.push(real.display().to_string());
        }
        Ok(paths)
    }

    fn may_attach(&self, real: &Path, workspace: &Path) -> bool {
        let inside = |dir: &Path| dir.canonicalize().is_ok_and(|dir| real.starts_with(dir));
        inside(workspace) || self.media_dir.as_deref().is_some_and(inside)
    }
}

/// The chat to send to: `channel` and `chat_id` when given, else the calling session's chat.
fn target_of(arguments: &Value, context: &BuiltinContext) -> Result<Target, String> {
    let given = |key: &str| arguments.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let channel = given("channel").or(context.call.channel.as_deref());
    let chat_id = given("chat_id").or(context.call.chat_id.as_deref());
    match (channel, chat_id) {
        (Some(channel), Some(chat_id)) => Ok(Target::Chat { channel: channel.to_owned(), chat_id: chat_id.to_owned() }),
        _ => Err("say where to send it: `channel` and `chat_id`".to_owned()),
    }
}

impl BuiltinTool for MessageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_owned(),
            description: "Send a message on your own (a notification, another channel's chat); answer this chat \
                          normally."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "channel": {"type": "string"},
                    "chat_id": {"type": "string"},
                    "media": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["content"]
            }),
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        }
    }

    fn call<'a>(&'a self, arguments: Value, context: &'a BuiltinContext) -> ToolFuture<'a> {
        Box::pin(self.send(arguments, context))
    }
}

#[cfg(test)]
mod tests {
    use oxibot_proto::CallContext;

    use super::*;
    use crate::automation::dispatch::Request;
    use crate::testing::TempDir;

    fn context(workspace: &Path) -> BuiltinContext {
        BuiltinContext {
            call: CallContext {
                session_key: Some("telegram:42".into()),
                channel: Some("telegram".into()),
                chat_id: Some("42".into()),
                workspace: workspace.display().to_string(),
                restrict_to_workspace: true,
                idempotency_key: None,
            },
            ..BuiltinContext::default()
        }
    }

    /// Runs one call while answering the dispatcher's send with `answer`; returns the reply
    /// and the target the send went to.
    async fn call(arguments: Value, workspace: &Path, answer: Result<(), String>) -> (ToolReply, Option<Target>) {
        let (dispatcher, mut requests) = Dispatcher::channel();
        let tool = MessageTool::new(dispatcher, None);
        let ctx = context(workspace);
        let runner = async move {
            match requests.recv().await {
                Some(Request::Send(request)) => {
                    let _ = request.done.send(answer);
                    Some(request.target)
                }
                _ => None,
            }
        };
        let (reply, target) = tokio::join!(tool.call(arguments, &ctx), async {
            tokio::time::timeout(std::time::Duration::from_millis(200), runner).await.ok().flatten()
        });
        (reply, target)
    }

    #[tokio::test]
    async fn without_a_channel_the_message_goes_to_the_current_chat() {
        let dir = TempDir::new("message");
        let (reply, target) = call(json!({"content": "done!"}), dir.path(), Ok(())).await;
        assert!(!reply.is_error, "{}", reply.content);
        assert_eq!(target, Some(Target::Chat { channel: "telegram".into(), chat_id: "42".into() }));
    }

    #[tokio::test]
    async fn a_delivery_failure_is_an_error_the_model_reads() {
        let dir = TempDir::new("message");
        let arguments = json!({"content": "hi", "channel": "slack", "chat_id": "C1"});
        let (reply, _) = call(arguments, dir.path(), Err("no channel named slack runs here".into())).await;
        assert!(reply.is_error);
        assert!(reply.content.contains("no channel named slack"), "{}", reply.content);
    }

    #[tokio::test]
    async fn files_outside_the_workspace_are_not_attached_while_restricted() {
        let dir = TempDir::new("message-ws");
        let elsewhere = TempDir::new("message-outside");
        let outside = elsewhere.write("id_ed25519", "secret");
        let arguments = json!({"content": "here", "media": [outside.display().to_string()]});
        let (reply, target) = call(arguments, dir.path(), Ok(())).await;
        assert!(reply.is_error && reply.content.contains("inside the workspace"), "{}", reply.content);
        assert_eq!(target, None, "nothing was sent");
        std::fs::write(dir.path().join("chart.png"), b"png").unwrap();
        let (reply, _) = call(json!({"content": "here", "media": ["chart.png"]}), dir.path(), Ok(())).await;
        assert!(!reply.is_error, "{}", reply.content);
    }

    #[tokio::test]
    async fn an_empty_message_is_refused() {
        let dir = TempDir::new("message");
        let (reply, _) = call(json!({"content": "  "}), dir.path(), Ok(())).await;
        assert!(reply.is_error && reply.content.contains("`content` is required"));
    }
}
