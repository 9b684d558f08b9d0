//! `oxibot-stress-plugin`: a tool plugin that misbehaves on request, for the kernel's failure tests.
//!
//! Modelled on nushell's `nu_plugin_stress_internals`. It speaks the protocol with blocking
//! std I/O and no SDK, so it can break the protocol in ways the SDK never would. Everything is
//! driven by environment variables:
//!
//! | variable | meaning |
//! |---|---|
//! | `OXIBOT_STRESS_STARTUP` | `normal` (default), `exit_before_hello` (exit 3 right after connecting), `wrong_version` (hello with version 999), `wrong_token`, `no_hello` (connect and sleep forever), `garbage_hello` (a non-MessagePack first frame) |
//! | `OXIBOT_STRESS_NAME` | plugin name in `hello` (default `stress`) |
//! | `OXIBOT_STRESS_PREFIX` | prefix of every tool name (default empty) |
//! | `OXIBOT_STRESS_ACTION` | what `misbehave` does without an `action` argument (default `echo`) |
//! | `OXIBOT_STRESS_DELAY_MS` | sleep of the `slow` action without a `delay_ms` argument (default 500) |
//! | `OXIBOT_STRESS_TIMEOUT_SECS` | `timeout_secs` of `misbehave` in the manifest (default: absent) |
//! | `OXIBOT_STRESS_EXTRA_TOOL` | one more tool, named exactly this, that does nothing (default: none) |
//! | `OXIBOT_STRESS_EXTRA_DESCRIPTION_BYTES` | the extra tool's description padded to this many bytes |
//! | `OXIBOT_STRESS_START_DELAY_MS` | sleep before connecting to the kernel, so a restart is slow enough to watch (default 0) |
//!
//! Tools: `noop` (read-only, returns ""), `echo` (returns `text`), `misbehave` (`action` one of
//! `echo`, `panic`, `garbage`, `oversize`, `hang`, `sigkill`, `slow`, `error`). `slow` sleeps
//! `delay_ms`, or with `until_file` waits until that file exists, then answers `slow done`. Pings are
//! answered; cancels are announced as a feature but only logged (`cancel <id>` on stderr), never
//! acted on. The process exits 0 when the kernel closes the connection or says goodbye.

mod actions;
mod wire;

use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use oxibot_proto::{ENV_SOCKET, ENV_TOKEN, Feature, Hello, Message, PROTOCOL_NAME, PROTOCOL_VERSION, PeerKind};

use crate::actions::Config;
use crate::wire::{Reader, Writer};

/// Exit status when the plugin cannot start or the kernel refuses it.
const REFUSED_EXIT: u8 = 2;
/// Exit status of the `exit_before_hello` startup.
const EARLY_EXIT: u8 = 3;
/// Exit status when the kernel sent something this plugin cannot read.
const WIRE_EXIT: u8 = 1;

/// How the plugin behaves before it serves calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Startup {
    Normal,
    ExitBeforeHello,
    WrongVersion,
    WrongToken,
    NoHello,
    GarbageHello,
}

impl Startup {
    fn parse(name: &str) -> Option<Startup> {
        Some(match name {
            "normal" => Startup::Normal,
            "exit_before_hello" => Startup::ExitBeforeHello,
            "wrong_version" => Startup::WrongVersion,
            "wrong_token" => Startup::WrongToken,
            "no_hello" => Startup::NoHello,
            "garbage_hello" => Startup::GarbageHello,
            _ => return None,
        })
    }
}

fn main() -> ExitCode {
    let startup_name = std::env::var("OXIBOT_STRESS_STARTUP").unwrap_or_else(|_| "normal".to_owned());
    eprintln!("stress plugin starting, startup={startup_name}");
    let Some(startup) = Startup::parse(&startup_name) else {
        eprintln!(
            "stress: unknown OXIBOT_STRESS_STARTUP={startup_name:?}; use normal, exit_before_hello, \
             wrong_version, wrong_token, no_hello or garbage_hello"
        );
        return ExitCode::from(REFUSED_EXIT);
    };
    let Some(socket) = std::env::var_os(ENV_SOCKET).filter(|path| !path.is_empty()) else {
        eprintln!(
            "oxibot-stress-plugin is an oxibot test plugin started by the oxibot kernel, not by hand \
             ({ENV_SOCKET} is not set)"
        );
        return ExitCode::from(REFUSED_EXIT);
    };
    let token = std::env::var(ENV_TOKEN).unwrap_or_default();
    let delay = std::env::var("OXIBOT_STRESS_START_DELAY_MS").ok().and_then(|ms| ms.parse().ok()).unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(delay));
    let stream = match UnixStream::connect(&socket) {
        Ok(stream) => stream,
        Err(error) => {
            eprintln!("stress: cannot connect to the kernel at {}: {error}", socket.to_string_lossy());
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let (reader, writer) = match wire::split(stream) {
        Ok(halves) => halves,
        Err(error) => {
            eprintln!("stress: cannot share the connection between threads: {error}");
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    run(startup, token, reader, &writer)
}

fn run(startup: Startup, token: String, mut reader: Reader, writer: &Writer) -> ExitCode {
    let name = std::env::var("OXIBOT_STRESS_NAME").unwrap_or_else(|_| "stress".to_owned());
    let mut hello = Hello::new(name, PeerKind::Tool, token);
    // Announced so the kernel sends cancels; ignoring them is part of the misbehaviour.
    hello.features = vec![Feature::Cancel];
    match startup {
        Startup::Normal => {}
        Startup::ExitBeforeHello => {
            eprintln!("stress: exiting before hello as asked");
            return ExitCode::from(EARLY_EXIT);
        }
        Startup::WrongVersion => hello.version = 999,
        Startup::WrongToken => hello.token = format!("wrong-{}", hello.token),
        Startup::NoHello => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Startup::GarbageHello => {
            writer.send_raw(&wire::garbage_frame());
            // Wait for the kernel to hang up (it should never answer with its hello).
            return await_kernel_hello(&mut reader, writer).err().unwrap_or(ExitCode::from(REFUSED_EXIT));
        }
    }
    writer.send(&Message::Hello(hello));
    if let Err(code) = await_kernel_hello(&mut reader, writer) {
        return code;
    }
    let config = Arc::new(Config::from_env());
    writer.send(&Message::Manifest(actions::manifest(&config)));
    serve(&config, &mut reader, writer)
}

/// Waits for the kernel's `hello`; any other outcome is the exit status to stop with.
fn await_kernel_hello(reader: &mut Reader, writer: &Writer) -> Result<(), ExitCode> {
    loop {
        match reader.next() {
            Ok(Some(Message::Hello(hello))) if hello.protocol == PROTOCOL_NAME && hello.version == PROTOCOL_VERSION => {
                return Ok(());
            }
            Ok(Some(Message::Hello(hello))) => {
                eprintln!("stress: the kernel speaks {} version {}", hello.protocol, hello.version);
                return Err(ExitCode::from(REFUSED_EXIT));
            }
            Ok(Some(Message::Goodbye(goodbye))) => {
                eprintln!("stress: the kernel refused this plugin: {}", goodbye.reason);
                return Err(ExitCode::from(REFUSED_EXIT));
            }
            Ok(Some(Message::Ping(ping))) => writer.send(&Message::Pong(ping)),
            Ok(Some(_)) => {}
            Ok(None) => {
                eprintln!("stress: the kernel closed the connection during the handshake");
                return Err(ExitCode::from(REFUSED_EXIT));
            }
            Err(error) => {
                eprintln!("stress: connection to the kernel failed during the handshake: {error}");
                return Err(ExitCode::from(REFUSED_EXIT));
            }
        }
    }
}

/// The reader loop: calls are dispatched, the rest answered here, until the kernel leaves.
fn serve(config: &Arc<Config>, reader: &mut Reader, writer: &Writer) -> ExitCode {
    loop {
        match reader.next() {
            Ok(None) => return ExitCode::SUCCESS,
            Ok(Some(Message::Goodbye(goodbye))) => {
                eprintln!("stress: goodbye from the kernel: {}", goodbye.reason);
                return ExitCode::SUCCESS;
            }
            Ok(Some(Message::Call(call))) => actions::dispatch(config, call, writer),
            Ok(Some(Message::Cancel(cancel))) => eprintln!("cancel {}", cancel.id),
            Ok(Some(Message::Ping(ping))) => writer.send(&Message::Pong(ping)),
            Ok(Some(_)) => {}
            Err(error) => {
                eprintln!("stress: connection to the kernel failed: {error}");
                return ExitCode::from(WIRE_EXIT);
            }
        }
    }
}
