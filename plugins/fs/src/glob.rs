//! `glob`: paths matching a glob pattern, most recently modified first, paged.

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use oxibot_plugin::beneath::{DirHandle, Target, WorkspaceDir};
use oxibot_plugin::{CallContext, Tool, ToolError, ToolOutput, parse_args};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::page::Page;
use crate::pattern::Glob;
use crate::walk::{MAX_VISITS, Walk};

/// The arguments of `glob`.
#[derive(Deserialize)]
struct Args {
    pattern: String,
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    path: Option<String>,
    #[serde(default, deserialize_with = "crate::args::count")]
    max_results: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    head_limit: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::count")]
    offset: Option<usize>,
    #[serde(default, deserialize_with = "crate::args::optional_text")]
    entry_type: Option<String>,
}

/// Which kinds of entries a search reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kinds {
    Files,
    Dirs,
    Both,
}

impl Kinds {
    fn parse(value: Option<&str>) -> Result<Kinds, ToolError> {
        match value {
            None | Some("files") => Ok(Kinds::Files),
            Some("dirs") => Ok(Kinds::Dirs),
            Some("both") => Ok(Kinds::Both),
            Some(other) => Err(ToolError::new(format!("entry_type '{other}' is not one of files, dirs, both"))),
        }
    }

    fn wants(self, is_dir: bool) -> bool {
        match self {
            Kinds::Files => !is_dir,
            Kinds::Dirs => is_dir,
            Kinds::Both => true,
        }
    }
}

/// The tool's manifest entry. The older name `max_results` (for `head_limit`) is still read
/// but not offered: every schema byte is paid on every model call.
pub fn tool() -> Tool {
    Tool::new(
        "glob",
        "Find paths by glob ('*.py', 'src/**/*.rs'), newest first.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "entry_type": {"type": "string", "enum": ["files", "dirs", "both"]},
                "head_limit": {"type": "integer"},
                "offset": {"type": "integer"}
            },
            "required": ["pattern"]
        }),
    )
    .read_only()
}

/// Runs `glob`.
pub async fn handle(ctx: CallContext, args: Value) -> ToolOutput {
    let args: Args = parse_args(args)?;
    let glob = Glob::new(&args.pattern).map_err(ToolError::new)?;
    let kinds = Kinds::parse(args.entry_type.as_deref())?;
    let page = Page::new(args.head_limit, args.max_results, args.offset);
    let shown = args.path.unwrap_or_else(|| ".".to_owned());
    let files = WorkspaceDir::open(&ctx)?;
    let target = files.resolve(&shown)?;
    crate::blocking(move || {
        let dir = open_base(&files, &target)?;
        let search = Search { glob: &glob, kinds, base: target.path(), root: files.root() };
        let (found, cut_short) = search.run(&files, dir, &Walk::new());
        Ok(render(&found, &page, &args.pattern, &shown, cut_short))
    })
    .await
}

/// Opens the directory to search in, explaining a missing path or a file.
fn open_base(files: &WorkspaceDir, target: &Target) -> Result<DirHandle, ToolError> {
    let shown = target.shown();
    files.open_dir(target).map_err(|e| {
        crate::access_error(e, |e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ToolError::new(format!("{shown} does not exist; give a directory to search in"))
            }
            std::io::ErrorKind::NotADirectory => {
                ToolError::new(format!("{shown} is not a directory; give a directory to search in"))
            }
            _ => ToolError::new(format!("cannot search {shown}: {e}")),
        })
    })
}

/// One `glob` search.
struct Search<'a> {
    glob: &'a Glob,
    kinds: Kinds,
    base: &'a Path,
    root: &'a Path,
}

impl Search<'_> {
    /// The matching paths as shown to the model, newest first; and whether the walk was cut.
    fn run(&self, files: &WorkspaceDir, dir: DirHandle, walk: &Walk) -> (Vec<String>, bool) {
        let mut found: Vec<(SystemTime, String)> = Vec::new();
        let report = walk.run(files, dir, |entry| {
            let relative = entry.path.strip_prefix(self.base).unwrap_or(&entry.path);
            if self.kinds.wants(entry.is_dir) && self.glob.matches(relative) {
                let mut shown = crate::display_path(self.root, &entry.path);
                if entry.is_dir {
                    shown.push('/');
                }
                found.push((entry.modified, shown));
            }
            true
        });
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        (found.into_iter().map(|(_, path)| path).collect(), report.cut_short)
    }
}

/// The reply: a page of paths, or a message that nothing matched.
fn render(found: &[String], page: &Page, pattern: &str, shown: &str, cut_short: bool) -> String {
    let mut out = if found.is_empty() { format!("no paths match '{pattern}' in {shown}") } else { page.render(found) };
    if cut_short {
        let _ = write!(out, "\n(the search stopped after {MAX_VISITS} entries; search a narrower directory)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{Workspace, outside_dir};
    use std::time::Duration;

    fn set_modified(path: &Path, seconds_ago: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(seconds_ago)).unwrap();
    }

    #[tokio::test]
    async fn matching_files_are_listed_newest_first_relative_to_the_workspace() {
        let ws = Workspace::new("glob");
        set_modified(&ws.write("src/old.rs", ""), 300);
        set_modified(&ws.write("src/deep/new.rs", ""), 10);
        set_modified(&ws.write("README.md", ""), 5);
        ws.write("node_modules/dep/x.rs", "");
        let out = handle(ws.ctx(), json!({"pattern": "*.rs"})).await.unwrap();
        assert_eq!(out, "src/deep/new.rs\nsrc/old.rs");
    }

    #[tokio::test]
    async fn a_path_narrows_the_search_and_patterns_with_a_slash_match_below_it() {
        let ws = Workspace::new("glob");
        ws.write("pkg/tests/unit/test_a.py", "");
        ws.write("pkg/tests/test_b.py", "");
        ws.write("other/tests/test_c.py", "");
        let out = handle(ws.ctx(), json!({"pattern": "tests/**/test_*.py", "path": "pkg"})).await.unwrap();
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        assert_eq!(lines, ["pkg/tests/test_b.py", "pkg/tests/unit/test_a.py"]);
    }

    #[tokio::test]
    async fn directories_can_be_matched_and_are_marked() {
        let ws = Workspace::new("glob");
        ws.write("docs/guide/a.md", "");
        let out = handle(ws.ctx(), json!({"pattern": "gui*", "entry_type": "dirs"})).await.unwrap();
        assert_eq!(out, "docs/guide/");
    }

    #[tokio::test]
    async fn results_are_paged_with_head_limit_and_offset() {
        let ws = Workspace::new("glob");
        for i in 0..5 {
            set_modified(&ws.write(&format!("f{i}.txt"), ""), 100 - i);
        }
        let out = handle(ws.ctx(), json!({"pattern": "*.txt", "head_limit": 2, "offset": 1})).await.unwrap();
        assert_eq!(out, "f3.txt\nf2.txt\n\n(results 2-3 of 5; call again with offset=3 for more)");
        let legacy = handle(ws.ctx(), json!({"pattern": "*.txt", "max_results": 1})).await.unwrap();
        assert!(legacy.starts_with("f4.txt\n\n(results 1-1 of 5"), "{legacy}");
    }

    #[tokio::test]
    async fn no_match_says_so_and_bad_input_is_an_error() {
        let ws = Workspace::new("glob");
        assert_eq!(handle(ws.ctx(), json!({"pattern": "*.zig"})).await.unwrap(), "no paths match '*.zig' in .");
        assert!(handle(ws.ctx(), json!({"pattern": "{a,b"})).await.unwrap_err().message().contains("invalid glob"));
        assert!(
            handle(ws.ctx(), json!({"pattern": "*", "entry_type": "links"}))
                .await
                .unwrap_err()
                .message()
                .contains("entry_type")
        );
        assert!(
            handle(ws.ctx(), json!({"pattern": "*", "path": "missing"}))
                .await
                .unwrap_err()
                .message()
                .contains("does not exist")
        );
    }

    #[tokio::test]
    async fn the_search_stays_inside_the_workspace() {
        let ws = Workspace::new("glob");
        let outside = outside_dir("glob");
        outside.write("secret.rs", "");
        std::os::unix::fs::symlink(outside.path().join("secret.rs"), ws.path().join("linked.rs")).unwrap();
        assert_eq!(handle(ws.ctx(), json!({"pattern": "*.rs"})).await.unwrap(), "no paths match '*.rs' in .");
        assert!(
            handle(ws.ctx(), json!({"pattern": "*.rs", "path": ".."}))
                .await
                .unwrap_err()
                .message()
                .contains("outside the workspace")
        );
    }
}
