//! The tasks this server knows: one per message a client sent, in the session its contextId
//! names, with its state, its reply so far, and the requests watching it. The kernel's replies
//! find their task by the `request_id` the inbound carried (the kernel copies the inbound's
//! metadata onto its reply); streamed pieces find it by session and stream, as the kernel
//! answers one session's messages in order.
//!
//! The table is behind a plain mutex held only for short, non-async updates. It keeps the last
//! [`MAX_TASKS`] tasks; an older one that has ended is forgotten (`GetTask` then says so).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::rpc::RpcError;
use crate::wire::{self, TaskState};

/// Most tasks remembered.
pub const MAX_TASKS: usize = 1000;

/// What a watching request hears about its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEvent {
    /// A piece of the reply.
    Delta(String),
    /// The task ended in `state`, its whole reply `text`.
    Ended {
        /// The final state.
        state: TaskState,
        /// The whole reply (or why it failed).
        text: String,
    },
}

/// One task.
#[derive(Debug)]
struct Task {
    context_id: String,
    /// The inbound id its message went to the kernel with.
    request_id: String,
    state: TaskState,
    /// The client's message.
    message: Value,
    /// The reply: the pieces streamed so far, then the whole of it.
    reply: String,
    /// The kernel's stream whose pieces this task receives, once one started.
    stream_id: Option<u64>,
    /// Whether the kernel's reply came (its turn is over, whatever the task's state).
    answered: bool,
    /// Requests waiting for its events.
    watchers: Vec<mpsc::UnboundedSender<TaskEvent>>,
}

/// Every task, by id.
#[derive(Default)]
pub struct Tasks {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Task>,
    /// Task ids, oldest first.
    order: VecDeque<String>,
    /// Inbound id → task id.
    by_request: HashMap<String, String>,
    /// Inbound ids of `/stop`s sent for cancels, and where their replies go.
    controls: HashMap<String, oneshot::Sender<String>>,
}

impl Tasks {
    /// Records a new task for `message` in `context_id`, sent to the kernel as `request_id`.
    pub fn create(&self, task_id: &str, context_id: &str, request_id: &str, message: Value) {
        let mut inner = self.lock();
        inner.forget_old();
        let task = Task {
            context_id: context_id.to_owned(),
            request_id: request_id.to_owned(),
            state: TaskState::Submitted,
            message,
            reply: String::new(),
            stream_id: None,
            answered: false,
            watchers: Vec::new(),
        };
        inner.tasks.insert(task_id.to_owned(), task);
        inner.order.push_back(task_id.to_owned());
        inner.by_request.insert(request_id.to_owned(), task_id.to_owned());
    }

    /// Marks a task as being worked on once the kernel accepted its message.
    pub fn working(&self, task_id: &str) {
        if let Some(task) = self.lock().tasks.get_mut(task_id).filter(|task| task.state == TaskState::Submitted) {
            task.state = TaskState::Working;
        }
    }

    /// The events of a task from now on; `None` when there is no such task.
    pub fn watch(&self, task_id: &str) -> Option<mpsc::UnboundedReceiver<TaskEvent>> {
        let mut inner = self.lock();
        let task = inner.tasks.get_mut(task_id)?;
        let (sender, receiver) = mpsc::unbounded_channel();
        if task.state.is_final() {
            let _ = sender.send(TaskEvent::Ended { state: task.state, text: task.reply.clone() });
        } else {
            task.watchers.push(sender);
        }
        Some(receiver)
    }

    /// Adds a streamed piece to the task of session `context_id` receiving stream `stream_id`,
    /// else to its oldest unfinished task whose reply has not started; false when none takes it.
    pub fn delta(&self, context_id: &str, stream_id: u64, text: &str) -> bool {
        let mut inner = self.lock();
        let Inner { tasks, order, .. } = &mut *inner;
        let in_context =
            |id: &&String| tasks.get(*id).is_some_and(|t| t.context_id == context_id && !t.state.is_final());
        let candidates: Vec<&String> = order.iter().filter(in_context).collect();
        let owner = candidates
            .iter()
            .find(|id| tasks.get(**id).is_some_and(|t| t.stream_id == Some(stream_id)))
            .or_else(|| candidates.iter().find(|id| tasks.get(**id).is_some_and(|t| t.stream_id.is_none())))
            .map(|id| (*id).clone());
        let Some(task) = owner.and_then(|id| tasks.get_mut(&id)) else { return false };
        task.stream_id = Some(stream_id);
        task.reply.push_str(text);
        task.watchers.retain(|watcher| watcher.send(TaskEvent::Delta(text.to_owned())).is_ok());
        true
    }

    /// Ends the task whose message went as `request_id` with the kernel's reply `text` (a
    /// canceled or failed task keeps its state); false when no task or cancel sent it.
    pub fn reply(&self, request_id: &str, text: &str) -> bool {
        let mut inner = self.lock();
        if let Some(control) = inner.controls.remove(request_id) {
            let _ = control.send(text.to_owned());
            return true;
        }
        let Some(task_id) = inner.by_request.get(request_id).cloned() else { return false };
        let Some(task) = inner.tasks.get_mut(&task_id) else { return false };
        task.answered = true;
        if !task.state.is_final() {
            task.reply = text.to_owned();
            end(task, TaskState::Completed);
        }
        true
    }

    /// Fails an unfinished task, saying `why`.
    pub fn fail(&self, task_id: &str, why: &str) {
        if let Some(task) = self.lock().tasks.get_mut(task_id).filter(|task| !task.state.is_final()) {
            task.reply = why.to_owned();
            end(task, TaskState::Failed);
        }
    }

    /// Cancels an unfinished task; returns its session, for the `/stop`.
    pub fn cancel(&self, task_id: &str) -> Result<String, RpcError> {
        let mut inner = self.lock();
        let task = inner.tasks.get_mut(task_id).ok_or_else(|| RpcError::TaskNotFound(task_id.to_owned()))?;
        if task.state.is_final() {
            return Err(RpcError::NotCancelable { id: task_id.to_owned(), state: task.state.word() });
        }
        end(task, TaskState::Canceled);
        Ok(task.context_id.clone())
    }

    /// Where the reply to the `/stop` sent as `request_id` will go.
    pub fn control(&self, request_id: &str) -> oneshot::Receiver<String> {
        let (sender, receiver) = oneshot::channel();
        self.lock().controls.insert(request_id.to_owned(), sender);
        receiver
    }

    /// Whether the task's turn is over (its reply came, or the task is forgotten).
    pub fn turn_over(&self, task_id: &str) -> bool {
        self.lock().tasks.get(task_id).is_none_or(|task| task.answered)
    }

    /// The task as `GetTask` returns it: its state, the reply as an artifact and as the
    /// agent's message once it ended, and the history (the last `history_length` messages).
    pub fn snapshot(&self, task_id: &str, history_length: Option<usize>) -> Option<Value> {
        let inner = self.lock();
        let task = inner.tasks.get(task_id)?;
        let mut history = vec![task.message.clone()];
        let mut status = json!({"state": task.state.wire_name()});
        let mut artifacts = Vec::new();
        if task.state.is_final() && !task.reply.is_empty() {
            let reply = wire::agent_message(task_id, &task.context_id, &task.reply);
            status["message"] = reply.clone();
            history.push(reply);
            if task.state == TaskState::Completed {
                artifacts.push(wire::reply_artifact(task_id, &task.reply));
            }
        }
        if let Some(keep) = history_length {
            history.drain(..history.len().saturating_sub(keep));
        }
        let mut snapshot = json!({"id": task_id, "contextId": task.context_id, "status": status, "history": history});
        if !artifacts.is_empty() {
            snapshot["artifacts"] = Value::Array(artifacts);
        }
        Some(snapshot)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a thread panicked while holding it; the table is intact.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Drops the oldest ended tasks beyond [`MAX_TASKS`] (unfinished ones stay).
    fn forget_old(&mut self) {
        while self.order.len() >= MAX_TASKS {
            let Some(index) = self.order.iter().position(|id| self.tasks.get(id).is_none_or(|t| t.state.is_final()))
            else {
                return;
            };
            if let Some(id) = self.order.remove(index)
                && let Some(task) = self.tasks.remove(&id)
            {
                self.by_request.remove(&task.request_id);
            }
        }
    }
}

/// Puts a task in its final `state` and tells its watchers.
fn end(task: &mut Task, state: TaskState) {
    task.state = state;
    let event = TaskEvent::Ended { state, text: task.reply.clone() };
    for watcher in task.watchers.drain(..) {
        let _ = watcher.send(event.clone());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tasks_with(ids: &[(&str, &str)]) -> Tasks {
        let tasks = Tasks::default();
        for (task, context) in ids {
            tasks.create(task, context, &format!("r-{task}"), json!({"parts": [{"text": "hi"}]}));
            tasks.working(task);
        }
        tasks
    }

    #[test]
    fn a_reply_ends_its_task_and_the_task_shows_it_as_artifact_and_message() {
        let tasks = tasks_with(&[("t1", "c1")]);
        let mut events = tasks.watch("t1").unwrap();
        assert!(tasks.reply("r-t1", "Hello"));
        assert_eq!(events.try_recv().unwrap(), TaskEvent::Ended { state: TaskState::Completed, text: "Hello".into() });
        let task = tasks.snapshot("t1", None).unwrap();
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello");
        assert_eq!(task["history"].as_array().unwrap().len(), 2);
        assert_eq!(tasks.snapshot("t1", Some(1)).unwrap()["history"][0]["role"], "ROLE_AGENT");
        assert!(!tasks.reply("r-unknown", "x"));
    }

    #[test]
    fn pieces_go_to_the_oldest_unstarted_task_of_their_session_and_stay_with_its_stream() {
        let tasks = tasks_with(&[("t1", "c1"), ("t2", "c1"), ("t3", "c2")]);
        let mut first = tasks.watch("t1").unwrap();
        assert!(tasks.delta("c1", 7, "He"));
        assert!(tasks.delta("c1", 8, "Ot"));
        assert!(tasks.delta("c1", 7, "llo"));
        assert!(!tasks.delta("c3", 1, "nobody"));
        assert_eq!(first.try_recv().unwrap(), TaskEvent::Delta("He".into()));
        assert_eq!(first.try_recv().unwrap(), TaskEvent::Delta("llo".into()));
        assert!(tasks.snapshot("t2", None).unwrap()["status"]["state"] == "TASK_STATE_WORKING");
    }

    #[test]
    fn a_canceled_task_stays_canceled_when_the_stopped_turns_reply_arrives() {
        let tasks = tasks_with(&[("t1", "c1")]);
        assert_eq!(tasks.cancel("t1").unwrap(), "c1");
        let mut stop_reply = tasks.control("stop-1");
        assert!(tasks.reply("stop-1", "Stopping."), "the /stop's own reply is taken");
        assert_eq!(stop_reply.try_recv().unwrap(), "Stopping.");
        assert!(!tasks.turn_over("t1"));
        assert!(tasks.reply("r-t1", "(stopped)"));
        assert!(tasks.turn_over("t1"));
        assert_eq!(tasks.snapshot("t1", None).unwrap()["status"]["state"], "TASK_STATE_CANCELED");
        let again = tasks.cancel("t1").unwrap_err();
        assert_eq!(again.to_string(), "task t1 cannot be canceled: it is already canceled");
        assert!(matches!(tasks.cancel("nope"), Err(RpcError::TaskNotFound(_))));
    }

    #[test]
    fn only_ended_tasks_are_forgotten_past_the_limit() {
        let tasks = Tasks::default();
        tasks.create("running", "c", "r-running", json!({}));
        for n in 0..MAX_TASKS {
            let id = format!("t{n}");
            tasks.create(&id, "c", &format!("r-{id}"), json!({}));
            tasks.fail(&id, "x");
        }
        assert!(tasks.snapshot("running", None).is_some());
        assert!(tasks.snapshot("t0", None).is_none());
        assert!(tasks.snapshot(&format!("t{}", MAX_TASKS - 1), None).is_some());
    }
}
