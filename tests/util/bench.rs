//! The two sizes of a benchmark: the full run of `cargo bench` (optimised) and the short run of
//! `cargo test --benches` (a debug build), which `scripts/test` makes so that no benchmark rots.
//! The two are told apart by the build: a build with debug assertions (the test profile) is the
//! short run, whose figures measure nothing and only show that the benchmark still works; an
//! unoptimised full run is `cargo bench --profile bench-dev` (no debug assertions).

/// Whether this is the short run (a debug build: `cargo test --benches`).
pub const SHORT: bool = cfg!(debug_assertions);

/// `full` in a `cargo bench` run, `short` in the short one.
pub const fn sized(full: usize, short: usize) -> usize {
    if SHORT { short } else { full }
}

/// Says so at the start of a short run.
pub fn announce_short_run() {
    if SHORT {
        println!("(short run of a debug build: it checks the benchmark works; its figures are not measurements)\n");
    }
}
