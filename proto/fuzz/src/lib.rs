//! Fuzz targets for `oxibot-proto`'s decoders: the checks they run on every input.
//!
//! The targets themselves are the binaries in `src/bin/`, built with `cargo afl build`; see
//! `README.md` next to this crate. `proto/tests/fuzz_corpus.rs` includes [`checks`] too, so
//! the checked-in corpus is replayed through the very same checks by a plain `cargo test`.

pub mod checks;

/// The stack the targets decode on: a quarter of a tokio worker's 2 MiB.
///
/// The targets are optimised, where decoding needs about a quarter of the stack a debug build
/// needs; on afl's 8 MiB main thread a recursion that would overflow a debug kernel's 2 MiB worker
/// goes unnoticed. A body nested to the depth limit needs under 256 KiB here, so 512 KiB leaves
/// room, while decoding without the limit (rmp-serde's 1024 levels) overflows it.
pub const FUZZ_STACK: usize = 512 * 1024;

/// Runs the afl loop `fuzz` on a thread with a [`FUZZ_STACK`] stack.
pub fn on_small_stack(fuzz: fn()) {
    std::thread::Builder::new()
        .name("fuzz".to_owned())
        .stack_size(FUZZ_STACK)
        .spawn(fuzz)
        .expect("the fuzz thread starts")
        .join()
        .expect("afl's panic hook aborts before a panic can reach join");
}
