//! Sending one message to a session and showing its turn as it happens, with Ctrl-C (or
//! `/stop` typed on the terminal) to stop it: shared by the one-shot `oxibot agent -m` and the interactive conversation.

use futures_util::FutureExt as _;
use oxibot_kernel::agent::{SessionManager, TurnReply};
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
    let reply = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => view.event(&event),
            reply = &mut turn => break reply,
            Some(()) = interrupted(interrupts.as_deref_mut()) => {
                manager.stop(session);
                view.stopping();
            }
            () = stop_typed(typed.as_deref_mut()) => {
                manager.stop(session);
                view.stopping();
            }
        }
    };
    // Every event was sent before the reply: show the ones not taken yet.
    while let Ok(event) = rx.try_recv() {
        view.event(&event);
    }
    view.finish(reply.as_ref().ok())?;
    Ok(reply?)
}

/// The next `/stop` typed, or never without a watcher.
async fn stop_typed(typed: Option<&mut TypeAhead>) {
    match typed {
        Some(typed) => typed.stop_requested().await,
        None => std::future::pending().await,
    }
}

/// The next SIGINT, or never without a listener.
async fn interrupted(signal: Option<&mut Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}
