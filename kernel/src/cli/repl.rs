//! The interactive `oxibot agent`: a line editor with history on a terminal, plain line
//! reading otherwise; Ctrl-C or `/stop` stops a reply, `exit`, `quit`, `:q` or Ctrl-D leave.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc as std_mpsc;

use anyhow::Context as _;
use futures_util::FutureExt as _;
use oxibot_kernel::agent::SessionManager;
use rustyline::error::ReadlineError;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::mpsc;

use super::stream::Style;
use super::turn::send;
use super::typeahead::TypeAhead;

/// The prompt as the line editor measures it, and as it is shown.
pub(super) const PROMPT: (&str, &str) = ("you › ", "\x1b[1;32myou ›\x1b[0m ");

/// Runs the conversation until the user leaves.
pub async fn run(manager: &SessionManager, session: &str, style: Style) -> anyhow::Result<ExitCode> {
    let stdin_tty = std::io::stdin().is_terminal();
    let mut input = if stdin_tty && style.stdout_tty { Input::editor(history_path()) } else { Input::plain(stdin_tty) };
    if stdin_tty {
        eprintln!("oxibot — /help for commands · Ctrl-C or /stop stops a reply · exit, :q or Ctrl-D to leave");
    }
    let mut typed = TypeAhead::on_terminal();
    // Listening for SIGINT from here on keeps Ctrl-C from ending the program.
    let mut interrupts = tokio::signal::unix::signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")?;
    loop {
        let queued = typed.as_mut().and_then(TypeAhead::next_queued);
        let line = match queued {
            // Typed while the previous reply was shown (the terminal echoed it then).
            Some(line) => line,
            None => match input.next_line(&mut interrupts).await? {
                Some(line) => line,
                None => break,
            },
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if is_leave(line) {
            break;
        }
        if let Err(error) = send(manager, session, line, style, Some(&mut interrupts), typed.as_mut()).await {
            eprintln!("error: {error}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a line means leaving: `exit`, `quit` (with or without a slash) or vi's `:q`.
fn is_leave(line: &str) -> bool {
    matches!(line, "exit" | "quit" | "/exit" | "/quit" | ":q" | ":q!" | ":wq")
}

/// `<data dir>/history/cli_history`.
fn history_path() -> PathBuf {
    oxibot_kernel::paths::data_dir().join("history").join("cli_history")
}

/// Where the user's lines come from.
enum Input {
    /// The line editor, on its own thread.
    Editor(LineEditor),
    /// Standard input read line by line; `prompt` shows a prompt on stderr.
    Plain { lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>, prompt: bool },
}

impl Input {
    fn editor(history: PathBuf) -> Input {
        Input::Editor(LineEditor::start(history))
    }

    fn plain(prompt: bool) -> Input {
        Input::Plain { lines: tokio::io::BufReader::new(tokio::io::stdin()).lines(), prompt }
    }

    /// The next line, or `None` when the user left (end of input; Ctrl-C at a plain prompt).
    async fn next_line(&mut self, interrupts: &mut Signal) -> anyhow::Result<Option<String>> {
        match self {
            Input::Editor(editor) => editor.next_line().await,
            Input::Plain { lines, prompt } => {
                if *prompt {
                    eprint!("\nyou › ");
                }
                // A Ctrl-C meant for the reply that just ended must not end the program.
                while let Some(Some(())) = interrupts.recv().now_or_never() {}
                tokio::select! {
                    line = lines.next_line() => line.context("cannot read from standard input"),
                    _ = interrupts.recv() => Ok(None),
                }
            }
        }
    }
}

/// What the editor thread hands over.
enum Entered {
    Line(String),
    /// Ctrl-D on an empty line.
    End,
    Failed(String),
}

/// A rustyline editor on a dedicated thread (it blocks). It draws the prompt only when
/// asked, so the prompt never appears in the middle of a reply.
struct LineEditor {
    /// Each message asks for one more line.
    ready: std_mpsc::Sender<()>,
    lines: mpsc::UnboundedReceiver<Entered>,
    /// Put a blank line before the next prompt (not after an empty line: one is enough).
    gap: bool,
}

impl LineEditor {
    fn start(history: PathBuf) -> LineEditor {
        let (ready, ready_rx) = std_mpsc::channel();
        let (lines_tx, lines) = mpsc::unbounded_channel();
        let spawned = std::thread::Builder::new()
            .name("line-editor".into())
            .spawn(move || edit_lines(&history, &ready_rx, &lines_tx));
        if let Err(error) = spawned {
            // The receiver then reports the end of input, after this explanation.
            eprintln!("error: cannot start the line editor: {error}");
        }
        LineEditor { ready, lines, gap: true }
    }

    async fn next_line(&mut self) -> anyhow::Result<Option<String>> {
        if self.gap {
            // A blank line between the previous reply and the prompt.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out);
            let _ = out.flush();
        }
        if self.ready.send(()).is_err() {
            return Ok(None);
        }
        match self.lines.recv().await {
            Some(Entered::Line(line)) => {
                self.gap = !line.trim().is_empty();
                Ok(Some(line))
            }
            Some(Entered::End) | None => Ok(None),
            Some(Entered::Failed(error)) => Err(anyhow::anyhow!("cannot read a line: {error}")),
        }
    }
}

/// The editor thread: one prompt per `ready` message, until the asking side goes away or
/// the user ends the input.
fn edit_lines(history: &std::path::Path, ready: &std_mpsc::Receiver<()>, lines: &mpsc::UnboundedSender<Entered>) {
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(editor) => editor,
        Err(error) => {
            let _ = lines.send(Entered::Failed(error.to_string()));
            return;
        }
    };
    // The unit helper lets the editor show the prompt's colours.
    editor.set_helper(Some(()));
    // A missing history file is normal the first time.
    let _ = editor.load_history(history);
    while ready.recv().is_ok() {
        let entered = loop {
            match editor.readline(&PROMPT) {
                Ok(line) => {
                    remember(&mut editor, history, &line);
                    break Entered::Line(line);
                }
                // Ctrl-C at the prompt drops the line and asks again.
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break Entered::End,
                Err(error) => break Entered::Failed(error.to_string()),
            }
        };
        let last = !matches!(entered, Entered::Line(_));
        if lines.send(entered).is_err() || last {
            return;
        }
    }
}

/// Adds a line to the history and appends it to the history file.
fn remember(editor: &mut rustyline::DefaultEditor, history: &std::path::Path, line: &str) {
    if line.trim().is_empty() {
        return;
    }
    if !matches!(editor.add_history_entry(line), Ok(true)) {
        return;
    }
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(error) = editor.append_history(history) {
        tracing::debug!(%error, path = %history.display(), "cannot save the line history");
    }
}
