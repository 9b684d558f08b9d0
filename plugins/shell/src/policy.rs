//! Which commands `exec` refuses to run.
//!
//! Two best-effort checks on the command's text (string matching; the boundary itself is the OS
//! sandbox in [`crate::sandbox`], which also covers paths built at run time):
//! - the deny list, always on: commands that destroy data or stop the machine;
//! - the workspace restriction, when the call is restricted: `..` path steps, and absolute or
//!   home-relative paths that lead outside the workspace (a few harmless devices such as
//!   `/dev/null` excepted).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use oxibot_plugin::{CallContext, ToolError, workspace};
use regex_automata::meta::Regex;

/// Pattern for device files under `/dev` that are disks or partitions.
macro_rules! disk_device {
    () => {
        r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|loop|mapper/)"
    };
}

/// One deny-list entry: a pattern for the lowercased command, and the danger it stands for.
struct Rule {
    /// Regular expression searched for anywhere in the lowercased command.
    pattern: &'static str,
    /// What the pattern guards against, phrased to complete "it looks like …".
    danger: &'static str,
}

/// The deny list.
const RULES: &[Rule] = &[
    Rule {
        pattern: r#"\brm["']?\s+(?:[^;&|\n]*\s)?(?:-[a-z]*[rf]|--(?:recursive|force)\b)"#,
        danger: "a recursive or forced delete (rm -r / rm -f)",
    },
    Rule {
        pattern: r"\$\{?\w+\}?\s+(?:[^;&|\n]*\s)?-(?:[a-z]*r[a-z]*f|[a-z]*f[a-z]*r)",
        danger: "a recursive forced delete through a variable ($cmd -rf)",
    },
    Rule { pattern: r"\bfind\b[^;&|\n]*\s-delete\b", danger: "deleting files with find -delete" },
    Rule { pattern: r"\b(?:rmtree|remove_tree)\b", danger: "deleting a directory tree (rmtree)" },
    Rule { pattern: r"\b(?:mkfs|diskpart)\b", danger: "formatting a filesystem" },
    Rule { pattern: r"(?:^|[;&|(\n]\s*)format\b", danger: "formatting a disk" },
    Rule { pattern: r"\bdel\s+/[fq]\b|\brmdir\s+/s\b", danger: "a forced or recursive delete" },
    Rule { pattern: concat!(r"\bdd\b[^;&|\n]*\bof=", disk_device!()), danger: "dd writing onto a disk device" },
    Rule { pattern: concat!(r">\s*", disk_device!()), danger: "writing onto a disk device" },
    Rule {
        pattern: r"\b(?:shutdown|reboot|poweroff|halt)\b|\b(?:init|telinit)\s+[06]\b",
        danger: "shutting down or restarting the machine",
    },
    Rule { pattern: r":\s*\(\s*\)\s*\{", danger: "a fork bomb (a function named ':')" },
];

/// The compiled deny list, or why it could not be compiled.
static DENY_LIST: LazyLock<Result<Vec<(Regex, &'static str)>, String>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| Regex::new(rule.pattern).map(|regex| (regex, rule.danger)).map_err(|e| e.to_string()))
        .collect()
});

/// Device files a restricted command may still name: they reach no one's data.
const HARMLESS_DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/random", "/dev/urandom"];

/// Checks `command` for a call: the deny list always, the workspace restriction when it is on.
pub fn check(command: &str, ctx: &CallContext) -> Result<(), ToolError> {
    check_deny_list(command)?;
    if ctx.restrict_to_workspace {
        check_workspace(command, &workspace::root(ctx))?;
    }
    Ok(())
}

/// Refuses `command` when it matches the deny list.
pub fn check_deny_list(command: &str) -> Result<(), ToolError> {
    let rules = DENY_LIST.as_ref().map_err(|error| {
        ToolError::new(format!("the safety deny list failed to load ({error}); no command can run"))
    })?;
    let lower = command.trim().to_lowercase();
    match rules.iter().find(|(regex, _)| regex.is_match(lower.as_str())) {
        Some((_, danger)) => Err(ToolError::new(format!(
            "command refused by the safety guard: it looks like {danger}, which this tool never runs; \
             if it is really needed, ask the user to run it"
        ))),
        None => Ok(()),
    }
}

/// Refuses `command` when it steps up with `..` or names a path outside the workspace `root`.
pub fn check_workspace(command: &str, root: &Path) -> Result<(), ToolError> {
    if has_parent_step(command) {
        return Err(ToolError::new(format!(
            "command refused: it steps up a directory with '..', and access outside the workspace {} \
             is restricted; use paths inside the workspace (working_dir picks where the command runs)",
            root.display()
        )));
    }
    match path_words(command).find(|word| !is_allowed_path(root, word)) {
        Some(word) => Err(ToolError::new(format!(
            "command refused: '{word}' is outside the workspace {}, and access outside it is restricted; \
             use paths inside the workspace",
            root.display()
        ))),
        None => Ok(()),
    }
}

/// Whether `command` contains `..` as a whole path step (`../x`, `cd ..`, `a/..`).
fn has_parent_step(command: &str) -> bool {
    let bytes = command.as_bytes();
    bytes.windows(2).enumerate().any(|(at, pair)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + 2).copied();
        pair == b".." && before.is_none_or(is_step_boundary) && after.is_none_or(is_step_boundary)
    })
}

/// Whether `byte` can sit next to a `..` path step.
fn is_step_boundary(byte: u8) -> bool {
    byte.is_ascii_whitespace() || b"/\\'\"`;&|<>()=:".contains(&byte)
}

/// The words of `command` that start with `/` or `~` at the start of a shell word.
fn path_words(command: &str) -> impl Iterator<Item = &str> {
    let bytes = command.as_bytes();
    (0..bytes.len())
        .filter(move |&at| matches!(bytes[at], b'/' | b'~') && (at == 0 || starts_word_after(bytes[at - 1])))
        .map(move |at| {
            let end = bytes[at..].iter().position(|&b| ends_word(b)).map_or(bytes.len(), |len| at + len);
            &command[at..end]
        })
}

/// Whether a path word can begin right after `byte`.
fn starts_word_after(byte: u8) -> bool {
    byte.is_ascii_whitespace() || b"'\"`=(;&|<>".contains(&byte)
}

/// Whether `byte` ends a path word.
fn ends_word(byte: u8) -> bool {
    byte.is_ascii_whitespace() || b"'\"`;&|<>()".contains(&byte)
}

/// Whether a path word may be used by a restricted command.
fn is_allowed_path(root: &Path, word: &str) -> bool {
    if HARMLESS_DEVICES.contains(&word) || word.starts_with("/dev/fd/") {
        return true;
    }
    match expand(word) {
        Some(path) => workspace::is_inside(root, &workspace::normalize(&path)),
        None => false,
    }
}

/// The path a word names: `~` and `~/…` expand to the home directory; `~user` has no answer.
fn expand(word: &str) -> Option<PathBuf> {
    let Some(rest) = word.strip_prefix('~') else {
        return Some(PathBuf::from(word));
    };
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    let home = PathBuf::from(std::env::var_os("HOME")?);
    Some(home.join(rest.trim_start_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(command: &str) -> bool {
        check_deny_list(command).is_err()
    }

    fn workspace(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-shell-policy-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn every_deny_pattern_compiles() {
        assert_eq!(DENY_LIST.as_ref().map(Vec::len), Ok(RULES.len()));
    }

    #[test]
    fn the_deny_list_blocks_recursive_and_forced_rm() {
        for command in [
            "rm -rf /",
            "rm -fr ~",
            "RM -RF /",
            "rm -r build",
            "rm -v -r x",
            "rm --recursive x",
            "rm x --force",
            "cd /tmp && rm -f a",
            "\"rm\" -rf x",
            "'rm' -r x",
            "r=rm; $r -rf x",
            "${r} -fr x",
            "find x -delete",
            "find . -name '*.o' -delete",
            "python3 -c 'import shutil; shutil.rmtree(\"x\")'",
            "perl -MFile::Path=rmtree -e 'rmtree(q(x))'",
            "perl -MFile::Path=remove_tree -e 'remove_tree(q(x))'",
        ] {
            assert!(refused(command), "{command}");
        }
        let error = check_deny_list("rm -rf /").unwrap_err().to_string();
        assert!(error.starts_with("Error: command refused by the safety guard"), "{error}");
    }

    #[test]
    fn plain_deletes_and_lookalikes_are_allowed() {
        for command in ["rm notes.txt", "rm -d empty", "git rm --cached a", "rm my-ref.txt", "perm -r", "ls -rf; rm a"]
        {
            assert!(!refused(command), "{command}");
        }
    }

    #[test]
    fn the_deny_list_blocks_disk_power_and_fork_bomb_commands() {
        for command in [
            "mkfs.ext4 /dev/sdb1",
            "sudo mkfs -t ext4 x",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "echo x > /dev/nvme0n1",
            "shutdown -h now",
            "sudo reboot",
            "systemctl poweroff",
            "init 0",
            ":(){ :|:& };:",
            "format c:",
            "ls; format d:",
        ] {
            assert!(refused(command), "{command}");
        }
    }

    #[test]
    fn ordinary_commands_pass_the_deny_list() {
        for command in [
            "ls -la",
            "dd if=a.img of=b.img",
            "echo hi > /dev/null",
            "cargo fmt",
            "git log --format=%h",
            "find . -name '*.rs'",
            "$CC -f x.c",
            "echo $HOME -r",
        ] {
            assert!(!refused(command), "{command}");
        }
    }

    #[test]
    fn the_restriction_blocks_parent_steps() {
        let ws = workspace("dotdot");
        for command in ["cat ../x", "cd .. && ls", "ls src/../..", "cat ..\\x", "x=..; ls"] {
            assert!(check_workspace(command, &ws).is_err(), "{command}");
        }
        for command in ["git diff HEAD~1..HEAD", "echo ...", "seq 1..3", "ls .hidden"] {
            assert!(check_workspace(command, &ws).is_ok(), "{command}");
        }
    }

    #[test]
    fn the_restriction_blocks_absolute_and_home_paths_outside_the_workspace() {
        let ws = workspace("absolute");
        for command in [
            "cat /etc/passwd",
            "ls /",
            "echo x >/tmp/x",
            "cat ~/.ssh/id_rsa",
            "ls ~",
            "ls ~root",
            "cp a \"/etc/x\"",
            "make --prefix=/usr",
        ] {
            let error = check_workspace(command, &ws).unwrap_err().to_string();
            assert!(error.contains("is outside the workspace"), "{command}: {error}");
        }
    }

    #[test]
    fn the_restriction_allows_workspace_paths_harmless_devices_and_urls() {
        let ws = workspace("allowed");
        let inside = format!("cat {}/src/main.rs", ws.display());
        for command in [
            inside.as_str(),
            "ls 2>/dev/null",
            "cat src/a | tee /dev/stderr",
            "curl https://example.com/a/b",
            "sed s/a/b/ x",
        ] {
            assert!(check_workspace(command, &ws).is_ok(), "{command}");
        }
    }

    #[test]
    fn an_unrestricted_call_skips_the_workspace_checks_but_not_the_deny_list() {
        let ctx = CallContext {
            workspace: workspace("free").display().to_string(),
            restrict_to_workspace: false,
            ..CallContext::default()
        };
        assert!(check("cat /etc/passwd ../x", &ctx).is_ok());
        assert!(check("rm -rf /", &ctx).is_err());
        let restricted = CallContext { restrict_to_workspace: true, ..ctx };
        assert!(check("cat /etc/passwd", &restricted).is_err());
    }
}
