//! Shows one turn as it happens: the reply on stdout (raw, or as Markdown on a terminal),
//! tool hints and a spinner on stderr when stderr is a terminal.
//!
//! When stdout is not a terminal the reply's deltas are written exactly as they arrive,
//! so pipes and scripts get the model's own text.

use std::io::{IsTerminal, Write};

use oxibot_kernel::agent::TurnReply;
use oxibot_kernel::turn::approval::Answer;
use oxibot_kernel::turn::runner::TurnEvent;

use super::markdown::MarkdownRenderer;
use super::spinner::Spinner;

/// The width used when the terminal's cannot be read.
const DEFAULT_WIDTH: usize = 80;
/// Horizontal rules and hints stay at most this wide, however wide the terminal.
const MAX_WIDTH: usize = 100;

/// How output is shown, decided once from the command line and the terminals.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Render the reply as Markdown (stdout is a terminal and `--no-markdown` was not given).
    pub markdown: bool,
    /// stdout is a terminal: keep track of the cursor so stderr lines start on a fresh line.
    pub stdout_tty: bool,
    /// stderr is a terminal: show the spinner and tool hints.
    pub stderr_tty: bool,
    /// Columns of the terminal (capped).
    pub width: usize,
}

impl Style {
    /// Reads the terminals; `no_markdown` is the `--no-markdown` flag.
    pub fn detect(no_markdown: bool) -> Style {
        let stdout_tty = std::io::stdout().is_terminal();
        let stderr_tty = std::io::stderr().is_terminal();
        Style { markdown: stdout_tty && !no_markdown, stdout_tty, stderr_tty, width: terminal_width().min(MAX_WIDTH) }
    }
}

/// The terminal's width in columns, from stdout or stderr, else 80.
pub fn terminal_width() -> usize {
    let from = |size: rustix::termios::Winsize| (size.ws_col > 0).then_some(usize::from(size.ws_col));
    rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .and_then(from)
        .or_else(|| rustix::termios::tcgetwinsize(std::io::stderr()).ok().and_then(from))
        .unwrap_or(DEFAULT_WIDTH)
}

/// One turn on screen.
pub struct TurnView {
    style: Style,
    renderer: Option<MarkdownRenderer>,
    spinner: Option<Spinner>,
    /// Reply text went to stdout.
    printed: bool,
    /// The stdout cursor is at the start of a line (tracked on a terminal only).
    line_start: bool,
    /// Tools started and not finished yet.
    running: Vec<String>,
}

impl TurnView {
    /// Starts showing a turn: the spinner says the model is thinking. Needs a tokio runtime.
    pub fn start(style: Style) -> TurnView {
        let spinner = style.stderr_tty.then(|| Spinner::on_stderr(style.width));
        if let Some(spinner) = &spinner {
            spinner.show("thinking…");
        }
        let renderer = style.markdown.then(|| MarkdownRenderer::new(style.width.min(DEFAULT_WIDTH)));
        TurnView { style, renderer, spinner, printed: false, line_start: true, running: Vec::new() }
    }

    /// Shows one event of the turn.
    pub fn event(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Delta(text) => self.delta(text),
            TurnEvent::Restart => {
                // The text shown so far stays; what was not shown yet is dropped with the
                // renderer's partial line, and the retry streams the reply again.
                if let Some(renderer) = &mut self.renderer {
                    renderer.reset();
                }
                self.pause_spinner();
                if self.style.stdout_tty {
                    self.end_line();
                    eprintln!("[the connection to the model dropped; retrying]");
                } else {
                    eprintln!("\n[the connection to the model dropped; retrying]");
                }
                self.spin("thinking…");
            }
            TurnEvent::ToolStarted { name, arguments } => {
                self.flush_partial_line();
                self.pause_spinner();
                self.end_line();
                if self.style.stderr_tty {
                    eprintln!("{}", tool_hint(name, arguments, self.style.width.min(DEFAULT_WIDTH)));
                }
                self.running.push(name.clone());
                self.spin_for_tools();
            }
            TurnEvent::ApprovalRequested(request) => {
                self.flush_partial_line();
                self.pause_spinner();
                self.end_line();
                eprintln!(
                    "\nApproval needed (no answer within {} s counts as no):\n  {}\nRun it? [y]es / [n]o / [a]lways for this: ",
                    request.timeout_secs,
                    request.shown.replace('\n', "\n  ")
                );
            }
            TurnEvent::ToolFinished { name, .. } => {
                if let Some(index) = self.running.iter().position(|running| running == name) {
                    self.running.remove(index);
                }
                self.spin_for_tools();
            }
        }
    }

    /// Shows what the person answered to an approval request, and goes on waiting.
    pub fn answered(&mut self, said: Answer) {
        let word = match said {
            Answer::Yes => "approved",
            Answer::Always => "approved, and calls like it from now on",
            Answer::No => "denied",
        };
        eprintln!("[{word}]");
        self.spin_for_tools();
    }

    /// Ends the turn: erases the spinner, prints the rest of the reply (or the reply
    /// itself when nothing was streamed) and leaves the cursor on a new line.
    pub fn finish(mut self, reply: Option<&TurnReply>) -> std::io::Result<()> {
        self.spinner = None;
        let mut out = std::io::stdout().lock();
        if !self.style.stdout_tty {
            match reply {
                Some(TurnReply::Answer(..)) if self.printed => writeln!(out)?,
                Some(other) => writeln!(out, "{}", other.text())?,
                None => {}
            }
            return out.flush();
        }
        let tail = self.renderer.as_mut().map(MarkdownRenderer::finish).unwrap_or_default();
        write!(out, "{tail}")?;
        if !tail.is_empty() {
            self.line_start = false;
        }
        let text = match reply {
            Some(TurnReply::Answer(..)) if self.printed => String::new(),
            Some(TurnReply::Answer(text, _)) => match &mut self.renderer {
                Some(renderer) => {
                    let mut styled = renderer.push(text);
                    styled.push_str(&renderer.finish());
                    styled
                }
                None => text.clone(),
            },
            Some(other) => other.text().to_owned(),
            None => String::new(),
        };
        if !text.is_empty() && !self.line_start {
            writeln!(out)?;
        }
        write!(out, "{text}")?;
        if !text.is_empty() {
            self.line_start = text.ends_with('\n');
        }
        if !self.line_start {
            writeln!(out)?;
        }
        out.flush()
    }

    /// Says the turn is being stopped (after Ctrl-C).
    pub fn stopping(&mut self) {
        self.spin("stopping…");
    }

    fn delta(&mut self, text: &str) {
        self.printed = true;
        let shown = match &mut self.renderer {
            Some(renderer) => renderer.push(text),
            None => text.to_owned(),
        };
        if !shown.is_empty() {
            self.pause_spinner();
            self.print(&shown);
        }
        // A line still being written is invisible in Markdown mode: keep the spinner going
        // below the finished lines meanwhile.
        if self.renderer.as_ref().is_some_and(MarkdownRenderer::has_pending) && self.line_start {
            if let Some(spinner) = &self.spinner {
                spinner.show_soon("writing…");
            }
        } else if self.renderer.is_none() {
            self.pause_spinner();
        }
    }

    fn print(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.line_start = text.ends_with('\n');
    }

    /// Shows the Markdown renderer's unfinished line now (a tool call interrupts the text).
    fn flush_partial_line(&mut self) {
        let tail = self.renderer.as_mut().map(MarkdownRenderer::finish).unwrap_or_default();
        if !tail.is_empty() {
            self.pause_spinner();
            self.print(&tail);
        }
    }

    /// Moves the stdout cursor to a new line, on a terminal, when it is not at one.
    fn end_line(&mut self) {
        if self.style.stdout_tty && !self.line_start {
            self.print("\n");
        }
    }

    fn spin_for_tools(&mut self) {
        if self.running.is_empty() {
            self.spin("thinking…");
        } else {
            let mut names: Vec<&str> = Vec::new();
            for name in &self.running {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
            self.spin(&format!("running {}…", names.join(", ")));
        }
    }

    /// Shows the spinner, only on a clean line: never over a half-written reply line.
    fn spin(&mut self, label: &str) {
        let Some(spinner) = &self.spinner else { return };
        if self.style.stdout_tty && !self.line_start {
            return;
        }
        spinner.show(label);
    }

    fn pause_spinner(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.pause();
        }
    }
}

/// `  ↳ read_file {"path": "notes.md"}`, on one line and at most `width` columns.
pub fn tool_hint(name: &str, arguments: &str, width: usize) -> String {
    let arguments: String = arguments.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = format!("  ↳ {name} {arguments}");
    let line = line.trim_end();
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_hint_shows_the_name_and_arguments_on_one_line() {
        assert_eq!(
            tool_hint("read_file", "{\n  \"path\": \"notes.md\"\n}", 80),
            "  ↳ read_file { \"path\": \"notes.md\" }"
        );
        assert_eq!(tool_hint("list_dir", "", 80), "  ↳ list_dir");
    }

    #[test]
    fn a_long_tool_hint_is_cut_to_the_width_with_an_ellipsis() {
        let hint = tool_hint("exec", &format!("{{\"command\": \"{}\"}}", "é".repeat(200)), 40);
        assert_eq!(hint.chars().count(), 40);
        assert!(hint.starts_with("  ↳ exec {\"command\": \"éé") && hint.ends_with('…'), "{hint}");
    }
}
