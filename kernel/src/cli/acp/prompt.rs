//! `session/prompt`: one turn of an oxibot session, its events streamed to the editor as
//! `session/update` notifications until the turn's `stopReason`.

use std::rc::Rc;

use oxibot_kernel::agent::TurnReply;
use oxibot_kernel::session::SessionKey;
use oxibot_kernel::turn::runner::TurnEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::approver;
use super::kernels::Kernel;
use super::rpc::{Outbox, RpcError};
use super::updates::{self, ToolCalls};

/// The prompt's text: its text blocks, the texts of embedded resources and the addresses of
/// linked ones, in order.
pub fn text_of(prompt: &Value) -> Result<String, RpcError> {
    let blocks =
        prompt.as_array().ok_or_else(|| RpcError::invalid_params("\"prompt\" must be an array of content blocks"))?;
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match block["type"].as_str() {
            Some("text") => block["text"].as_str().map(str::to_owned),
            Some("resource_link") => block["uri"].as_str().map(|uri| format!("[{uri}]")),
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or("");
                resource["text"].as_str().map(|text| format!("{uri}:\n{text}"))
            }
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        return Err(RpcError::invalid_params("the prompt has no text"));
    }
    Ok(parts.join("\n"))
}

/// Runs one prompt in session `key` and answers with its `stopReason`.
pub async fn run(
    outbox: &Outbox,
    kernel: Rc<Kernel>,
    key: SessionKey,
    text: &str,
    number: u64,
) -> Result<Value, RpcError> {
    let (events, mut received) = mpsc::unbounded_channel();
    let mut stream =
        Stream { outbox, kernel: &kernel, key: &key, calls: ToolCalls::for_prompt(number), streamed: false };
    let turn = kernel.manager.send(key.clone(), text, events);
    tokio::pin!(turn);
    let reply = loop {
        tokio::select! {
            biased;
            Some(event) = received.recv() => stream.event(event),
            reply = &mut turn => break reply,
        }
    };
    // Every event was sent before the reply: pass on the ones not taken yet.
    while let Ok(event) = received.try_recv() {
        stream.event(event);
    }
    match reply {
        Ok(TurnReply::Stopped) => Ok(json!({"stopReason": "cancelled"})),
        Ok(reply) => {
            // A command's output, or an answer the provider did not stream, comes whole.
            if !stream.streamed && !reply.text().is_empty() {
                stream.update(updates::agent_chunk(reply.text()));
            }
            Ok(json!({"stopReason": "end_turn"}))
        }
        Err(error) => Err(RpcError::internal(error.to_string())),
    }
}

/// One prompt's events on their way to the editor.
struct Stream<'a> {
    outbox: &'a Outbox,
    kernel: &'a Rc<Kernel>,
    key: &'a SessionKey,
    /// The ids the editor knows this turn's tool calls by.
    calls: ToolCalls,
    /// Whether reply pieces were sent (else the whole reply goes at the end).
    streamed: bool,
}

impl Stream<'_> {
    fn update(&self, update: Value) {
        self.outbox.notify("session/update", json!({"sessionId": self.key.as_str(), "update": update}));
    }

    fn event(&mut self, event: TurnEvent) {
        match event {
            TurnEvent::Delta(piece) => {
                self.streamed = true;
                self.update(updates::agent_chunk(&piece));
            }
            // ACP cannot take back what was shown: the retried reply follows what came before.
            TurnEvent::Restart => tracing::info!("the provider retried after partial output"),
            TurnEvent::ToolStarted { name, arguments } => {
                let id = self.calls.start(&name);
                let workspace = self.kernel.services().workspace();
                self.update(updates::tool_call(&id, &name, &arguments, "pending", workspace));
                self.update(updates::tool_status(&id, "in_progress"));
            }
            TurnEvent::ApprovalRequested(request) => {
                let id = self.calls.ask_about(&request.tool).unwrap_or_else(|| request.code.clone());
                let approvals = self.kernel.services().approvals().clone();
                actix::spawn(approver::ask(self.outbox.clone(), approvals, self.key.clone(), id, request));
            }
            TurnEvent::ToolFinished { name, is_error } => {
                if let Some(id) = self.calls.finish(&name) {
                    self.update(updates::tool_status(&id, if is_error { "failed" } else { "completed" }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_reads_as_its_texts_and_resources_in_order() {
        let prompt = json!([
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}},
            {"type": "image", "data": "", "mimeType": "image/png"}
        ]);
        assert_eq!(text_of(&prompt).unwrap(), "look at\n[file:///w/a.rs]\nfile:///w/b.rs:\nfn b() {}");
        assert_eq!(text_of(&json!([])).unwrap_err().code, super::super::rpc::INVALID_PARAMS);
        assert_eq!(text_of(&json!("hi")).unwrap_err().code, super::super::rpc::INVALID_PARAMS);
    }
}
