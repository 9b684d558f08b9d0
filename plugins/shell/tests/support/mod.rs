//! What the shell plugin's test binaries share: the guardian executable they run commands under.

use std::path::{Path, PathBuf};

/// The small example executable that serves as the guardian (the plugin's own entry lives in
/// `oxibot` now), built by `cargo test -p oxibot-tool-shell`.
pub fn guardian() -> &'static Path {
    static GUARDIAN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    GUARDIAN.get_or_init(|| {
        // target/debug/deps/<this test> → target/debug/examples/shell_guardian
        let exe = std::env::current_exe().expect("the test's own path");
        let guardian = exe.parent().and_then(Path::parent).expect("target/debug").join("examples/shell_guardian");
        assert!(
            guardian.exists(),
            "{} is missing: run `cargo test -p oxibot-tool-shell`, which builds it",
            guardian.display()
        );
        guardian
    })
}
