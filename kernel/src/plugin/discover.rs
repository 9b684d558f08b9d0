//! Finding plugins: bundled `oxibot-tool-*` executables, the plugins directory, config entries.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::spec::{Origin, PluginSpec};

/// File-name prefix of bundled tool plugins.
pub const TOOL_PREFIX: &str = "oxibot-tool-";

/// Where to look for plugins.
#[derive(Debug, Clone, Default)]
pub struct PluginSources {
    /// The directory holding the kernel binary (bundled plugins), if known.
    pub bundled_dir: Option<PathBuf>,
    /// The user's plugins directory (`~/.oxibot/plugins`).
    pub plugin_dir: Option<PathBuf>,
    /// Plugins listed in the config file.
    pub configured: Vec<PluginSpec>,
}

/// Every plugin to start, in precedence order: config entries, then the plugins directory,
/// then bundled plugins. A later plugin with the same name as an earlier one is skipped, so a
/// user's plugin replaces the bundled one of the same name.
pub fn discover(sources: &PluginSources) -> Vec<PluginSpec> {
    let mut found: Vec<PluginSpec> = sources.configured.clone();
    if let Some(dir) = &sources.plugin_dir {
        found.extend(executables(dir, |_| true).into_iter().map(|p| PluginSpec::for_executable(p, Origin::PluginDir)));
    }
    if let Some(dir) = &sources.bundled_dir {
        let bundled = executables(dir, |name| name.starts_with(TOOL_PREFIX) && !name.contains('.'));
        found.extend(bundled.into_iter().map(|p| PluginSpec::for_executable(p, Origin::Bundled)));
    }
    let mut seen = std::collections::HashSet::new();
    found.retain(|spec| {
        let first = seen.insert(spec.name.clone());
        if !first {
            tracing::debug!(plugin = %spec.name, command = %spec.command.display(), "skipping plugin shadowed by an earlier one of the same name");
        }
        first
    });
    found
}

/// Executable regular files in `dir` whose names pass `filter`, sorted by name.
fn executables(dir: &Path, filter: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&filter))
        .map(|e| e.path())
        .filter(|p| is_executable_file(p))
        .collect();
    paths.sort();
    paths
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-discover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn bundled_plugins_are_executables_with_the_tool_prefix() {
        let dir = temp("bundled");
        touch(&dir.join("oxibot-tool-fs"), 0o755);
        touch(&dir.join("oxibot-tool-fs.d"), 0o644);
        touch(&dir.join("oxibot-tool-notexec"), 0o644);
        touch(&dir.join("oxibot"), 0o755);
        let found = discover(&PluginSources { bundled_dir: Some(dir), ..Default::default() });
        let names: Vec<_> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs"]);
    }

    #[test]
    fn user_plugins_shadow_bundled_ones_of_the_same_name() {
        let bundled = temp("shadow-bundled");
        let user = temp("shadow-user");
        touch(&bundled.join("oxibot-tool-fs"), 0o755);
        touch(&user.join("oxibot-tool-fs"), 0o755);
        touch(&user.join("weather.py"), 0o755);
        let found = discover(&PluginSources { bundled_dir: Some(bundled), plugin_dir: Some(user.clone()), configured: vec![] });
        assert_eq!(found.len(), 2);
        let fs = found.iter().find(|s| s.name == "fs").unwrap();
        assert_eq!(fs.command, user.join("oxibot-tool-fs"));
        assert!(found.iter().any(|s| s.name == "weather"));
    }
}
