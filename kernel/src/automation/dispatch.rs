//! The kernel's own requests to whoever runs it (the gateway, the interactive agent): run a
//! turn the kernel started itself, or send a message to a chat. Tools and schedulers hold a
//! [`Dispatcher`]; the runner drains the [`Request`]s, because only it knows the sessions and
//! the channels that can deliver.

use tokio::sync::{mpsc, oneshot};

use crate::provider::Usage;
use crate::session::SessionKey;
use crate::turn::builtin::TurnSource;

/// Something the kernel asks its runner to do.
#[derive(Debug)]
pub enum Request {
    /// Run a turn in a session on a message the kernel wrote.
    Run(RunRequest),
    /// Send a message to a chat.
    Send(SendRequest),
}

/// A turn to run: after the session's current turn, with the reply delivered to the
/// session's own chat when `deliver` is set.
#[derive(Debug)]
pub struct RunRequest {
    /// The session (`channel:chat_id`).
    pub key: SessionKey,
    /// The message the turn answers.
    pub text: String,
    /// Why the turn runs.
    pub source: TurnSource,
    /// The cron job that asks for it, whose id the usage log records.
    pub job: Option<String>,
    /// The model the source asks for instead of the configured one.
    pub model: Option<String>,
    /// Whether the reply goes to the session's chat (a heartbeat decides for itself).
    pub deliver: bool,
    /// Told the reply text, or why there is none.
    pub done: Option<oneshot::Sender<Result<String, String>>>,
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// This chat of this channel.
    Chat {
        /// The channel's name (`telegram`, `websocket`, …).
        channel: String,
        /// The chat within it.
        chat_id: String,
    },
    /// The chat a person wrote from most recently.
    LastActive,
}

/// A message to send.
#[derive(Debug)]
pub struct SendRequest {
    /// Where to.
    pub target: Target,
    /// The text (Markdown).
    pub content: String,
    /// Local paths of files to attach.
    pub media: Vec<String>,
    /// The session whose turn sent it, if any (a send to that session's own chat is already in
    /// its conversation, as the tool call).
    pub from: Option<SessionKey>,
    /// That turn's token counts so far; a send to its own chat carries them as the reply's
    /// `usage`, as the turn's own reply would have.
    pub usage: Option<Usage>,
    /// Told whether the channel took it.
    pub done: oneshot::Sender<Result<(), String>>,
}

/// A handle for making requests; cheap to clone.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    requests: mpsc::UnboundedSender<Request>,
}

impl Dispatcher {
    /// A dispatcher and the receiver its runner drains.
    pub fn channel() -> (Dispatcher, mpsc::UnboundedReceiver<Request>) {
        let (requests, receiver) = mpsc::unbounded_channel();
        (Dispatcher { requests }, receiver)
    }

    /// Asks for a turn; the reply (or why there is none) comes through `done` when given.
    /// `false` when nobody drains the requests any more.
    pub fn run(&self, request: RunRequest) -> bool {
        self.requests.send(Request::Run(request)).is_ok()
    }

    /// Sends `content` to `target` without waiting to learn whether it was delivered;
    /// `false` when the runner is gone.
    pub fn send_and_forget(&self, target: Target, content: String) -> bool {
        let (done, _unheard) = oneshot::channel();
        let request = SendRequest { target, content, media: Vec::new(), from: None, usage: None, done };
        self.requests.send(Request::Send(request)).is_ok()
    }

    /// Sends a message and waits until its channel took it or gave up.
    pub async fn send(
        &self,
        target: Target,
        content: String,
        media: Vec<String>,
        from: Option<SessionKey>,
    ) -> Result<(), String> {
        self.send_from_turn(target, content, media, from, None).await
    }

    /// [`Dispatcher::send`] for a turn's tool call, with the turn's token counts so far.
    pub async fn send_from_turn(
        &self,
        target: Target,
        content: String,
        media: Vec<String>,
        from: Option<SessionKey>,
        usage: Option<Usage>,
    ) -> Result<(), String> {
        let (done, answer) = oneshot::channel();
        let request = SendRequest { target, content, media, from, usage, done };
        self.requests.send(Request::Send(request)).map_err(|_| "the kernel is shutting down".to_owned())?;
        answer.await.unwrap_or_else(|_| Err("the message was dropped before it was sent".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_send_waits_for_its_runner_to_answer() {
        let (dispatcher, mut requests) = Dispatcher::channel();
        let runner = tokio::spawn(async move {
            let Some(Request::Send(request)) = requests.recv().await else { panic!("expected a send") };
            assert_eq!(request.target, Target::LastActive);
            let _ = request.done.send(Err("no chat yet".to_owned()));
        });
        let answer = dispatcher.send(Target::LastActive, "hi".into(), Vec::new(), None).await;
        assert_eq!(answer, Err("no chat yet".to_owned()));
        runner.await.unwrap();
    }

    #[tokio::test]
    async fn a_send_nobody_drains_fails_with_a_reason() {
        let (dispatcher, requests) = Dispatcher::channel();
        drop(requests);
        let answer = dispatcher.send(Target::LastActive, "hi".into(), Vec::new(), None).await;
        assert!(answer.unwrap_err().contains("shutting down"));
    }
}
