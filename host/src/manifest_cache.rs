//! Remembered manifests of tool plugins that announce `static_manifest`, so the host can offer
//! their tools without starting them and start each one on its first call.
//!
//! An entry is served only while the plugin's *identity* is unchanged: a SHA-256 over the
//! protocol and kernel versions, the plugin's name, its resolved executable and every argument
//! that names a file (device, inode, size, modification and change times of each), its other
//! arguments, its environment and its confinement. Rewriting, replacing or touching the
//! executable changes the change time, so an entry can never outlive the program that wrote it.
//! The environment is hashed, never stored: it may hold API keys.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use oxibot_proto::{PROTOCOL_VERSION, ToolSpec};
use ring::digest::{Context, SHA256};
use serde::{Deserialize, Serialize};

use super::spec::PluginSpec;
use crate::fsutil;

/// The directory of remembered manifests (`<data dir>/cache/manifests`).
#[derive(Debug, Clone)]
pub struct ManifestCache {
    dir: PathBuf,
}

/// What is remembered of a plugin: what its `hello` and `manifest` said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remembered {
    /// The name it announced in `hello`.
    pub announced: String,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
}

/// One file of the cache.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// The identity the manifest belongs to (hex SHA-256).
    identity: String,
    #[serde(flatten)]
    remembered: Remembered,
}

impl ManifestCache {
    /// A cache kept in `dir` (created on the first store).
    pub fn new(dir: impl Into<PathBuf>) -> ManifestCache {
        ManifestCache { dir: dir.into() }
    }

    /// The remembered manifest of `spec`, if one was stored for exactly this identity.
    pub fn lookup(&self, spec: &PluginSpec) -> Option<Remembered> {
        self.stored_for(spec, &identity(spec)?)
    }

    /// The stored entry of `spec`, if it was stored under `identity`.
    fn stored_for(&self, spec: &PluginSpec, identity: &str) -> Option<Remembered> {
        let bytes = std::fs::read(self.path(spec)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        (entry.identity == identity).then_some(entry.remembered)
    }

    /// Remembers what `spec`'s plugin announced, unless that is what is remembered already.
    /// Failing to write only costs the next start its laziness, so it is logged, not returned.
    pub fn store(&self, spec: &PluginSpec, remembered: Remembered) {
        let Some(identity) = identity(spec) else { return };
        if self.stored_for(spec, &identity).as_ref() == Some(&remembered) {
            return;
        }
        let entry = Entry { identity, remembered };
        let written = serde_json::to_vec(&entry)
            .map_err(std::io::Error::other)
            .and_then(|bytes| fsutil::write_atomic(&self.path(spec), &bytes));
        if let Err(error) = written {
            tracing::debug!(plugin = %spec.name, %error, "cannot remember the plugin's manifest");
        }
    }

    /// Forgets `spec`'s manifest (the plugin no longer announces `static_manifest`).
    pub fn forget(&self, spec: &PluginSpec) {
        let _ = std::fs::remove_file(self.path(spec));
    }

    fn path(&self, spec: &PluginSpec) -> PathBuf {
        self.dir.join(entry_name(spec))
    }
}

/// `<name>-<digest of the command>.json`: one file per plugin and program.
pub(crate) fn entry_name(spec: &PluginSpec) -> String {
    let mut digest = Context::new(&SHA256);
    digest.update(spec.command.as_os_str().as_encoded_bytes());
    let safe: String =
        spec.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!("{safe}-{}.json", &hex(digest.finish().as_ref())[..16])
}

/// The identity of everything that decides `spec`'s manifest, or `None` when its executable
/// cannot be found (such a plugin is started, not remembered).
pub(crate) fn identity(spec: &PluginSpec) -> Option<String> {
    let executable = resolve(&spec.command)?;
    let mut digest = Context::new(&SHA256);
    let mut field = |bytes: &[u8]| {
        digest.update(&(bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    };
    field(&PROTOCOL_VERSION.to_le_bytes());
    field(env!("CARGO_PKG_VERSION").as_bytes());
    field(spec.name.as_bytes());
    field(executable.as_os_str().as_encoded_bytes());
    field(file_identity(&executable)?.as_bytes());
    for arg in &spec.args {
        field(arg.as_bytes());
        let path = Path::new(arg);
        if path.is_file() {
            field(file_identity(path)?.as_bytes());
        }
    }
    for (key, value) in &spec.env {
        field(key.as_bytes());
        field(value.as_bytes());
    }
    field(format!("{:?}", spec.confinement).as_bytes());
    Some(hex(digest.finish().as_ref()))
}

/// Device, inode, size, and modification and change times (ns) of the file `path` names.
fn file_identity(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    Some(format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    ))
}

/// The program `command` runs: itself when it names a path, else the first match on `PATH`.
fn resolve(command: &Path) -> Option<PathBuf> {
    if command.components().count() > 1 || command.is_absolute() {
        return command.is_file().then(|| command.to_path_buf());
    }
    let search = std::env::var_os("PATH")?;
    std::env::split_paths(&search).map(|dir| dir.join(command)).find(|candidate| is_program(candidate))
}

fn is_program(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::spec::Origin;

    fn program(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("oxibot-tool-sample");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn remembered(description: &str) -> Remembered {
        let tool = ToolSpec {
            name: "sample".into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object"}),
            read_only: true,
            exclusive: false,
            timeout_secs: None,
        };
        Remembered { announced: "sample".into(), tools: vec![tool] }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oxibot-manifest-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_stored_manifest_is_served_for_the_same_program_arguments_and_environment() {
        let dir = scratch("same");
        let spec = PluginSpec::for_executable(program(&dir, "#!/bin/sh\n"), Origin::Bundled);
        let cache = ManifestCache::new(dir.join("cache"));
        assert_eq!(cache.lookup(&spec), None);
        cache.store(&spec, remembered("v1"));
        assert_eq!(cache.lookup(&spec), Some(remembered("v1")));
    }

    #[test]
    fn a_rewritten_program_or_a_changed_environment_is_not_served_an_old_manifest() {
        let dir = scratch("changed");
        let path = program(&dir, "#!/bin/sh\n");
        let spec = PluginSpec::for_executable(path.clone(), Origin::Bundled);
        let cache = ManifestCache::new(dir.join("cache"));
        cache.store(&spec, remembered("v1"));

        let mut with_key = spec.clone();
        with_key.env.insert("BRAVE_API_KEY".into(), "secret-value".into());
        assert_eq!(cache.lookup(&with_key), None, "the environment is part of the identity");
        cache.store(&with_key, remembered("v1"));
        assert_eq!(cache.lookup(&with_key), Some(remembered("v1")));
        let stored: String = std::fs::read_dir(dir.join("cache"))
            .unwrap()
            .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
            .collect();
        assert!(!stored.contains("secret-value"), "the environment is hashed, never stored: {stored}");

        program(&dir, "#!/bin/sh\nexit 0\n");
        assert_eq!(cache.lookup(&spec), None, "a rewritten program is started again");
    }

    #[test]
    fn a_program_that_cannot_be_found_is_never_remembered() {
        let dir = scratch("missing");
        let spec = PluginSpec::for_executable(dir.join("not-there"), Origin::Config);
        let cache = ManifestCache::new(dir.join("cache"));
        cache.store(&spec, remembered("v1"));
        assert_eq!(cache.lookup(&spec), None);
        assert!(!dir.join("cache").exists());
    }
}
