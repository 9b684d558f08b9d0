//! Plugin failures explained for a person: a file in the plugins directory that is not
//! executable (discovery skips it) and a plugin the sandbox keeps from starting (its
//! interpreter is outside what the sandbox lets it run).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Regular files of the plugins directory `dir` without any executable bit, sorted.
pub fn not_executable(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .filter(|entry| entry.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 == 0))
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}

/// One line per file of the plugins directory that is skipped for not being executable.
pub fn not_executable_warnings() -> Vec<String> {
    not_executable(&oxibot_kernel::paths::plugins_dir())
        .into_iter()
        .map(|path| {
            format!(
                "{} is not executable, so it is not started as a plugin: chmod +x {}",
                path.display(),
                path.display()
            )
        })
        .collect()
}

/// `reason` with a word on the sandbox when a confined plugin could not be run
/// (exit status 126, "Permission denied").
pub fn explain_failure(reason: &str, confined: bool) -> String {
    let refused =
        reason.contains("126") || reason.contains("Permission denied") || reason.contains("permission denied");
    if !confined || !refused {
        return reason.to_owned();
    }
    format!(
        "{reason} (the sandbox may block its interpreter: add the interpreter's directory to the plugin's \
         allowPaths in config.json, or run it with tools.restrictToWorkspace false)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_start_under_the_sandbox_names_allow_paths() {
        let explained = explain_failure("exited with status 126: Permission denied", true);
        assert!(explained.contains("sandbox may block its interpreter") && explained.contains("allowPaths"));
        assert_eq!(explain_failure("exited with status 126", false), "exited with status 126");
        assert_eq!(explain_failure("timed out", true), "timed out");
    }
}
