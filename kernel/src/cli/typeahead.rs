//! Lines typed on the terminal while a reply is being shown. The line editor is not reading
//! then, so the terminal is in its ordinary line mode: it echoes what is typed and hands over
//! a whole line at Enter. `/stop` stops the reply (as Ctrl-C does); while a call waits for
//! approval, the next line is the answer; any other line waits and is sent once the reply is
//! over.
//!
//! Standard input is only read when `poll` says a line is there, so nothing is left reading
//! when the line editor takes the terminal back.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};

/// How often standard input is looked at during a reply.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// Lines typed during replies, in order.
#[derive(Default)]
pub struct TypeAhead {
    /// Lines to send after the reply, oldest first.
    queued: VecDeque<String>,
    /// Bytes of a line not complete yet.
    partial: Vec<u8>,
}

impl TypeAhead {
    /// A watcher, when standard input is a terminal (elsewhere lines are read in turn).
    pub fn on_terminal() -> Option<TypeAhead> {
        std::io::stdin().is_terminal().then(TypeAhead::default)
    }

    /// Resolves when `/stop` was typed; other lines typed meanwhile are queued.
    pub async fn stop_requested(&mut self) {
        loop {
            while let Some(line) = self.read_ready_line() {
                if is_stop(&line) {
                    return;
                }
                if !line.trim().is_empty() {
                    self.queued.push_back(line);
                }
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// The next line typed from now on (an approval's answer), waiting for it.
    pub async fn next_line(&mut self) -> String {
        loop {
            if let Some(line) = self.read_ready_line() {
                return line;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// The oldest line typed during a reply and not sent yet.
    pub fn next_queued(&mut self) -> Option<String> {
        self.queued.pop_front()
    }

    /// One complete line if standard input has one now, without waiting.
    fn read_ready_line(&mut self) -> Option<String> {
        if let Some(line) = self.take_line() {
            return Some(line);
        }
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        if !matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(ready) if ready > 0) {
            return None;
        }
        let mut buffer = [0u8; 1024];
        match rustix::io::read(fd, &mut buffer) {
            // End of input (Ctrl-D on an empty line) is for the prompt to notice, not here.
            Ok(0) | Err(_) => None,
            Ok(read) => {
                self.partial.extend_from_slice(&buffer[..read]);
                self.take_line()
            }
        }
    }

    /// The first complete line of what was read, if any.
    fn take_line(&mut self) -> Option<String> {
        let end = self.partial.iter().position(|&byte| byte == b'\n')?;
        let line: Vec<u8> = self.partial.drain(..=end).collect();
        Some(String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_owned())
    }
}

/// Whether a typed line asks to stop the reply.
fn is_stop(line: &str) -> bool {
    line.trim() == "/stop"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_taken_one_at_a_time_and_a_partial_line_waits() {
        let mut typed = TypeAhead { partial: b"first\r\nsecond\nthi".to_vec(), ..TypeAhead::default() };
        assert_eq!(typed.take_line().as_deref(), Some("first"));
        assert_eq!(typed.take_line().as_deref(), Some("second"));
        assert_eq!(typed.take_line(), None);
        assert_eq!(typed.partial, b"thi");
    }

    #[test]
    fn only_a_stop_line_stops() {
        assert!(is_stop("/stop") && is_stop("  /stop "));
        assert!(!is_stop("/stopped") && !is_stop("stop"));
    }
}
