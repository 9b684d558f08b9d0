//! The interactive `oxibot agent`'s side of the kernel's own requests: a turn the kernel
//! starts itself (a helper's report coming back, a scheduled job) runs in its session after
//! the session's current turn, and its reply is printed between the user's turns.

use std::io::{IsTerminal, Write};
use std::rc::Rc;

use oxibot_kernel::agent::{SessionManager, requested_answer};
use oxibot_kernel::automation::dispatch::{Request, RunRequest};
use tokio::sync::mpsc;

use super::repl::PROMPT;

/// Serves requests until every dispatcher is gone.
pub async fn serve(manager: Rc<SessionManager>, mut requests: mpsc::UnboundedReceiver<Request>) {
    while let Some(request) = requests.recv().await {
        match request {
            Request::Run(run) => {
                let manager = manager.clone();
                actix::spawn(async move { run_and_print(&manager, run).await });
            }
            Request::Send(send) => {
                let _ = send.done.send(Err("only `oxibot gateway` sends messages to chats".to_owned()));
            }
        }
    }
}

/// The reply was printed below the prompt the person is typing at: draw the prompt again
/// under it, on a terminal (a pipe has no prompt to redraw).
fn redraw_prompt(out: &mut impl Write) {
    if !std::io::stdin().is_terminal() {
        return;
    }
    let (plain, coloured) = PROMPT;
    let _ = write!(out, "\n{}", if std::io::stdout().is_terminal() { coloured } else { plain });
    let _ = out.flush();
}

async fn run_and_print(manager: &SessionManager, request: RunRequest) {
    let (events, mut rx) = mpsc::unbounded_channel();
    actix::spawn(async move { while rx.recv().await.is_some() {} });
    let answer = requested_answer(&manager.run_request(&request, events).await);
    if request.deliver {
        let mut out = std::io::stdout().lock();
        let shown = match &answer {
            Ok(text) if !text.trim().is_empty() => writeln!(out, "\n[{}] {text}", request.key).is_ok(),
            Ok(_) => false,
            Err(error) => writeln!(out, "\n[{}] error: {error}", request.key).is_ok(),
        };
        let _ = out.flush();
        if shown {
            redraw_prompt(&mut out);
        }
    }
    if let Some(done) = request.done {
        let _ = done.send(answer);
    }
}
