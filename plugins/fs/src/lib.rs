//! `oxibot-tool-fs`: the file tools (`read_file`, `write_file`, `edit_file`, `list_dir`,
//! `glob`, `grep`) with nanobot's names and parameters, served as an oxibot plugin.
//!
//! Every file is opened through an [`oxibot_plugin::beneath::WorkspaceDir`]: a handle on the
//! workspace root opened once per call, beneath which every path is resolved in the same
//! system call that opens it. With the workspace restriction on (the default) no path, `..`
//! or symlink leads outside, not even a symlink swapped between a check and an open; the tree
//! walks of `list_dir`, `glob` and `grep` open each subdirectory relative to its parent's
//! handle and leave out symlinks that lead outside.

use std::path::Path;
use std::process::ExitCode;

mod args;
mod closest;
mod edit;
mod glob;
mod grep;
mod list;
mod matching;
mod page;
mod pattern;
mod read;
mod text;
mod walk;
mod write;

use oxibot_plugin::beneath::AccessError;
use oxibot_plugin::{Plugin, ToolError, ToolOutput};

/// Serves the file tools to the kernel that started this process; the entry `oxibot __plugin fs` runs.
pub fn run() -> ExitCode {
    Plugin::new("fs")
        .static_manifest()
        .tool(read::tool(), read::handle)
        .tool(write::tool(), write::handle)
        .tool(edit::tool(), edit::handle)
        .tool(list::tool(), list::handle)
        .tool(glob::tool(), glob::handle)
        .tool(grep::tool(), grep::handle)
        .run()
}

/// Runs file-system work on tokio's blocking pool.
///
/// Reads, writes and especially tree walks block on disk for as long as the tree is big, and
/// the SDK serves several calls at once on a two-thread runtime; doing the work inline would
/// stall every other call (and pings) behind one slow `grep`. Walks are also bounded (see
/// [`walk::MAX_VISITS`]) because a blocking task cannot be aborted when a call is cancelled.
async fn blocking<F>(work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ToolError::new(format!("the file operation did not finish: {e}"))))
}

/// How a path is shown to the model: relative to the workspace when inside it, else absolute.
fn display_path(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// The error for a failed file operation: a refusal (outside the workspace) as it is, a
/// system error described by `describe`.
fn access_error(error: AccessError, describe: impl FnOnce(&std::io::Error) -> ToolError) -> ToolError {
    match error {
        AccessError::Io(e) => describe(&e),
        refused => refused.into(),
    }
}

/// `n` followed by `word`, pluralised with an `s` unless `n` is one.
fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") }
}

#[cfg(test)]
mod test_util {
    //! Temporary workspaces and call contexts shared by the tool tests.

    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    use oxibot_plugin::CallContext;
    use oxibot_plugin::beneath::WorkspaceDir;

    /// A fresh directory under the system temp dir, removed when dropped.
    pub struct Workspace(PathBuf);

    impl Workspace {
        /// A new empty workspace; `label` only makes the directory name readable.
        pub fn new(label: &str) -> Workspace {
            static COUNTER: AtomicU32 = AtomicU32::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("oxibot-fs-{label}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Workspace(dir.canonicalize().unwrap())
        }

        /// Writes `content` to `relative`, creating parent directories.
        pub fn write(&self, relative: &str, content: &str) -> PathBuf {
            let path = self.0.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
            path
        }

        /// The content of `relative`.
        pub fn read(&self, relative: &str) -> String {
            std::fs::read_to_string(self.0.join(relative)).unwrap()
        }

        /// A restricted call context rooted here.
        pub fn ctx(&self) -> CallContext {
            CallContext {
                workspace: self.0.display().to_string(),
                restrict_to_workspace: true,
                ..CallContext::default()
            }
        }

        /// An unrestricted call context rooted here.
        pub fn unrestricted(&self) -> CallContext {
            CallContext { restrict_to_workspace: false, ..self.ctx() }
        }

        /// The workspace opened as a restricted call opens it.
        pub fn files(&self) -> WorkspaceDir {
            WorkspaceDir::open(&self.ctx()).unwrap()
        }

        /// The workspace opened as an unrestricted call opens it.
        pub fn unrestricted_files(&self) -> WorkspaceDir {
            WorkspaceDir::open(&self.unrestricted()).unwrap()
        }

        /// The workspace directory.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Workspace {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A second temp directory outside any workspace, for escape tests.
    pub fn outside_dir(label: &str) -> Workspace {
        Workspace::new(&format!("outside-{label}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_the_workspace_are_shown_relative_and_others_absolute() {
        let root = Path::new("/ws");
        assert_eq!(display_path(root, Path::new("/ws/a/b.txt")), "a/b.txt");
        assert_eq!(display_path(root, Path::new("/ws")), ".");
        assert_eq!(display_path(root, Path::new("/etc/hosts")), "/etc/hosts");
    }

    #[test]
    fn plural_adds_an_s_except_for_one() {
        assert_eq!(plural(1, "line"), "1 line");
        assert_eq!(plural(3, "line"), "3 lines");
        assert_eq!(plural(0, "file"), "0 files");
    }
}
