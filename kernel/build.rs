//! Build settings of the `oxibot` binary.
//!
//! - On Linux it is linked as a position-dependent executable: its dependencies carry ~1.4 MB
//!   of relocated read-only data that a PIE binary must patch (and so keep resident) at every
//!   start; linked at a fixed address it stays on disk until used. This saves ~2.5 MB of RSS
//!   per process and a little start-up time.
//! - `OXIBOT_VERSION` is the crate version with the git revision it was built from, for
//!   `oxibot --version` (`0.1.0 (3f2a9c1)`, or the version alone outside a git checkout).
//! - The `cl100k_base` vocabulary of the token counter (`memory::bpe`) is written to
//!   `OUT_DIR` in compact form (every token's bytes in rank order, and each one's length),
//!   taken from tiktoken-rs here so the binary neither carries nor builds tiktoken's maps.

use std::process::Command;

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let full = match revision() {
        Some(revision) => format!("{version} ({revision})"),
        None => version,
    };
    println!("cargo:rustc-env=OXIBOT_VERSION={full}");
    write_vocabulary();
    // Only paths that exist: a missing one would run this script (and rebuild) every time.
    for watched in ["../.git/HEAD", "../.git/refs/heads", "../.git/packed-refs"] {
        if std::path::Path::new(watched).exists() {
            println!("cargo:rerun-if-changed={watched}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// Writes `cl100k_tokens.bin` (the tokens' bytes one after another, in rank order) and
/// `cl100k_lengths.bin` (each one's length, a byte each: the longest is 128 bytes) to
/// `OUT_DIR`, once per build directory.
fn write_vocabulary() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (tokens_file, lengths_file) = (out.join("cl100k_tokens.bin"), out.join("cl100k_lengths.bin"));
    if tokens_file.exists() && lengths_file.exists() {
        return;
    }
    let reference = tiktoken_rs::cl100k_base().expect("tiktoken-rs carries cl100k_base");
    let (mut tokens, mut lengths) = (Vec::new(), Vec::new());
    for rank in 0.. {
        let Ok(token) = reference.decode_bytes(&[rank]) else { break };
        lengths.push(u8::try_from(token.len()).expect("no cl100k_base token is longer than 255 bytes"));
        tokens.extend_from_slice(&token);
    }
    std::fs::write(&tokens_file, tokens).expect("write the vocabulary's tokens");
    std::fs::write(&lengths_file, lengths).expect("write the vocabulary's lengths");
}

/// The short hash of the checked-out commit.
fn revision() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--short=9", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
