//! The fs plugin's workspace restriction attacked as an attacker would, through the real
//! plugin process: symlinks swapped in a loop while the tools run (the time-of-check to
//! time-of-use race), and paths built to escape (`..` chains, absolute paths, links to
//! `/etc`, link chains, a linked directory mid-path, `foo/../../x`).
//!
//! Every race test is a bounded loop (a fixed number of calls, no clock), counts the calls
//! that reached outside the workspace and asserts that there were none, so a failure reports
//! the figure (e.g. "read_file escaped 35/300").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use oxibot_kernel::plugin::PluginHost;
use oxibot_proto::CallContext;
use oxibot_tests::{TempDir, context, start_host, tool_spec};
use serde_json::{Value, json};

/// Calls made by each read-like race test.
const READS: usize = 300;
/// Calls made by each write-like race test.
const WRITES: usize = 150;
/// What the file outside the workspace holds; it must never change, and never be shown.
const OUTSIDE_CONTENT: &str = "needle OUTSIDE-SECRET\n";
/// What the file inside the workspace holds before each call.
const INSIDE_CONTENT: &str = "needle inside\n";

/// A background thread that swaps the symlink `link` between two targets as fast as it can,
/// each swap an atomic rename of a freshly made symlink over it.
struct Swapper {
    /// Tells the thread to stop.
    stop: Arc<AtomicBool>,
    /// How many swaps were made, so a test can show the attack really ran.
    swaps: Arc<AtomicU64>,
    /// The swapping thread, joined on drop.
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    fn start(link: &Path, inside: &Path, outside: &Path) -> Swapper {
        let (stop, swaps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (link, targets) = (link.to_path_buf(), [inside.to_path_buf(), outside.to_path_buf()]);
        let spare = link.with_file_name(format!(".{}.swap", link.file_name().unwrap().to_string_lossy()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&targets[0], &link).unwrap();
        let thread = std::thread::spawn({
            let (stop, swaps) = (stop.clone(), swaps.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    for target in &targets {
                        let _ = std::fs::remove_file(&spare);
                        std::os::unix::fs::symlink(target, &spare).unwrap();
                        std::fs::rename(&spare, &link).unwrap();
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Swapper { stop, swaps, thread: Some(thread) }
    }

    /// Stops swapping; returns how many swaps were made.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How the fs plugin resolves paths beneath the workspace root.
#[derive(Debug, Clone, Copy)]
enum Resolver {
    /// `openat2(RESOLVE_BENEATH)`, the kernel's own containment.
    Openat2,
    /// The `O_NOFOLLOW` walk used where `openat2` is missing, forced through its variable.
    Walk,
}

/// A workspace and a directory beside it, each holding a file and a directory, and a host
/// running the real fs plugin.
struct Arena {
    ws: TempDir,
    outside: TempDir,
    host: PluginHost,
}

impl Arena {
    async fn new(label: &str, resolver: Resolver) -> Arena {
        let ws = TempDir::new(&format!("fsrace-ws-{label}"));
        let outside = TempDir::new(&format!("fsrace-out-{label}"));
        ws.write("inside.txt", INSIDE_CONTENT);
        ws.write("inner/same.txt", INSIDE_CONTENT);
        ws.write("inner/inner-file.txt", INSIDE_CONTENT);
        ws.write("foo/keep.txt", "");
        outside.write("secret.txt", OUTSIDE_CONTENT);
        outside.write("dir/same.txt", OUTSIDE_CONTENT);
        outside.write("dir/outside-secret.txt", OUTSIDE_CONTENT);
        let mut spec = tool_spec("fs");
        if let Resolver::Walk = resolver {
            spec.env.insert("OXIBOT_WORKSPACE_RESOLVER".into(), "walk".into());
        }
        let host = start_host(vec![spec]).await;
        Arena { ws, outside, host }
    }

    fn restricted(&self) -> CallContext {
        CallContext { restrict_to_workspace: true, ..context(self.ws.path()) }
    }

    fn unrestricted(&self) -> CallContext {
        CallContext { restrict_to_workspace: false, ..context(self.ws.path()) }
    }

    /// Calls `tool`; the reply's text and whether it is an error.
    async fn call(&self, tool: &str, args: Value, ctx: CallContext) -> (String, bool) {
        let result = self.host.call(tool, args, ctx, None).await.unwrap();
        (result.content, result.is_error)
    }

    fn outside_file(&self) -> PathBuf {
        self.outside.path().join("secret.txt")
    }

    fn outside_untouched(&self) -> bool {
        std::fs::read_to_string(self.outside_file()).is_ok_and(|c| c == OUTSIDE_CONTENT)
            && std::fs::read_to_string(self.outside.path().join("dir/same.txt")).is_ok_and(|c| c == OUTSIDE_CONTENT)
            && !self.outside.path().join("dir/new.txt").exists()
    }

    /// Puts the outside files back after an escape, so each escape is counted once.
    fn restore_outside(&self) {
        self.outside.write("secret.txt", OUTSIDE_CONTENT);
        self.outside.write("dir/same.txt", OUTSIDE_CONTENT);
        let _ = std::fs::remove_file(self.outside.path().join("dir/new.txt"));
    }
}

/// Where the swapped link points on the inside.
#[derive(Clone, Copy)]
enum Inside {
    /// A relative link to this name in the workspace.
    Relative(&'static str),
    /// An absolute link to this name in the workspace.
    Absolute(&'static str),
}

/// One attack: a symlink in the workspace swapped between an inside and an outside target
/// while a tool is called through it.
struct Attack {
    /// The symlink's name in the workspace.
    link: &'static str,
    inside: Inside,
    /// Its other target, under the outside directory.
    outside: &'static str,
    tool: &'static str,
    calls: usize,
    /// The arguments of call `i`.
    args: fn(usize) -> Value,
    /// Text in a successful reply showing the call reached the inside target.
    served: &'static str,
}

/// How one run of an attack went.
#[derive(Debug)]
struct Outcome {
    /// Calls that read, listed, changed or showed anything outside.
    escaped: usize,
    /// Calls that reached the inside target.
    served: usize,
    /// Link swaps made while the calls ran.
    swaps: u64,
}

impl Attack {
    /// Runs the attack against the plugin with each resolver; asserts that nothing escaped,
    /// that the outside files are as they were, and that the tool kept working inside.
    async fn run(&self, label: &str) {
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            let arena = Arena::new(label, resolver).await;
            let outcome = self.against(&arena).await;
            let what = format!("{} ({label}) via {} with {resolver:?}", self.tool, self.link);
            // Shown with --nocapture: the figures of each run.
            eprintln!(
                "{what}: escaped {}/{}, served {}, {} swaps",
                outcome.escaped, self.calls, outcome.served, outcome.swaps
            );
            assert_eq!(outcome.escaped, 0, "{what} escaped {}/{}: {outcome:?}", outcome.escaped, self.calls);
            assert!(arena.outside_untouched(), "{what}: the outside files changed");
            assert!(outcome.served > 0, "{what} never reached the inside, so the race was not run: {outcome:?}");
            arena.host.shutdown().await;
        }
    }

    async fn against(&self, arena: &Arena) -> Outcome {
        let inside = match self.inside {
            Inside::Relative(name) => PathBuf::from(name),
            Inside::Absolute(name) => arena.ws.path().join(name),
        };
        let swapper =
            Swapper::start(&arena.ws.path().join(self.link), &inside, &arena.outside.path().join(self.outside));
        let (mut escaped, mut served) = (0, 0);
        for i in 0..self.calls {
            arena.ws.write("inside.txt", INSIDE_CONTENT);
            arena.ws.write("inner/same.txt", INSIDE_CONTENT);
            let (reply, is_error) = arena.call(self.tool, (self.args)(i), arena.restricted()).await;
            if reply.contains("OUTSIDE-SECRET") || reply.contains("outside-secret") || !arena.outside_untouched() {
                escaped += 1;
                arena.restore_outside();
            } else if !is_error && reply.contains(self.served) {
                served += 1;
            }
        }
        Outcome { escaped, served, swaps: swapper.finish() }
    }
}

#[actix_rt::test]
async fn read_file_through_a_swapped_symlink_never_reads_the_outside_file() {
    Attack {
        link: "link.txt",
        inside: Inside::Relative("inside.txt"),
        outside: "secret.txt",
        tool: "read_file",
        calls: READS,
        args: |_| json!({"path": "link.txt"}),
        served: "needle inside",
    }
    .run("read")
    .await;
}

#[actix_rt::test]
async fn read_file_through_a_swapped_directory_mid_path_never_reads_outside() {
    Attack {
        link: "dirlink",
        inside: Inside::Absolute("inner"),
        outside: "dir",
        tool: "read_file",
        calls: READS,
        args: |_| json!({"path": "dirlink/same.txt"}),
        served: "needle inside",
    }
    .run("read-mid")
    .await;
}

#[actix_rt::test]
async fn write_file_through_a_swapped_symlink_never_writes_the_outside_file() {
    Attack {
        link: "link.txt",
        inside: Inside::Absolute("inside.txt"),
        outside: "secret.txt",
        tool: "write_file",
        calls: WRITES,
        args: |i| json!({"path": "link.txt", "content": format!("w{i}")}),
        served: "wrote",
    }
    .run("write")
    .await;
}

#[actix_rt::test]
async fn write_file_through_a_swapped_directory_mid_path_never_writes_outside() {
    let existing: fn(usize) -> Value = |i| json!({"path": "dirlink/same.txt", "content": format!("w{i}")});
    let new: fn(usize) -> Value = |i| json!({"path": "dirlink/new.txt", "content": format!("w{i}")});
    for (args, label) in [(existing, "write-mid"), (new, "write-new")] {
        Attack {
            link: "dirlink",
            inside: Inside::Relative("inner"),
            outside: "dir",
            tool: "write_file",
            calls: WRITES,
            args,
            served: "wrote",
        }
        .run(label)
        .await;
    }
}

#[actix_rt::test]
async fn edit_file_through_a_swapped_symlink_never_edits_or_shows_the_outside_file() {
    Attack {
        link: "link.txt",
        inside: Inside::Relative("inside.txt"),
        outside: "secret.txt",
        tool: "edit_file",
        calls: WRITES,
        args: |i| json!({"path": "link.txt", "old_text": "needle", "new_text": format!("edit{i}")}),
        served: "edited link.txt",
    }
    .run("edit")
    .await;
}

#[actix_rt::test]
async fn list_dir_of_a_swapped_directory_symlink_never_lists_outside() {
    let swapped = |args: fn(usize) -> Value, served| Attack {
        link: "dirlink",
        inside: Inside::Relative("inner"),
        outside: "dir",
        tool: "list_dir",
        calls: READS,
        args,
        served,
    };
    swapped(|_| json!({"path": "dirlink"}), "inner-file.txt").run("list").await;
    swapped(|_| json!({"path": ".", "recursive": true}), "inner/inner-file.txt").run("list-all").await;
}

#[actix_rt::test]
async fn glob_through_a_swapped_directory_never_finds_outside_files() {
    let swapped = |args: fn(usize) -> Value, served| Attack {
        link: "dirlink",
        inside: Inside::Relative("inner"),
        outside: "dir",
        tool: "glob",
        calls: READS,
        args,
        served,
    };
    swapped(|_| json!({"pattern": "*.txt", "path": "dirlink"}), "inner-file.txt").run("glob").await;
    swapped(|_| json!({"pattern": "**/*.txt"}), "inner/inner-file.txt").run("glob-all").await;
}

#[actix_rt::test]
async fn grep_through_a_swapped_directory_never_searches_outside_files() {
    let swapped = |args: fn(usize) -> Value, served| Attack {
        link: "dirlink",
        inside: Inside::Relative("inner"),
        outside: "dir",
        tool: "grep",
        calls: READS,
        args,
        served,
    };
    swapped(|_| json!({"pattern": "needle", "path": "dirlink", "output_mode": "content"}), "needle inside")
        .run("grep")
        .await;
    swapped(|_| json!({"pattern": "needle", "output_mode": "content"}), "needle inside").run("grep-all").await;
}

#[actix_rt::test]
async fn grep_of_a_swapped_file_symlink_never_searches_the_outside_file() {
    Attack {
        link: "link.txt",
        inside: Inside::Relative("inside.txt"),
        outside: "secret.txt",
        tool: "grep",
        calls: READS,
        args: |_| json!({"pattern": "needle", "path": "link.txt", "output_mode": "content"}),
        served: "needle inside",
    }
    .run("grep-file")
    .await;
}

/// One way of naming the outside file and the outside directory from inside the workspace.
struct Escape {
    what: &'static str,
    /// A path to the outside file `secret.txt`.
    file: String,
    /// A path to the outside directory `dir`.
    dir: String,
    /// Whether writing through it is allowed when unrestricted (never for `/etc`).
    writable: bool,
}

/// The escapes an attacker would try, with the links they need made in the workspace.
fn escapes(arena: &Arena) -> Vec<Escape> {
    let (ws, out) = (arena.ws.path(), arena.outside.path());
    let out_name = out.file_name().unwrap().to_string_lossy().into_owned();
    std::os::unix::fs::symlink("/etc", ws.join("etc-link")).unwrap();
    std::os::unix::fs::symlink(out, ws.join("mid")).unwrap();
    std::os::unix::fs::symlink(format!("../{out_name}"), ws.join("chain-3")).unwrap();
    std::os::unix::fs::symlink("chain-3", ws.join("chain-2")).unwrap();
    std::os::unix::fs::symlink(ws.join("chain-2"), ws.join("chain-1")).unwrap();
    std::os::unix::fs::symlink("chain-1/secret.txt", ws.join("chain-file")).unwrap();
    vec![
        Escape {
            what: "a .. chain",
            file: format!("../../../../..{}/secret.txt", out.display()),
            dir: format!("../{out_name}/dir"),
            writable: true,
        },
        Escape {
            what: "an absolute path",
            file: out.join("secret.txt").display().to_string(),
            dir: out.join("dir").display().to_string(),
            writable: true,
        },
        Escape { what: "a symlink to /etc", file: "etc-link/passwd".into(), dir: "etc-link".into(), writable: false },
        Escape { what: "a symlink chain", file: "chain-file".into(), dir: "chain-1/dir".into(), writable: true },
        Escape {
            what: "a directory symlink mid-path",
            file: "mid/secret.txt".into(),
            dir: "mid/dir".into(),
            writable: true,
        },
        Escape {
            what: "foo/../../x",
            file: format!("foo/../../{out_name}/secret.txt"),
            dir: format!("foo/../../{out_name}/dir"),
            writable: true,
        },
    ]
}

/// Every tool call of an escape, with the tool's name, for the messages.
fn escape_calls(escape: &Escape) -> Vec<(&'static str, Value)> {
    let mut calls = vec![
        ("read_file", json!({"path": escape.file})),
        ("list_dir", json!({"path": escape.dir})),
        ("glob", json!({"pattern": "*", "path": escape.dir})),
        ("grep", json!({"pattern": "root|needle", "path": escape.dir})),
        ("grep", json!({"pattern": "root|needle", "path": escape.file})),
    ];
    if escape.writable {
        calls.push(("edit_file", json!({"path": escape.file, "old_text": "needle", "new_text": "edited"})));
        calls.push(("write_file", json!({"path": escape.file, "content": "overwritten\n"})));
        calls.push(("write_file", json!({"path": format!("{}/new.txt", escape.dir), "content": "x"})));
    }
    calls
}

#[actix_rt::test]
async fn paths_built_to_escape_are_refused_with_the_restriction_on() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let arena = Arena::new("escapes", resolver).await;
        for escape in escapes(&arena) {
            for (tool, args) in escape_calls(&escape) {
                let (reply, is_error) = arena.call(tool, args.clone(), arena.restricted()).await;
                let what = format!("{tool} through {} with {resolver:?}", escape.what);
                assert!(is_error, "{what} was not refused: {args} -> {reply}");
                assert!(
                    reply.contains("is outside the workspace") && reply.contains("use a path inside the workspace"),
                    "{what} gave the wrong error: {args} -> {reply}"
                );
            }
        }
        assert!(arena.outside_untouched());
        arena.host.shutdown().await;
    }
}

#[actix_rt::test]
async fn paths_built_to_escape_all_work_with_the_restriction_off() {
    let arena = Arena::new("escapes-off", Resolver::Openat2).await;
    for escape in escapes(&arena) {
        for (tool, args) in escape_calls(&escape) {
            let (reply, is_error) = arena.call(tool, args.clone(), arena.unrestricted()).await;
            assert!(!is_error, "{tool} through {} failed without the restriction: {args} -> {reply}", escape.what);
            if tool == "read_file" {
                assert!(reply.contains("OUTSIDE-SECRET") || reply.contains("root:"), "{reply}");
            }
        }
        arena.restore_outside();
    }
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn links_that_stay_inside_the_workspace_still_work_with_the_restriction_on() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let arena = Arena::new("inside-links", resolver).await;
        let ws = arena.ws.path();
        std::os::unix::fs::symlink("inner", ws.join("rel-dir")).unwrap();
        std::os::unix::fs::symlink(ws.join("inner"), ws.join("abs-dir")).unwrap();
        std::os::unix::fs::symlink("foo/../inside.txt", ws.join("rel-file")).unwrap();
        std::os::unix::fs::symlink(ws.join("inside.txt"), ws.join("abs-file")).unwrap();
        for path in ["rel-file", "abs-file", "rel-dir/same.txt", "abs-dir/same.txt"] {
            let (reply, is_error) = arena.call("read_file", json!({"path": path}), arena.restricted()).await;
            assert!(!is_error && reply.contains("needle inside"), "{path} with {resolver:?}: {reply}");
        }
        for dir in ["rel-dir", "abs-dir"] {
            let (reply, is_error) = arena.call("list_dir", json!({"path": dir}), arena.restricted()).await;
            assert!(!is_error && reply.contains("inner-file.txt"), "{dir} with {resolver:?}: {reply}");
        }
        let (reply, is_error) =
            arena.call("write_file", json!({"path": "abs-file", "content": "via link\n"}), arena.restricted()).await;
        assert!(!is_error, "{reply}");
        assert_eq!(std::fs::read_to_string(ws.join("inside.txt")).unwrap(), "via link\n");
        assert!(std::fs::symlink_metadata(ws.join("abs-file")).unwrap().file_type().is_symlink());
        arena.host.shutdown().await;
    }
}
