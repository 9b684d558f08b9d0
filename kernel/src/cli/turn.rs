//! Sending one message to a session and showing its turn as it happens, with Ctrl-C (or
//! `/stop` typed on the terminal) to stop it: shared by the one-shot `oxibot agent -m` and the interactive conversation.

use std::collections::VecDeque;

use futures_util::FutureExt as _;
use oxibot_kernel::agent::{SessionManager, TurnReply};
use oxibot_kernel::turn::approval::{Answer, ApprovalRequest};
use oxibot_kernel::turn::runner::TurnEvent;
use tokio::signal::unix::Signal;
use tokio::sync::mpsc;

use super::stream::{Style, TurnView};
use super::typeahead::TypeAhead;

/// Sends one message and shows the turn as it happens; returns the final reply. With
/// `interrupts`, Ctrl-C (SIGINT) stops the turn; with `typed`, so does a `/stop` line.
pub async fn send(
    manager: &SessionManager,
    session: &str,
    text: &str,
    style: Style,
    mut interrupts: Option<&mut Signal>,
    mut typed: Option<&mut TypeAhead>,
) -> anyhow::Result<TurnReply> {
    // A Ctrl-C pressed just after the previous reply ended must not stop this one.
    if let Some(signal) = interrupts.as_deref_mut() {
        while let Some(Some(())) = signal.recv().now_or_never() {}
    }
    let (events, mut rx) = mpsc::unbounded_channel();
    let mut view = TurnView::start(style);
    let turn = manager.send(session, text, events);
    tokio::pin!(turn);
    // Calls waiting for the person's answer, oldest first: the next typed line answers it.
    let mut asking: VecDeque<ApprovalRequest> = VecDeque::new();
    let reply = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => {
                view.event(&event);
                if let TurnEvent::ApprovalRequested(request) = event {
                    if typed.is_some() {
                        asking.push_back(request);
                    } else {
                        // No terminal to ask on: no answer is a no, at once.
                        answer(manager, &request, Answer::No);
                    }
                }
            }
            reply = &mut turn => break reply,
            Some(()) = interrupted(interrupts.as_deref_mut()) => {
                manager.stop(session);
                view.stopping();
            }
            typed_now = next_typed(typed.as_deref_mut(), !asking.is_empty()) => match (typed_now, asking.pop_front()) {
                (Typed::Line(line), Some(request)) => {
                    let said = parse_answer(&line);
                    answer(manager, &request, said);
                    view.answered(said);
                    if let Some(next) = asking.front() {
                        view.event(&TurnEvent::ApprovalRequested(next.clone()));
                    }
                }
                (_, waiting) => {
                    if let Some(request) = waiting {
                        answer(manager, &request, Answer::No);
                    }
                    manager.stop(session);
                    view.stopping();
                }
            },
        }
    };
    // Every event was sent before the reply: show the ones not taken yet.
    while let Ok(event) = rx.try_recv() {
        view.event(&event);
    }
    view.finish(reply.as_ref().ok())?;
    Ok(reply?)
}

/// What was typed during a turn.
enum Typed {
    /// `/stop`.
    Stop,
    /// A line answering an approval request.
    Line(String),
}

/// The next `/stop` typed, or, while a call waits for approval, the next line; never without a
/// watcher.
async fn next_typed(typed: Option<&mut TypeAhead>, answering: bool) -> Typed {
    match typed {
        Some(typed) if answering => match typed.next_line().await {
            line if line.trim() == "/stop" => Typed::Stop,
            line => Typed::Line(line),
        },
        Some(typed) => {
            typed.stop_requested().await;
            Typed::Stop
        }
        None => std::future::pending().await,
    }
}

/// `y`/`yes` runs the call, `a`/`always` runs it and calls like it from now on; anything
/// else refuses it.
fn parse_answer(line: &str) -> Answer {
    match line.trim().to_lowercase().as_str() {
        "y" | "yes" => Answer::Yes,
        "a" | "always" => Answer::Always,
        _ => Answer::No,
    }
}

/// Gives the person's answer to the kernel's approvals.
fn answer(manager: &SessionManager, request: &ApprovalRequest, said: Answer) {
    if let Err(error) = manager.services().approvals().answer_in_terminal(&request.code, said) {
        eprintln!("[{error}]");
    }
}

/// The next SIGINT, or never without a listener.
async fn interrupted(signal: Option<&mut Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}
