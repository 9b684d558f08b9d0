//! Interactive `oxibot agent` as a user meets it: lines from a pipe, and a real
//! pseudo-terminal (through util-linux `script`) for the line editor, Markdown rendering,
//! the spinner, tool hints and Ctrl-C.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use oxibot_tests::llm::Reply;
use oxibot_tests::procs::wait_until;
use oxibot_tests::{bin, stderr, stdout};

use super::agent::{AgentEnv, roles};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn interactive_agent_answers_each_piped_line_and_stops_at_exit() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("one **two**".into()));
    env.llm.push(Reply::Text("three".into()));
    let mut child =
        env.command(&["agent"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"first\n\n   \nsecond\nexit\nnever sent\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "one **two**\nthree\n", "a pipe gets the model's text as written");
    assert_eq!(env.llm.requests().len(), 2, "blank lines are skipped and nothing after exit is sent");
    assert!(!env.home.path().join("history").exists(), "no line editor, no history file");
}

#[test]
fn the_end_of_piped_input_ends_the_conversation() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("only answer".into()));
    let mut child =
        env.command(&["agent"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"just this\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "only answer\n");
}

#[test]
fn on_a_terminal_the_agent_renders_markdown_shows_progress_and_keeps_a_history() {
    let env = AgentEnv::new();
    env.write("notes.md", "the secret word is marmalade\n");
    env.llm.push(Reply::ToolCalls(vec![("read_file".into(), r#"{"path": "notes.md"}"#.into())]));
    env.llm.push(Reply::Text("The word is **marmalade**.\n\n- found in `notes.md`".into()));
    let mut terminal = Terminal::start(&env, &["agent"]);
    terminal.wait_for("the first prompt", |out| out.contains("you ›"));
    terminal.send("what is the word?\r");
    terminal.wait_for("the answer, then a new prompt", |out| {
        out.split_once("\x1b[1mmarmalade\x1b[0m").is_some_and(|(_, after)| after.contains("you ›"))
    });
    terminal.send("exit\r");
    let status = terminal.finish();
    let out = terminal.output();
    assert!(status.success(), "{out}");
    assert!(out.contains("thinking…"), "a spinner while the model works: {out:?}");
    assert!(out.contains("↳ read_file {\"path\": \"notes.md\"}"), "a tool hint: {out:?}");
    assert!(out.contains("•\x1b[0m found in \x1b[36mnotes.md\x1b[0m"), "a bullet and inline code: {out:?}");
    assert!(!out.contains("**"), "no raw Markdown on a terminal: {out:?}");
    assert_eq!(roles(&env.session_lines()), ["user", "assistant", "tool", "assistant"]);
    let history = std::fs::read_to_string(env.home.path().join("history/cli_history")).unwrap();
    let entries: Vec<&str> = history.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(entries, ["what is the word?", "exit"]);
}

/// Issue 28: with `"terminal": "ask"`, a call the policy asks for waits for the person at
/// the terminal: `n` refuses it, `a` runs it and keeps a standing approval for that path,
/// which the next identical call needs no prompt for.
#[test]
fn on_a_terminal_an_ask_call_waits_for_y_n_or_always() {
    let env = AgentEnv::new();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.path().join("config.json")).unwrap()).unwrap();
    config["tools"] = serde_json::json!({"approval": {"write_file": "ask", "terminal": "ask"}});
    env.write_config(&config);
    let call = || Reply::ToolCalls(vec![("write_file".into(), r#"{"path": "t.txt", "content": "typed"}"#.into())]);
    env.llm.push(call());
    env.llm.push(Reply::Text("Refused, fine.".into()));
    env.llm.push(call());
    env.llm.push(Reply::Text("Written now.".into()));
    env.llm.push(call());
    env.llm.push(Reply::Text("Written again.".into()));
    let mut terminal = Terminal::start(&env, &["agent"]);
    terminal.wait_for("the first prompt", |out| out.contains("you ›"));
    terminal.send("write it\r");
    terminal.wait_for("the approval prompt", |out| out.contains("Run it? [y]es / [n]o / [a]lways"));
    assert!(!env.workspace.join("t.txt").exists(), "the call ran before the answer");
    terminal.send("n\r");
    terminal.wait_for("the reply after the refusal", |out| out.contains("Refused, fine."));
    assert!(!env.workspace.join("t.txt").exists());
    terminal.send("again\r");
    terminal.wait_for("the second prompt", |out| out.matches("Run it?").count() == 2);
    terminal.send("a\r");
    terminal.wait_for("the reply after always", |out| out.contains("Written now."));
    assert_eq!(std::fs::read_to_string(env.workspace.join("t.txt")).unwrap(), "typed");
    terminal.send("once more\r");
    terminal.wait_for("the third reply", |out| out.contains("Written again."));
    terminal.send("exit\r");
    let status = terminal.finish();
    let out = terminal.output();
    assert!(status.success(), "{out}");
    assert_eq!(out.matches("Run it?").count(), 2, "the standing approval covered the third call: {out:?}");
    let granted = env.command(&["approvals", "list"]).output().unwrap();
    assert!(stdout(&granted).contains("write_file path==t.txt"), "{}", stdout(&granted));
}

#[test]
fn on_a_terminal_ctrl_c_stops_the_reply_and_the_conversation_goes_on() {
    let env = AgentEnv::new();
    env.llm.push(Reply::SlowFirstToken { delay_ms: 10_000, text: "too late".into() });
    env.llm.push(Reply::Text("fresh answer".into()));
    let mut terminal = Terminal::start(&env, &["agent"]);
    terminal.wait_for("the first prompt", |out| out.contains("you ›"));
    terminal.send("tell me a long story\r");
    assert!(wait_until(LIMIT, || !env.llm.requests().is_empty()), "the model was never called");
    terminal.send("\x03");
    terminal.wait_for("the stopped turn, then a new prompt", |out| {
        out.split_once("(stopped)").is_some_and(|(_, after)| after.contains("you ›"))
    });
    // Ctrl-C at the prompt only clears the line.
    terminal.send("half a line\x03");
    terminal.wait_for("a fresh prompt after Ctrl-C", |out| {
        out.split_once("half a line").is_some_and(|(_, after)| after.contains("you ›"))
    });
    terminal.send("next question\r");
    // Ctrl-D only once the line editor is back: typed while the answer is still being
    // printed, the terminal is not in raw mode and the keystroke can be lost.
    terminal.wait_for("the next answer, then a new prompt", |out| {
        out.split_once("fresh answer").is_some_and(|(_, after)| after.contains("you ›"))
    });
    terminal.send("\x04");
    let status = terminal.finish();
    let out = terminal.output();
    assert!(status.success(), "{status}: {out:?}");
    assert!(!out.contains("plugin died"), "Ctrl-C is for the kernel, not the plugins: {out:?}");
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant", "user", "assistant"]);
    assert_eq!(lines[3]["content"], "next question", "the cleared line was never sent");
}

// Issue 24, item 5: `/stop` typed during a reply did nothing until the reply ended, and a
// stop left only "(Stopped before finishing.)" in the session.
#[test]
fn on_a_terminal_typing_stop_ends_the_reply_and_the_session_keeps_what_was_shown() {
    let env = AgentEnv::new();
    env.llm.push(Reply::StallAfter {
        text: "The first part is here.\n\nThe rest comes much later.".into(),
        after_chunks: 5,
        delay_ms: 20_000,
    });
    let mut terminal = Terminal::start(&env, &["agent"]);
    terminal.wait_for("the first prompt", |out| out.contains("you ›"));
    terminal.send("tell me a long story\r");
    terminal.wait_for("the first part of the reply", |out| out.contains("The first part is here."));
    terminal.send("/stop\r");
    terminal.wait_for("the stopped turn, then a new prompt", |out| {
        out.split_once("(stopped)").is_some_and(|(_, after)| after.contains("you ›"))
    });
    terminal.send(":q\r");
    let status = terminal.finish();
    let out = terminal.output();
    assert!(status.success(), "{status}: {out:?}");
    assert!(!out.contains("much later"), "the rest of the reply never came: {out:?}");
    let lines = env.session_lines();
    assert_eq!(roles(&lines), ["user", "assistant"], "`/stop` and `:q` are not messages");
    let kept = lines[2]["content"].as_str().unwrap();
    assert!(
        kept.starts_with("The first part is here.") && kept.ends_with("(Stopped before finishing.)"),
        "the partial reply stays, marked as stopped: {kept:?}"
    );
}

#[test]
fn a_one_shot_reply_on_a_terminal_is_markdown_unless_no_markdown_is_given() {
    let env = AgentEnv::new();
    env.llm.push(Reply::Text("a **bold** move".into()));
    env.llm.push(Reply::Text("a **bold** move".into()));
    let mut styled = Terminal::start(&env, &["agent", "-m", "hi"]);
    assert!(styled.finish().success(), "{}", styled.output());
    assert!(styled.output().contains("a \x1b[1mbold\x1b[0m move"), "{:?}", styled.output());
    let mut plain = Terminal::start(&env, &["agent", "-m", "hi", "--no-markdown"]);
    assert!(plain.finish().success(), "{}", plain.output());
    assert!(plain.output().contains("a **bold** move"), "{:?}", plain.output());
}

// Issue 24, item 6: on a terminal tables showed raw pipes, code fences stayed visible and
// long lines broke mid-word at the terminal's edge.
#[test]
fn on_a_terminal_tables_are_drawn_fences_hidden_and_lines_wrapped_between_words() {
    let env = AgentEnv::new();
    let paragraph = "Wrapping matters because a terminal cuts a long line wherever its last column falls, \
        which splits words like extraordinarily and unquestionably into two pieces.";
    env.llm.push(Reply::Text(format!(
        "| fruit | count |\n|---|--:|\n| apple | 3 |\n| kiwi | 12 |\n\n```sh\nls -l\n```\n\n{paragraph}"
    )));
    let mut terminal = Terminal::start(&env, &["agent", "-m", "hi"]);
    assert!(terminal.finish().success(), "{}", terminal.output());
    let shown = without_escapes(&terminal.output());
    assert!(shown.contains("│ apple │     3 │") && shown.contains("│ kiwi  │    12 │"), "an aligned table: {shown:?}");
    assert!(!shown.contains("| apple") && !shown.contains("|---"), "no raw pipes: {shown:?}");
    assert!(shown.contains("  ls -l") && !shown.contains("```"), "code without its fences: {shown:?}");
    let words: Vec<&str> = shown.split_whitespace().collect();
    for word in paragraph.split_whitespace() {
        assert!(words.contains(&word), "{word:?} was broken: {shown:?}");
    }
    assert!(shown.lines().all(|line| line.trim_end().chars().count() <= 80), "lines fit 80 columns: {shown:?}");
}

/// What the terminal shows once escape sequences are taken out.
fn without_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

/// `oxibot` on a pseudo-terminal made by `script`; stdout and stderr both go to it.
struct Terminal {
    child: Child,
    input: ChildStdin,
    output: Arc<Mutex<Vec<u8>>>,
    /// Copies the terminal's output into `output`; ends when `script` has exited.
    reader: Option<JoinHandle<()>>,
}

/// Where util-linux `script` is: on the `PATH` or in the usual places. A missing `script`
/// fails the test: these tests must not pass by not running.
fn script_command() -> PathBuf {
    let on_path =
        std::env::var_os("PATH").map(|path| std::env::split_paths(&path).collect::<Vec<_>>()).unwrap_or_default();
    let candidates = on_path.into_iter().chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
    candidates.map(|dir| dir.join("script")).find(|path| path.is_file()).unwrap_or_else(|| {
        panic!(
            "util-linux `script` is not installed, and the terminal tests need it for a pseudo-terminal: \
             install it (Debian and Ubuntu: `apt-get install bsdutils`; Fedora: `dnf install util-linux-script`); \
             scripts/test-setup installs it"
        )
    })
}

impl Terminal {
    /// Starts `oxibot ARGS` as `env` would, on a pseudo-terminal made by `script`.
    fn start(env: &AgentEnv, args: &[&str]) -> Terminal {
        let script = script_command();
        let inner = env.command(args);
        let line = std::iter::once(bin("oxibot").display().to_string())
            .chain(args.iter().map(|arg| arg.to_string()))
            .map(|part| format!("'{}'", part.replace('\'', r"'\''")))
            .collect::<Vec<_>>()
            .join(" ");
        // `exec`: no shell in between to take the terminal's SIGINT as its own.
        let line = format!("exec {line}");
        let mut command = Command::new(script);
        command.args(["-qfec", &line, "/dev/null"]).env("TERM", "xterm-256color").env("SHELL", "/bin/sh");
        for (key, value) in inner.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let mut pty_out = child.stdout.take().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let collected = output.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = pty_out.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                collected.lock().unwrap().extend_from_slice(&buffer[..read]);
            }
        });
        Terminal { child, input, output, reader: Some(reader) }
    }

    /// What the terminal showed so far, escape sequences included.
    fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Types `keys`.
    fn send(&mut self, keys: &str) {
        self.input.write_all(keys.as_bytes()).unwrap();
        self.input.flush().unwrap();
    }

    fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) {
        assert!(wait_until(LIMIT, || check(&self.output())), "no {what} on the terminal: {:?}", self.output());
    }

    /// Waits for the program to exit.
    fn finish(&mut self) -> ExitStatus {
        if !wait_until(LIMIT, || self.child.try_wait().unwrap().is_some()) {
            let _ = self.child.kill();
            panic!("oxibot did not exit: {:?}", self.output());
        }
        let status = self.child.wait().unwrap();
        // The reader thread may still be taking the last bytes; it ends at the end of the
        // output, which comes when `script` has exited.
        if let Some(reader) = self.reader.take() {
            assert!(wait_until(LIMIT, || reader.is_finished()), "the terminal's output never ended");
            reader.join().unwrap();
        }
        status
    }
}

/// Issue 29: a reply of a scheduled job came out after the `you ›` prompt, and no new prompt
/// was drawn under it.
#[test]
fn on_a_terminal_a_background_reply_is_followed_by_a_new_prompt() {
    let env = AgentEnv::new();
    let add = r#"{"action": "add", "message": "ring the bell", "in": "2s"}"#;
    env.llm.push(Reply::ToolCalls(vec![("cron".into(), add.into())]));
    env.llm.push(Reply::Text("Set.".into()));
    env.llm.push(Reply::Text("Ding ding!".into()));
    let mut terminal = Terminal::start(&env, &["agent"]);
    terminal.wait_for("the first prompt", |out| out.contains("you ›"));
    terminal.send("ring in two seconds\r");
    terminal.wait_for("the background reply, then a prompt", |out| {
        out.split_once("Ding ding!").is_some_and(|(_, after)| after.contains("you ›"))
    });
    terminal.send("exit\r");
    assert!(terminal.finish().success(), "{}", terminal.output());
}
