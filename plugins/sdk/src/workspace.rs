//! Resolving paths a model gave against the workspace, enforcing the workspace restriction.
//!
//! Relative paths resolve against the call's workspace. When the restriction is on, a path is
//! refused if it leads outside the workspace: through `..`, as an absolute path elsewhere, or
//! through a symlink whose target is elsewhere. The check is made on the real (canonical) path
//! of the longest existing prefix, so files that do not exist yet (for `write_file`) are
//! checked through their nearest existing parent.
//!
//! [`resolve`] only *checks* a path: whoever opens the returned path later can be led
//! elsewhere by a symlink swapped in between (time of check to time of use). A tool that opens
//! files should open them through [`crate::beneath::WorkspaceDir`] instead, which resolves and
//! opens in one step beneath a handle on the workspace root.

use std::path::{Component, Path, PathBuf};

use oxibot_proto::CallContext;

use crate::ToolError;
use crate::beneath::error::AccessError;

/// The workspace root of a call: its `workspace`, or the current directory when empty.
pub fn root(ctx: &CallContext) -> PathBuf {
    if ctx.workspace.is_empty() {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
    } else {
        PathBuf::from(&ctx.workspace)
    }
}

/// Resolves `path` for a call, refusing it when it escapes a restricted workspace.
///
/// `~` at the start expands to the home directory. The returned path is absolute and has no
/// `.` or `..` components; symlinks in it are not resolved (so messages show the user's path).
pub fn resolve(ctx: &CallContext, path: &str) -> Result<PathBuf, ToolError> {
    let root = root(ctx);
    let resolved = absolute(&root, path);
    if ctx.restrict_to_workspace {
        check_inside(&root, &resolved, path)?;
    }
    Ok(resolved)
}

/// `path` made absolute against `root` (after `~` expansion), with `.` and `..` removed
/// lexically; symlinks are not looked at.
pub(crate) fn absolute(root: &Path, path: &str) -> PathBuf {
    let expanded = expand_home(path);
    let joined = if expanded.is_absolute() { expanded } else { root.join(expanded) };
    normalize(&joined)
}

/// Whether `path` (absolute, normalised) lies inside `root` once symlinks are followed.
pub fn is_inside(root: &Path, path: &Path) -> bool {
    let real_root = real_path(root);
    real_path(path).starts_with(&real_root)
}

fn check_inside(root: &Path, resolved: &Path, original: &str) -> Result<(), ToolError> {
    if is_inside(root, resolved) {
        return Ok(());
    }
    Err(AccessError::Outside { shown: original.to_owned(), root: root.to_path_buf() }.into())
}

fn expand_home(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home,
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(path),
    }
}

/// Removes `.` and `..` lexically (`..` at the root stays at the root).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The canonical form of the longest existing prefix of `path`, with the rest appended.
pub(crate) fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return normalize(&out);
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(workspace: &Path, restrict: bool) -> CallContext {
        CallContext {
            workspace: workspace.display().to_string(),
            restrict_to_workspace: restrict,
            ..CallContext::default()
        }
    }

    fn temp_workspace(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-sdk-ws-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("notes")).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn relative_paths_resolve_inside_the_workspace() {
        let ws = temp_workspace("relative");
        assert_eq!(resolve(&ctx(&ws, true), "notes/a.md").unwrap(), ws.join("notes/a.md"));
        assert_eq!(resolve(&ctx(&ws, true), "./notes/../b.md").unwrap(), ws.join("b.md"));
    }

    #[test]
    fn dot_dot_leaving_the_workspace_is_refused_with_a_readable_error() {
        let ws = temp_workspace("dotdot");
        let err = resolve(&ctx(&ws, true), "../secret.txt").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
    }

    #[test]
    fn absolute_paths_elsewhere_are_refused_but_allowed_inside() {
        let ws = temp_workspace("absolute");
        assert!(resolve(&ctx(&ws, true), "/etc/passwd").is_err());
        let inside = ws.join("notes/x.md").display().to_string();
        assert!(resolve(&ctx(&ws, true), &inside).is_ok());
    }

    #[test]
    fn symlinks_pointing_outside_are_refused() {
        let ws = temp_workspace("symlink");
        std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
        assert!(resolve(&ctx(&ws, true), "etc-link/passwd").is_err());
        assert!(resolve(&ctx(&ws, true), "etc-link/new-file").is_err());
    }

    #[test]
    fn without_the_restriction_anything_resolves() {
        let ws = temp_workspace("unrestricted");
        assert_eq!(resolve(&ctx(&ws, false), "/etc/passwd").unwrap(), PathBuf::from("/etc/passwd"));
    }
}
