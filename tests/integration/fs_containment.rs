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

/// A workspace and a directory beside it, each holding a file and a directory, and a host
/// running the real fs plugin.
struct Arena {
    ws: TempDir,
    outside: TempDir,
    host: PluginHost,
}

impl Arena {
    async fn new(label: &str) -> Arena {
        let ws = TempDir::new(&format!("fsrace-ws-{label}"));
        let outside = TempDir::new(&format!("fsrace-out-{label}"));
        ws.write("inside.txt", INSIDE_CONTENT);
        ws.write("inner/same.txt", INSIDE_CONTENT);
        ws.write("inner/inner-file.txt", INSIDE_CONTENT);
        ws.write("foo/keep.txt", "");
        outside.write("secret.txt", OUTSIDE_CONTENT);
        outside.write("dir/same.txt", OUTSIDE_CONTENT);
        outside.write("dir/outside-secret.txt", OUTSIDE_CONTENT);
        let host = start_host(vec![tool_spec("fs")]).await;
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
    }

    /// Puts the outside files back after an escape, so each escape is counted once.
    fn restore_outside(&self) {
        self.outside.write("secret.txt", OUTSIDE_CONTENT);
        self.outside.write("dir/same.txt", OUTSIDE_CONTENT);
    }
}

/// Runs `calls` reads of a swapped link and counts the replies that show outside content.
async fn count_leaks(arena: &Arena, calls: usize, tool: &str, args: Value) -> usize {
    let mut leaked = 0;
    for _ in 0..calls {
        let (reply, _) = arena.call(tool, args.clone(), arena.restricted()).await;
        if reply.contains("OUTSIDE-SECRET") || reply.contains("outside-secret") {
            leaked += 1;
        }
    }
    leaked
}

/// Runs `calls` changes through a swapped link and counts those that changed a file outside.
async fn count_outside_writes(arena: &Arena, calls: usize, tool: &str, args: impl Fn(usize) -> Value) -> usize {
    let mut escaped = 0;
    for i in 0..calls {
        arena.ws.write("inside.txt", INSIDE_CONTENT);
        arena.ws.write("inner/same.txt", INSIDE_CONTENT);
        let (reply, _) = arena.call(tool, args(i), arena.restricted()).await;
        if !arena.outside_untouched() || reply.contains("OUTSIDE-SECRET") {
            escaped += 1;
            arena.restore_outside();
        }
    }
    escaped
}

#[actix_rt::test]
async fn read_file_through_a_swapped_symlink_never_reads_the_outside_file() {
    let arena = Arena::new("read").await;
    let link = arena.ws.path().join("link.txt");
    let swapper = Swapper::start(&link, Path::new("inside.txt"), &arena.outside_file());
    let leaked = count_leaks(&arena, READS, "read_file", json!({"path": "link.txt"})).await;
    let swaps = swapper.finish();
    assert_eq!(leaked, 0, "read_file escaped {leaked}/{READS} (during {swaps} swaps)");
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn read_file_through_a_swapped_directory_mid_path_never_reads_outside() {
    let arena = Arena::new("read-mid").await;
    let link = arena.ws.path().join("dirlink");
    let swapper = Swapper::start(&link, Path::new("inner"), &arena.outside.path().join("dir"));
    let leaked = count_leaks(&arena, READS, "read_file", json!({"path": "dirlink/same.txt"})).await;
    let swaps = swapper.finish();
    assert_eq!(leaked, 0, "read_file (mid-path link) escaped {leaked}/{READS} (during {swaps} swaps)");
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn write_file_through_a_swapped_symlink_never_writes_the_outside_file() {
    let arena = Arena::new("write").await;
    let link = arena.ws.path().join("link.txt");
    // An absolute link into the workspace, as the old code allowed, on one side of the swap.
    let swapper = Swapper::start(&link, &arena.ws.path().join("inside.txt"), &arena.outside_file());
    let escaped =
        count_outside_writes(&arena, WRITES, "write_file", |i| json!({"path": "link.txt", "content": format!("w{i}")}))
            .await;
    let swaps = swapper.finish();
    assert_eq!(escaped, 0, "write_file escaped {escaped}/{WRITES} (during {swaps} swaps)");
    assert!(arena.outside_untouched());
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn write_file_through_a_swapped_directory_mid_path_never_writes_outside() {
    let arena = Arena::new("write-mid").await;
    let link = arena.ws.path().join("dirlink");
    let swapper = Swapper::start(&link, Path::new("inner"), &arena.outside.path().join("dir"));
    let escaped = count_outside_writes(
        &arena,
        WRITES,
        "write_file",
        |i| json!({"path": "dirlink/same.txt", "content": format!("w{i}")}),
    )
    .await;
    let swaps = swapper.finish();
    assert_eq!(escaped, 0, "write_file (mid-path link) escaped {escaped}/{WRITES} (during {swaps} swaps)");
    assert!(arena.outside_untouched());
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn edit_file_through_a_swapped_symlink_never_edits_or_shows_the_outside_file() {
    let arena = Arena::new("edit").await;
    let link = arena.ws.path().join("link.txt");
    let swapper = Swapper::start(&link, Path::new("inside.txt"), &arena.outside_file());
    let escaped = count_outside_writes(
        &arena,
        WRITES,
        "edit_file",
        |i| json!({"path": "link.txt", "old_text": "needle", "new_text": format!("edit{i}")}),
    )
    .await;
    let swaps = swapper.finish();
    assert_eq!(escaped, 0, "edit_file escaped {escaped}/{WRITES} (during {swaps} swaps)");
    assert!(arena.outside_untouched());
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn list_dir_of_a_swapped_directory_symlink_never_lists_outside() {
    let arena = Arena::new("list").await;
    let link = arena.ws.path().join("dirlink");
    let swapper = Swapper::start(&link, Path::new("inner"), &arena.outside.path().join("dir"));
    let leaked = count_leaks(&arena, READS, "list_dir", json!({"path": "dirlink"})).await;
    let leaked_recursive = count_leaks(&arena, READS, "list_dir", json!({"path": ".", "recursive": true})).await;
    let swaps = swapper.finish();
    assert_eq!(
        (leaked, leaked_recursive),
        (0, 0),
        "list_dir escaped {leaked}/{READS}, recursively {leaked_recursive}/{READS} (during {swaps} swaps)"
    );
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn glob_through_a_swapped_directory_never_finds_outside_files() {
    let arena = Arena::new("glob").await;
    let link = arena.ws.path().join("dirlink");
    let swapper = Swapper::start(&link, Path::new("inner"), &arena.outside.path().join("dir"));
    let leaked = count_leaks(&arena, READS, "glob", json!({"pattern": "*.txt", "path": "dirlink"})).await;
    let leaked_all = count_leaks(&arena, READS, "glob", json!({"pattern": "**/*.txt"})).await;
    let swaps = swapper.finish();
    assert_eq!(
        (leaked, leaked_all),
        (0, 0),
        "glob escaped {leaked}/{READS}, from the root {leaked_all}/{READS} (during {swaps} swaps)"
    );
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn grep_through_a_swapped_directory_never_searches_outside_files() {
    let arena = Arena::new("grep").await;
    let link = arena.ws.path().join("dirlink");
    let swapper = Swapper::start(&link, Path::new("inner"), &arena.outside.path().join("dir"));
    let content = json!({"pattern": "needle", "path": "dirlink", "output_mode": "content"});
    let leaked = count_leaks(&arena, READS, "grep", content).await;
    let leaked_all = count_leaks(&arena, READS, "grep", json!({"pattern": "needle", "output_mode": "content"})).await;
    let swaps = swapper.finish();
    assert_eq!(
        (leaked, leaked_all),
        (0, 0),
        "grep escaped {leaked}/{READS}, from the root {leaked_all}/{READS} (during {swaps} swaps)"
    );
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn grep_of_a_swapped_file_symlink_never_searches_the_outside_file() {
    let arena = Arena::new("grep-file").await;
    let link = arena.ws.path().join("link.txt");
    let swapper = Swapper::start(&link, Path::new("inside.txt"), &arena.outside_file());
    let leaked =
        count_leaks(&arena, READS, "grep", json!({"pattern": "needle", "path": "link.txt", "output_mode": "content"}))
            .await;
    let swaps = swapper.finish();
    assert_eq!(leaked, 0, "grep of a file link escaped {leaked}/{READS} (during {swaps} swaps)");
    arena.host.shutdown().await;
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
    let arena = Arena::new("escapes").await;
    for escape in escapes(&arena) {
        for (tool, args) in escape_calls(&escape) {
            let (reply, is_error) = arena.call(tool, args.clone(), arena.restricted()).await;
            assert!(is_error, "{tool} through {} was not refused: {args} -> {reply}", escape.what);
            assert!(
                reply.contains("is outside the workspace") && reply.contains("use a path inside the workspace"),
                "{tool} through {} gave the wrong error: {args} -> {reply}",
                escape.what
            );
        }
    }
    assert!(arena.outside_untouched());
    assert!(!arena.outside.path().join("dir/new.txt").exists());
    arena.host.shutdown().await;
}

#[actix_rt::test]
async fn paths_built_to_escape_all_work_with_the_restriction_off() {
    let arena = Arena::new("escapes-off").await;
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
    let arena = Arena::new("inside-links").await;
    let ws = arena.ws.path();
    std::os::unix::fs::symlink("inner", ws.join("rel-dir")).unwrap();
    std::os::unix::fs::symlink(ws.join("inner"), ws.join("abs-dir")).unwrap();
    std::os::unix::fs::symlink("foo/../inside.txt", ws.join("rel-file")).unwrap();
    std::os::unix::fs::symlink(ws.join("inside.txt"), ws.join("abs-file")).unwrap();
    for path in ["rel-file", "abs-file", "rel-dir/same.txt", "abs-dir/same.txt"] {
        let (reply, is_error) = arena.call("read_file", json!({"path": path}), arena.restricted()).await;
        assert!(!is_error && reply.contains("needle inside"), "{path}: {reply}");
    }
    for dir in ["rel-dir", "abs-dir"] {
        let (reply, is_error) = arena.call("list_dir", json!({"path": dir}), arena.restricted()).await;
        assert!(!is_error && reply.contains("inner-file.txt"), "{dir}: {reply}");
    }
    let (reply, is_error) =
        arena.call("write_file", json!({"path": "abs-file", "content": "via link\n"}), arena.restricted()).await;
    assert!(!is_error, "{reply}");
    assert_eq!(std::fs::read_to_string(ws.join("inside.txt")).unwrap(), "via link\n");
    assert!(std::fs::symlink_metadata(ws.join("abs-file")).unwrap().file_type().is_symlink());
    arena.host.shutdown().await;
}
