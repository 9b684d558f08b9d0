//! Fuzz targets for `oxibot-proto`'s decoders: the checks they run on every input.
//!
//! The targets themselves are the binaries in `src/bin/`, built with `cargo afl build`; see
//! `README.md` next to this crate. `proto/tests/fuzz_corpus.rs` includes [`checks`] too, so
//! the checked-in corpus is replayed through the very same checks by a plain `cargo test`.

pub mod checks;
