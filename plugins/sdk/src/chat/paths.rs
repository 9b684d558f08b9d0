//! Where a channel keeps files: paths from its config with `~` expanded, and its media
//! directory inside oxibot's data directory, found the way the kernel finds it.

use std::path::{Path, PathBuf};

/// The environment variable that moves oxibot's whole data directory.
pub const DATA_DIR_VAR: &str = "OXIBOT_HOME";

/// The user's home directory: `$HOME`, else `/`.
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// `path` with a leading `~` component replaced by the home directory (`~/x`, `~`); any
/// other path (`/a/~`, `~user/x`) as it is.
pub fn expand_tilde(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    path.strip_prefix("~").map_or_else(|_| path.to_path_buf(), |rest| home_dir().join(rest))
}

/// oxibot's data directory: `$OXIBOT_HOME` (with `~` expanded), else `~/.oxibot`.
pub fn data_dir() -> PathBuf {
    let moved = std::env::var_os(DATA_DIR_VAR).filter(|dir| !dir.is_empty());
    moved.map_or_else(|| home_dir().join(".oxibot"), expand_tilde)
}

/// Where channel `channel` puts downloaded files unless its config says otherwise:
/// `<data dir>/media/<channel>`.
pub fn media_dir(channel: &str) -> PathBuf {
    data_dir().join("media").join(channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_tilde_expands_to_home_and_other_paths_stay() {
        let home = home_dir();
        assert_eq!(expand_tilde("~/x/y"), home.join("x/y"));
        assert_eq!(expand_tilde("~"), home);
        assert_eq!(expand_tilde("/abs/~"), PathBuf::from("/abs/~"));
        assert_eq!(expand_tilde("~user/x"), PathBuf::from("~user/x"));
    }

    #[test]
    fn a_channels_media_directory_is_named_after_it_inside_the_data_directory() {
        assert_eq!(media_dir("telegram"), data_dir().join("media/telegram"));
    }
}
