//! The files a plugin's program needs in order to start: its executable, the interpreter its
//! `#!` line names, script arguments, and (for programs the user installed, such as a pyenv or
//! nvm interpreter or a virtualenv's Python) the tree the program was installed in.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::policy::Policy;
use crate::system::{data_dir, home_dir};

/// How many bytes of an executable are read to find a `#!` line.
const SHEBANG_BYTES: u64 = 256;

/// Grants `policy` what the program `command ARGS…` needs to start.
///
/// - the executable (found on `search_path` when `command` has no `/`), read and execute, and
///   the file it is a symbolic link to (a virtualenv's `bin/python`);
/// - the interpreter of its `#!` line, also through `/usr/bin/env NAME`, read and execute;
/// - each argument naming an existing file by an absolute path, read only (a script);
/// - with `install_trees`, for the executable and the interpreter, each as named and as its
///   link resolves: the top directory in the home directory that holds it (`~/.pyenv` for
///   `~/.pyenv/shims/python3`), and the prefix it is installed under (`/srv/venv` for
///   `/srv/venv/bin/python`, where a Python finds its libraries), read and execute. Neither is
///   granted when it is `/`, the home directory, or holds oxibot's data directory; a program
///   inside the data directory only gets its own file.
pub fn allow_program(
    policy: &mut Policy,
    command: &Path,
    args: &[String],
    search_path: Option<&OsStr>,
    install_trees: bool,
) {
    let mut executables = Vec::new();
    if let Some(program) = resolve(command, search_path) {
        if let Some(interpreter) = interpreter_of(&program, search_path) {
            executables.push(interpreter);
        }
        executables.push(program);
    }
    let resolved: Vec<PathBuf> = executables.iter().filter_map(|program| std::fs::canonicalize(program).ok()).collect();
    for program in executables.into_iter().chain(resolved) {
        if install_trees {
            for tree in install_tree(&program).into_iter().chain(install_prefix(&program)) {
                policy.allow_execute(tree);
            }
        }
        policy.allow_execute(program);
    }
    for arg in args {
        let path = Path::new(arg);
        if path.is_absolute() && path.is_file() {
            policy.allow_read_only(path);
        }
    }
}

/// The file `command` runs: itself when it names a path, else the first executable file of that
/// name on `search_path`.
pub fn resolve(command: &Path, search_path: Option<&OsStr>) -> Option<PathBuf> {
    if command.components().count() > 1 {
        return std::path::absolute(command).ok();
    }
    std::env::split_paths(search_path?).map(|dir| dir.join(command)).find(|candidate| is_executable_file(candidate))
}

/// The interpreter named by the `#!` line of `program`, resolved through `env` when the line
/// is `#!/usr/bin/env NAME`.
fn interpreter_of(program: &Path, search_path: Option<&OsStr>) -> Option<PathBuf> {
    let mut head = Vec::new();
    std::fs::File::open(program).ok()?.take(SHEBANG_BYTES).read_to_end(&mut head).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|&b| b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    if interpreter.file_name() != Some(OsStr::new("env")) {
        return Some(interpreter);
    }
    let name = words.find(|word| !word.starts_with('-'))?;
    resolve(Path::new(name), search_path)
}

/// The top directory in the home directory holding `program`, unless it holds the data dir.
fn install_tree(program: &Path) -> Option<PathBuf> {
    let home = home_dir()?;
    let first = program.strip_prefix(&home).ok()?.components().next()?;
    let tree = home.join(first);
    if tree == program || data_dir().is_some_and(|data| data.starts_with(&tree)) {
        return None;
    }
    Some(tree)
}

/// The prefix `program` is installed under: `<prefix>` for `<prefix>/bin/<name>`, unless that
/// is `/`, the home directory, or holds the data dir (a program in `~/bin` gets no prefix).
fn install_prefix(program: &Path) -> Option<PathBuf> {
    let bin = program.parent()?;
    if bin.file_name() != Some(OsStr::new("bin")) {
        return None;
    }
    let prefix = bin.parent().filter(|prefix| prefix.parent().is_some())?;
    let holds_private =
        home_dir().is_some_and(|home| home == prefix) || data_dir().is_some_and(|data| data.starts_with(prefix));
    (!holds_private).then(|| prefix.to_path_buf())
}

/// Whether `path` is a regular file with an execute bit.
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-sandbox-program-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_executable(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_bare_command_is_found_on_the_search_path() {
        let dir = scratch("resolve");
        write_executable(&dir.join("tool"), "#!/bin/sh\n");
        std::fs::write(dir.join("plain"), "not executable").unwrap();
        let search = dir.as_os_str();
        assert_eq!(resolve(Path::new("tool"), Some(search)), Some(dir.join("tool")));
        assert_eq!(resolve(Path::new("plain"), Some(search)), None);
        assert_eq!(resolve(Path::new("/abs/x"), None), Some(PathBuf::from("/abs/x")));
    }

    #[test]
    fn a_script_gets_its_interpreter_through_env_and_its_script_argument() {
        let dir = scratch("script");
        write_executable(&dir.join("python9"), "binary");
        write_executable(&dir.join("plugin"), "#!/usr/bin/env -S python9 -u\nprint()\n");
        let script = dir.join("extra.py");
        std::fs::write(&script, "pass").unwrap();
        let mut policy = Policy::new();
        let args = [script.display().to_string(), "--flag".to_owned(), "/no/such/file".to_owned()];
        allow_program(&mut policy, &dir.join("plugin"), &args, Some(dir.as_os_str()), false);
        assert_eq!(policy.executable(), [dir.join("python9"), dir.join("plugin")]);
        assert_eq!(policy.read_only(), [script]);
    }

    #[test]
    fn a_linked_interpreter_gets_its_target_and_both_install_prefixes() {
        let dir = scratch("venv");
        let base = dir.join("base/bin");
        let venv = dir.join("venv/bin");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(&venv).unwrap();
        write_executable(&base.join("python9"), "binary");
        std::os::unix::fs::symlink(base.join("python9"), venv.join("python")).unwrap();
        let mut policy = Policy::new();
        allow_program(&mut policy, &venv.join("python"), &[], None, true);
        for granted in [dir.join("venv"), venv.join("python"), dir.join("base"), base.join("python9")] {
            assert!(policy.executable().contains(&granted), "{} not in {:?}", granted.display(), policy.executable());
        }
        let mut without_trees = Policy::new();
        allow_program(&mut without_trees, &venv.join("python"), &[], None, false);
        assert_eq!(without_trees.executable(), [venv.join("python"), base.join("python9")]);
    }

    #[test]
    fn no_prefix_is_granted_for_the_root_the_home_directory_or_a_non_bin_directory() {
        assert_eq!(install_prefix(Path::new("/bin/sh")), None);
        assert_eq!(install_prefix(Path::new("/srv/tools/run")), None);
        assert_eq!(install_prefix(Path::new("/srv/venv/bin/python")), Some(PathBuf::from("/srv/venv")));
        if let Some(home) = home_dir() {
            assert_eq!(install_prefix(&home.join("bin/tool")), None);
        }
    }

    #[test]
    fn a_direct_interpreter_line_is_used_as_written() {
        let dir = scratch("direct");
        write_executable(&dir.join("plugin"), "#!/bin/sh -e\n");
        assert_eq!(interpreter_of(&dir.join("plugin"), None), Some(PathBuf::from("/bin/sh")));
        write_executable(&dir.join("binary"), "\x7fELF");
        assert_eq!(interpreter_of(&dir.join("binary"), None), None);
    }
}
