//! `oxibot-tool-fs`: the file tools (`read_file`, `write_file`, `edit_file`, `list_dir`,
//! `glob`, `grep`) with nanobot's names and parameters, as an oxibot plugin.

use std::process::ExitCode;

mod edit;
mod glob;
mod grep;
mod list;
mod read;
mod walk;
mod write;

use oxibot_plugin::{Plugin, ToolError, ToolOutput};

fn main() -> ExitCode {
    Plugin::new("fs")
        .tool(read::tool(), read::handle)
        .tool(write::tool(), write::handle)
        .tool(edit::tool(), edit::handle)
        .tool(list::tool(), list::handle)
        .tool(glob::tool(), glob::handle)
        .tool(grep::tool(), grep::handle)
        .run()
}

/// Runs file-system work on tokio's blocking pool, so a long grep does not stall other calls.
async fn blocking<F>(work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| Err(ToolError::new(format!("the file operation failed: {e}"))))
}

/// Shows a path relative to the workspace when it is inside it.
fn display_path(root: &std::path::Path, path: &std::path::Path) -> String {
    match path.strip_prefix(root) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
        Ok(_) => ".".to_owned(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod test_util {
    //! Temp workspaces and call contexts for the tool tests.
    use std::path::{Path, PathBuf};

    use oxibot_plugin::CallContext;

    pub struct Workspace(pub PathBuf);

    impl Workspace {
        pub fn new(label: &str) -> Workspace {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("oxibot-fs-{label}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Workspace(dir.canonicalize().unwrap())
        }

        pub fn write(&self, relative: &str, content: &str) -> PathBuf {
            let path = self.0.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
            path
        }

        pub fn ctx(&self) -> CallContext {
            CallContext { workspace: self.0.display().to_string(), ..CallContext::default() }
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Workspace {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
