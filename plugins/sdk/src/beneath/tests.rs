//! Tests of race-free workspace access: escapes refused by both resolvers, links inside kept.

use super::*;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const RESOLVERS: [Resolver; 2] = [Resolver::Openat2, Resolver::Walk];

/// A workspace `ws/` and a sibling `out/` holding `secret.txt`, under a fresh temp dir.
struct Scene(PathBuf);

impl Scene {
    fn new(label: &str) -> Scene {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("oxibot-beneath-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/sub")).unwrap();
        std::fs::create_dir_all(dir.join("out/dir")).unwrap();
        std::fs::write(dir.join("ws/inside.txt"), "inside").unwrap();
        std::fs::write(dir.join("out/secret.txt"), "secret").unwrap();
        Scene(dir.canonicalize().unwrap())
    }

    fn ws(&self) -> PathBuf {
        self.0.join("ws")
    }

    fn out(&self) -> PathBuf {
        self.0.join("out")
    }

    fn link(&self, target: impl AsRef<Path>, name: &str) {
        symlink(target, self.ws().join(name)).unwrap();
    }

    fn dir(&self, restricted: bool, resolver: Resolver) -> WorkspaceDir {
        let ctx = CallContext {
            workspace: self.ws().display().to_string(),
            restrict_to_workspace: restricted,
            ..CallContext::default()
        };
        WorkspaceDir::open_with(&ctx, resolver).unwrap()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read(dir: &WorkspaceDir, path: &str) -> Result<String, AccessError> {
    let mut text = String::new();
    dir.open_read(&dir.resolve(path)?)?.read_to_string(&mut text)?;
    Ok(text)
}

fn is_outside<T: std::fmt::Debug>(result: Result<T, AccessError>) -> bool {
    matches!(result, Err(AccessError::Outside { .. }))
}

#[test]
fn paths_inside_open_and_links_that_stay_inside_are_followed() {
    let scene = Scene::new("inside");
    scene.link("inside.txt", "rel-link");
    scene.link(scene.ws().join("inside.txt"), "abs-link");
    scene.link("../inside.txt", "sub/up-link");
    scene.link(scene.ws().join("sub"), "abs-dir");
    for resolver in RESOLVERS {
        let dir = scene.dir(true, resolver);
        for path in ["inside.txt", "./sub/../inside.txt", "rel-link", "abs-link", "sub/up-link", "abs-dir/up-link"] {
            assert_eq!(read(&dir, path).unwrap(), "inside", "{path} with {resolver:?}");
        }
        let absolute = scene.ws().join("inside.txt").display().to_string();
        assert_eq!(read(&dir, &absolute).unwrap(), "inside");
        assert!(dir.metadata(&dir.resolve(".").unwrap()).unwrap().is_dir());
    }
}

#[test]
fn every_escape_is_refused_as_outside_the_workspace() {
    let scene = Scene::new("escapes");
    scene.link("/etc", "etc");
    scene.link(scene.out(), "mid");
    scene.link("../out/secret.txt", "rel-out");
    scene.link("rel-out", "chain-2");
    scene.link(scene.ws().join("chain-2"), "chain-1");
    scene.link("/proc/self/root/etc/passwd", "magic");
    for resolver in RESOLVERS {
        let dir = scene.dir(true, resolver);
        for path in ["../out/secret.txt", "sub/../../out/secret.txt", "/etc/passwd"] {
            assert!(is_outside(dir.resolve(path)), "{path} with {resolver:?}");
        }
        for path in ["etc/passwd", "mid/secret.txt", "rel-out", "chain-1", "magic"] {
            let err = read(&dir, path).unwrap_err();
            assert!(matches!(err, AccessError::Outside { .. }), "{path} with {resolver:?}: {err}");
            assert!(err.to_string().starts_with(&format!("path '{path}' is outside the workspace")), "{err}");
        }
        assert!(is_outside(dir.create_dir_all(&dir.resolve("mid/new/deeper").unwrap())));
        assert!(is_outside(dir.replace_slot(&dir.resolve("rel-out").unwrap())));
        assert!(is_outside(dir.open_write(&dir.resolve("mid/new.txt").unwrap())));
    }
    assert!(!scene.out().join("new").exists() && !scene.out().join("new.txt").exists());
}

#[test]
fn without_the_restriction_paths_open_anywhere() {
    let scene = Scene::new("unrestricted");
    scene.link(scene.out(), "mid");
    let dir = scene.dir(false, Resolver::Openat2);
    assert_eq!(read(&dir, "mid/secret.txt").unwrap(), "secret");
    assert_eq!(read(&dir, "../out/secret.txt").unwrap(), "secret");
    assert!(read(&dir, "/etc/passwd").unwrap().contains("root"));
}

#[test]
fn a_symlink_loop_is_a_plain_error_not_an_escape() {
    let scene = Scene::new("loop");
    scene.link("loop-b", "loop-a");
    scene.link("loop-a", "loop-b");
    for resolver in RESOLVERS {
        let err = read(&scene.dir(true, resolver), "loop-a").unwrap_err();
        assert!(matches!(&err, AccessError::Io(e) if e.raw_os_error() == Some(Errno::LOOP.raw_os_error())), "{err}");
    }
}

#[test]
fn directories_are_created_listed_and_written_through_handles() {
    let scene = Scene::new("write");
    for resolver in RESOLVERS {
        let dir = scene.dir(true, resolver);
        let made = dir.create_dir_all(&dir.resolve(&format!("new-{resolver:?}/a/b")).unwrap()).unwrap();
        made.create_new(OsStr::new("f.tmp")).unwrap().write_all(b"x").unwrap();
        made.rename(OsStr::new("f.tmp"), OsStr::new("f")).unwrap();
        made.sync().unwrap();
        let entries = dir.read_dir(made.target()).unwrap();
        assert_eq!(entries, [DirEntry { name: "f".into(), kind: EntryKind::File }]);
        assert!(made.create_new(OsStr::new("f")).is_err(), "create_new never opens what exists");
        let mut file = dir.open_write(&dir.resolve(&format!("new-{resolver:?}/g")).unwrap()).unwrap();
        file.write_all(b"g").unwrap();
    }
    assert_eq!(std::fs::read_to_string(scene.ws().join("new-Walk/a/b/f")).unwrap(), "x");
    assert_eq!(std::fs::read_to_string(scene.ws().join("new-Openat2/g")).unwrap(), "g");
}

#[test]
fn a_replace_slot_follows_a_link_inside_and_replaces_a_dangling_one() {
    let scene = Scene::new("slot");
    scene.link(scene.ws().join("sub/../inside.txt"), "alias");
    scene.link("missing.txt", "dangling");
    for resolver in RESOLVERS {
        let dir = scene.dir(true, resolver);
        let (slot, name) = dir.replace_slot(&dir.resolve("alias").unwrap()).unwrap();
        assert_eq!((slot.target().path(), name.as_os_str()), (scene.ws().as_path(), OsStr::new("inside.txt")));
        let (slot, name) = dir.replace_slot(&dir.resolve("dangling").unwrap()).unwrap();
        assert_eq!((slot.target().path(), name.as_os_str()), (scene.ws().as_path(), OsStr::new("dangling")));
        assert!(dir.symlink_metadata(&dir.resolve("dangling").unwrap()).unwrap().is_symlink());
    }
}

/// Swaps `ws/swapped` between an inside and an outside target until stopped; the reads
/// in between must only ever see the inside.
#[test]
fn a_symlink_swapped_in_a_loop_never_leads_outside() {
    let scene = Scene::new("race");
    scene.link("inside.txt", "swapped");
    let (stop, swaps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let swapper = std::thread::spawn({
        let (stop, swaps, ws, out) = (stop.clone(), swaps.clone(), scene.ws(), scene.out());
        move || {
            let targets = [PathBuf::from("inside.txt"), out.join("secret.txt")];
            while !stop.load(Ordering::Relaxed) {
                for target in &targets {
                    let _ = std::fs::remove_file(ws.join(".spare"));
                    symlink(target, ws.join(".spare")).unwrap();
                    std::fs::rename(ws.join(".spare"), ws.join("swapped")).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    // The reads are quick: let the swapping start first, or they would all see one target.
    while swaps.load(Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    let mut seen = Vec::new();
    for resolver in RESOLVERS {
        let dir = scene.dir(true, resolver);
        for _ in 0..500 {
            seen.push(read(&dir, "swapped").unwrap_or_else(|e| format!("refused: {e}")));
            // A read takes microseconds: without a yield, all of them can fit in one time
            // slice of this thread while the swapper waits, and see only one target.
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(!seen.iter().any(|s| s == "secret"), "the outside file was read");
    assert!(seen.iter().any(|s| s == "inside"), "the race never let the inside through");
}
