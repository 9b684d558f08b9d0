//! The fuzz corpus replayed through the fuzz targets' own checks, and regressions fuzzing found.
//!
//! `proto/fuzz/` fuzzes the decoders with afl, which CI does not have. This test needs nothing
//! but `cargo test`: it runs every file of `proto/fuzz/corpus/<target>/` through the same checks
//! the afl targets run (the file is included below), so an input that once found new code in a
//! decoder keeps being checked. Each file runs on a thread with the 2 MiB stack of a tokio worker,
//! where the kernel decodes, in a debug build, where decoding takes the most stack.
//!
//! A check that fails names the corpus file. A stack overflow aborts the whole binary instead;
//! `cargo test -p oxibot-proto --test fuzz_corpus -- --nocapture` then shows the last file tried.

#![allow(clippy::unwrap_used)]

#[path = "../fuzz/src/checks.rs"]
mod checks;

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use oxibot_proto::{DecodeError, Message, decode_body};

/// The stack the kernel's decoding runs on: a tokio worker thread's.
const DECODER_STACK: usize = 2 * 1024 * 1024;

/// Every file of one target's corpus, sorted by name.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz").join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read(&path).unwrap())).collect()
}

/// Runs `check` on every corpus file of `target` on a decoder-sized stack; fails naming each
/// file whose check panicked.
fn replay(target: &'static str, check: fn(&[u8])) {
    let files = corpus(target);
    assert!(files.len() >= 20, "the {target} corpus has only {} files; is it missing?", files.len());
    let failed = std::thread::Builder::new()
        .name(format!("replay {target}"))
        .stack_size(DECODER_STACK)
        .spawn(move || {
            let mut failed = Vec::new();
            for (path, input) in &files {
                eprintln!("replaying {}", path.display());
                if panic::catch_unwind(AssertUnwindSafe(|| check(input))).is_err() {
                    failed.push(path.display().to_string());
                }
            }
            failed
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(failed.is_empty(), "corpus files that fail the {target} checks: {failed:#?}");
}

/// Builds a `call` body whose `arguments` nest `depth` lists deep.
fn call_nested(depth: usize) -> Vec<u8> {
    let mut body = vec![0x84, 0xa4];
    body.extend_from_slice(b"type");
    body.push(0xa4);
    body.extend_from_slice(b"call");
    body.push(0xa2);
    body.extend_from_slice(b"id");
    body.push(0x01);
    body.push(0xa4);
    body.extend_from_slice(b"tool");
    body.push(0xa1);
    body.push(b'x');
    body.push(0xa9);
    body.extend_from_slice(b"arguments");
    body.extend(std::iter::repeat_n(0x91, depth));
    body.push(0xc0);
    body
}

#[test]
fn the_allocation_counter_the_oversize_checks_rely_on_is_active() {
    let info = allocation_counter::measure(|| drop(std::hint::black_box(vec![0u8; 4096])));
    assert!(
        info.bytes_max >= 4096,
        "allocation-counter is not the global allocator; oversize checks would pass vacuously"
    );
}

#[test]
fn every_frame_decoder_corpus_input_passes_the_fuzz_checks() {
    replay("frame_decoder", checks::check_frames);
}

#[test]
fn every_decode_body_corpus_input_passes_the_fuzz_checks() {
    replay("decode_body", checks::check_body);
}

/// Regression: rmp-serde's default depth limit (1024) let a 1 KiB body of nested lists recurse
/// deep enough to overflow a 2 MiB stack in a debug build (at about 550 levels), aborting the
/// kernel. The corpus file `decode_body/deep_nesting` holds such a body.
#[test]
fn a_body_nested_past_the_depth_limit_is_malformed_rather_than_a_stack_overflow() {
    std::thread::Builder::new()
        .stack_size(DECODER_STACK)
        .spawn(|| {
            for depth in [5000, 1023, 600, 255] {
                let error = decode_body(&call_nested(depth)).unwrap_err();
                assert!(matches!(error, DecodeError::Malformed(_)), "depth {depth}: {error}");
            }
            let Message::Call(call) = decode_body(&call_nested(254)).unwrap() else {
                panic!("254 nested lists inside a call are within the limit");
            };
            checks::check_round_trip(&Message::Call(call));
        })
        .unwrap()
        .join()
        .unwrap();
}
