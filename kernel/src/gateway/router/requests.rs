//! The kernel's own requests, served by the router: turns the kernel starts itself (a cron
//! job, a helper's result, the heartbeat) and messages the `message` tool sends. Both go
//! through the same delivery as any reply (retried until acknowledged, a final failure
//! recorded in the session). A `message` send waits only for its first attempt: its turn is
//! told at once when the channel did not take it, while the retries go on.

use std::rc::Rc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::Router;
use super::reply::Reply;
use crate::agent::requested_answer;
use crate::automation::dispatch::{Request, RunRequest, SendRequest, Target};
use crate::session::SessionKey;

impl Router {
    /// Serves the kernel's requests until every [`crate::automation::dispatch::Dispatcher`] is
    /// gone.
    pub async fn serve_requests(self: Rc<Self>, mut requests: mpsc::UnboundedReceiver<Request>) {
        while let Some(request) = requests.recv().await {
            let router = self.clone();
            match request {
                Request::Run(run) => actix::spawn(async move { router.run_requested(run).await }),
                Request::Send(send) => actix::spawn(async move { router.send_requested(send).await }),
            };
        }
    }

    async fn run_requested(self: Rc<Self>, request: RunRequest) {
        if !self.accepting.get() {
            if let Some(done) = request.done {
                let _ = done.send(Err("the gateway is shutting down".to_owned()));
            }
            return;
        }
        self.in_flight.set(self.in_flight.get() + 1);
        self.after_resume().await;
        let (channel, chat_id) = (request.key.channel().to_owned(), request.key.chat_id().to_owned());
        let deliver = request.deliver && self.serves(&channel);
        let (events, stream_id) = if deliver {
            // Unattended turns never ask (see `turn::approval::gate`); nobody is bound.
            self.stream_to(&channel, &chat_id, None)
        } else {
            let (events, mut rx) = mpsc::unbounded_channel();
            actix::spawn(async move { while rx.recv().await.is_some() {} });
            (events, None)
        };
        let reply = self.manager.run_request(&request, events).await;
        let answer = requested_answer(&reply);
        if deliver {
            let metadata = self.chat_metadata(&channel, &chat_id);
            self.deliver_reply(&channel, &chat_id, reply, stream_id, metadata).await;
        } else {
            self.sent_by_tool.borrow_mut().remove(&request.key);
            if request.deliver {
                tracing::info!(session = %request.key, "no channel of this gateway serves the session; the reply stays in the session");
            }
        }
        if let Some(done) = request.done {
            let _ = done.send(answer);
        }
        self.in_flight.set(self.in_flight.get() - 1);
    }

    async fn send_requested(self: Rc<Self>, request: SendRequest) {
        let result = self.send_message(&request).await;
        let _ = request.done.send(result);
    }

    async fn send_message(self: &Rc<Self>, request: &SendRequest) -> Result<(), String> {
        let (channel, chat_id, metadata) = match &request.target {
            Target::Chat { channel, chat_id } => {
                (channel.clone(), chat_id.clone(), self.chat_metadata(channel, chat_id))
            }
            Target::LastActive => self
                .last_active
                .borrow()
                .clone()
                .ok_or_else(|| "nobody has written to the assistant since the gateway started".to_owned())?,
        };
        if !self.serves(&channel) {
            let running = self.channel_names();
            return Err(format!("no channel named '{channel}' runs in this gateway (running: {})", running.join(", ")));
        }
        let key = SessionKey::new(&channel, &chat_id);
        self.in_flight.set(self.in_flight.get() + 1);
        let own_chat = request.from.as_ref() == Some(&key);
        let mut metadata = metadata;
        if let Some(usage) = request.usage.as_ref().filter(|_| own_chat) {
            // The reply ends the turn's request for this chat, as the turn's answer would have.
            super::with_usage(&mut metadata, usage);
        }
        let mut reply = Reply::new(&channel, &chat_id, request.content.clone(), None, metadata);
        reply.media = request.media.clone();
        reply.record_late_in = Some(key.clone());
        let sent = self.deliver(reply).await;
        self.in_flight.set(self.in_flight.get() - 1);
        if let Err(error) = sent {
            let hours = self.retry_policy().window.as_secs_f64() / 3600.0;
            return Err(format!(
                "the channel did not take it ({error}); the gateway retries it for up to {hours:.1} h, and says so on a later \
                 turn if it fails for good"
            ));
        }
        if own_chat {
            // Already in that session, as the tool call; its turn's reply is not sent twice.
            self.sent_by_tool.borrow_mut().insert(key);
        } else {
            self.manager.record_sent(&key, &request.content);
        }
        Ok(())
    }

    /// The channel's details of the last message from `chat_id` (thread, reply-to), when it
    /// is the chat a person wrote from most recently; none otherwise.
    fn chat_metadata(&self, channel: &str, chat_id: &str) -> Value {
        match &*self.last_active.borrow() {
            Some((c, id, metadata)) if c == channel && id == chat_id => metadata.clone(),
            _ => Value::Object(Default::default()),
        }
    }
}
