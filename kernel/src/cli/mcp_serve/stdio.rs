//! MCP over stdio: one JSON-RPC message per line on stdin, one answer per line on stdout, until
//! stdin closes. Each request is answered as soon as it is done, so a `ping` is answered while
//! a `chat` turn runs; nothing else ever writes to stdout.

use std::rc::Rc;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::assistant::Assistant;
use super::protocol;

/// Serves until stdin ends.
pub async fn serve(assistant: Rc<Assistant>) -> anyhow::Result<()> {
    let (answers, mut outgoing) = mpsc::unbounded_channel::<String>();
    let writer = actix::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut in_flight = Vec::new();
    while let Some(line) = lines.next_line().await.context("cannot read stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let assistant = assistant.clone();
        let answers = answers.clone();
        in_flight.push(actix::spawn(async move {
            if let Some(answer) = protocol::answer(assistant.as_ref(), &line).await {
                let _ = answers.send(format!("{answer}\n"));
            }
        }));
        in_flight.retain(|task| !task.is_finished());
    }
    // The client closed stdin: finish what it asked for, then stop.
    for task in in_flight {
        let _ = task.await;
    }
    drop(answers);
    let _ = writer.await;
    Ok(())
}
