//! Where oxibot keeps its files: the data dir (`~/.oxibot` or `OXIBOT_HOME`) and what is in it.

use std::path::{Path, PathBuf};

/// Environment variable that moves the whole data directory.
pub const HOME_VAR: &str = "OXIBOT_HOME";

/// The data directory: `$OXIBOT_HOME`, else `~/.oxibot`.
pub fn data_dir() -> PathBuf {
    match std::env::var_os(HOME_VAR).filter(|v| !v.is_empty()) {
        Some(dir) => expand_tilde(Path::new(&dir)),
        None => home_dir().join(".oxibot"),
    }
}

/// The default config file inside the data directory.
pub fn default_config_path() -> PathBuf {
    data_dir().join("config.json")
}

/// The user's plugins directory inside the data directory.
pub fn plugins_dir() -> PathBuf {
    data_dir().join("plugins")
}

/// Where files the assistant receives or makes are kept: `<data dir>/media` (channels use a
/// folder per channel inside it).
pub fn media_dir() -> PathBuf {
    data_dir().join("media")
}

/// The user's home directory (`$HOME`, else `/`).
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"))
}

/// Replaces a leading `~` with the home directory.
pub fn expand_tilde(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => home_dir().join(rest),
        Err(_) => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tilde_expands_to_home_and_other_paths_stay() {
        let home = home_dir();
        assert_eq!(expand_tilde(Path::new("~/x/y")), home.join("x/y"));
        assert_eq!(expand_tilde(Path::new("~")), home);
        assert_eq!(expand_tilde(Path::new("/abs/~")), PathBuf::from("/abs/~"));
    }
}
