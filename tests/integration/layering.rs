//! The kernel's layering, checked from its source: a module imports only modules on lower
//! rungs of the ladder in ARCHITECTURE.md, so no circle can form between them.

use std::path::{Path, PathBuf};

/// The kernel library's rungs, lowest first. A module may import any module on a lower rung
/// and none on its own or a higher one. `cli` (the binary) sits above them all; `testing`
/// is test-only support that any module's tests may use. The second rung is the plugin host,
/// the `oxibot-host` crate that `lib.rs` re-exports: it has no files here, and cannot import
/// the kernel at all.
const RUNGS: &[&[&str]] = &[
    &["fsutil", "watch", "telemetry"],
    &["plugin", "launcher", "paths"],
    &["config"],
    &["session", "history", "usage", "plugin_specs", "bundled"],
    &["context", "settings", "budget"],
    &["turn"],
    &["cron", "meter"],
    &["services", "cluster"],
    &["memory", "automation"],
    &["agent"],
    &["gateway"],
    &["import"],
];

/// Modules outside the ladder: the test-only support module.
const UNRANKED: &[&str] = &["testing"];

/// Names the kernel re-exports from crates of their own (`pub use` in lib.rs): below every
/// rung, so any module may import them, and the compiler keeps them from importing the kernel.
const OWN_CRATES: &[&str] = &["provider", "message"];

fn rung_of(module: &str) -> Option<usize> {
    RUNGS.iter().position(|rung| rung.contains(&module))
}

pub(super) fn kernel_src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kernel/src")
}

/// Every `.rs` file of the library (not the binary's `main.rs` and `cli/`), with its
/// top-level module.
fn library_files() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(kernel_src()).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "main.rs" || name == "lib.rs" || name == "cli" {
            continue;
        }
        let module = name.trim_end_matches(".rs").to_owned();
        if path.is_dir() {
            collect_rs(&path, &mut |file| files.push((module.clone(), file)));
        } else {
            files.push((module, path));
        }
    }
    files
}

pub(super) fn collect_rs(dir: &Path, found: &mut dyn FnMut(PathBuf)) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rs(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found(path);
        }
    }
}

/// The top-level modules `source` names through `crate::…`: in `use` trees however they are
/// wrapped or nested, in paths inside code, and in the tokens of macro calls. Comments and
/// strings are not code, so they name nothing.
fn imported_modules(source: &str) -> Vec<String> {
    let mut file = syn::parse_file(source).unwrap_or_else(|error| panic!("kernel source does not parse: {error}"));
    let mut finder = CrateImports::default();
    syn::visit_mut::VisitMut::visit_file_mut(&mut finder, &mut file);
    finder.modules
}

/// Collects the first segment after `crate::` wherever the syntax tree names one.
#[derive(Default)]
struct CrateImports {
    modules: Vec<String>,
}

impl CrateImports {
    /// Walks a `use` tree that starts after `crate::`.
    fn below_crate(&mut self, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => self.modules.push(path.ident.to_string()),
            syn::UseTree::Name(name) => self.modules.push(name.ident.to_string()),
            syn::UseTree::Rename(rename) => self.modules.push(rename.ident.to_string()),
            syn::UseTree::Group(group) => group.items.iter().for_each(|item| self.below_crate(item)),
            syn::UseTree::Glob(_) => {}
        }
    }

    /// Finds `crate :: module` and `crate :: { module… }` in a macro call's raw tokens.
    fn in_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let trees: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        for (at, tree) in trees.iter().enumerate() {
            match tree {
                proc_macro2::TokenTree::Group(group) => self.in_tokens(group.stream()),
                proc_macro2::TokenTree::Ident(ident) if ident == "crate" => {
                    let is_colon =
                        |i: usize| matches!(trees.get(i), Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == ':');
                    if !(is_colon(at + 1) && is_colon(at + 2)) {
                        continue;
                    }
                    match trees.get(at + 3) {
                        Some(proc_macro2::TokenTree::Ident(module)) => self.modules.push(module.to_string()),
                        Some(proc_macro2::TokenTree::Group(group)) => {
                            let braced = proc_macro2::TokenTree::Group(group.clone());
                            if let Ok(tree) = syn::parse2::<syn::UseTree>(braced.into()) {
                                self.below_crate(&tree);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
}

impl syn::visit_mut::VisitMut for CrateImports {
    fn visit_item_use_mut(&mut self, item: &mut syn::ItemUse) {
        match &item.tree {
            syn::UseTree::Path(path) if path.ident == "crate" => self.below_crate(&path.tree),
            _ => {}
        }
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        let mut segments = path.segments.iter();
        if let (Some(first), Some(second)) = (segments.next(), segments.next())
            && first.ident == "crate"
        {
            self.modules.push(second.ident.to_string());
        }
        syn::visit_mut::visit_path_mut(self, path);
    }

    fn visit_macro_mut(&mut self, mac: &mut syn::Macro) {
        self.in_tokens(mac.tokens.clone());
        syn::visit_mut::visit_macro_mut(self, mac);
    }
}

/// `file imports module` lines that break the ladder.
fn violations() -> Vec<String> {
    let mut broken = Vec::new();
    for (own, path) in library_files() {
        if UNRANKED.contains(&own.as_str()) {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let rel = path.strip_prefix(kernel_src()).unwrap_or(&path).display().to_string();
        broken.extend(ladder_breaks(&own, &source).into_iter().map(|why| format!("{rel} ({own}) {why}")));
    }
    broken.sort();
    broken.dedup();
    broken
}

/// What a file of module `own` imports against the ladder: a module on its own or a higher
/// rung, or one not on the ladder at all.
fn ladder_breaks(own: &str, source: &str) -> Vec<String> {
    let own_rung = rung_of(own).unwrap_or_else(|| panic!("module {own} is missing from the ladder in RUNGS"));
    let mut broken = Vec::new();
    for imported in imported_modules(source) {
        if imported == own || UNRANKED.contains(&imported.as_str()) || OWN_CRATES.contains(&imported.as_str()) {
            continue;
        }
        match rung_of(&imported) {
            Some(rung) if rung < own_rung => {}
            Some(_) => broken.push(format!("imports {imported}")),
            None => broken.push(format!("imports {imported}, which is not on the ladder")),
        }
    }
    broken
}

#[test]
fn every_kernel_module_imports_only_lower_rungs_of_the_ladder() {
    assert!(library_files().len() > 50, "found too few kernel files; is the walk broken?");
    let broken = violations();
    assert!(broken.is_empty(), "imports that break the layering (see ARCHITECTURE.md):\n{}", broken.join("\n"));
}

#[test]
fn memory_never_imports_the_agent() {
    let offending: Vec<String> = library_files()
        .into_iter()
        .filter(|(module, path)| {
            module == "memory" && imported_modules(&std::fs::read_to_string(path).unwrap()).iter().any(|m| m == "agent")
        })
        .map(|(_, path)| path.display().to_string())
        .collect();
    assert!(offending.is_empty(), "memory files importing crate::agent: {offending:?}");
}

#[test]
fn the_import_scanner_sees_plain_grouped_and_nested_imports() {
    let source = "use crate::agent::X;\nuse crate::{memory::Y, turn};\n// crate::gateway in a comment\nfn f() { let a = crate::services::f(); }";
    assert_eq!(imported_modules(source), ["agent", "memory", "turn", "services"]);
}

#[test]
fn the_import_scanner_sees_a_group_that_rustfmt_wrapped_over_lines() {
    let source = "use crate::{\n    agent::X,\n    memory::{\n        Y,\n        Z,\n    },\n    turn as t,\n};\n";
    assert_eq!(imported_modules(source), ["agent", "memory", "turn"]);
}

#[test]
fn the_import_scanner_sees_paths_inside_macro_calls_and_skips_strings() {
    let source = "fn f() {\n    tokio::select! {\n        _ = crate::gateway::wait() => {}\n    }\n    println!(\"crate::agent is text\");\n}\n";
    assert_eq!(imported_modules(source), ["gateway"]);
}

#[test]
fn a_wrapped_import_that_breaks_the_ladder_is_reported() {
    let source = "use crate::{\n    agent::SessionManager,\n    paths,\n};\n";
    assert_eq!(ladder_breaks("memory", source), ["imports agent"]);
}

#[test]
fn every_module_of_the_kernel_library_is_on_the_ladder() {
    let lib = std::fs::read_to_string(kernel_src().join("lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod ").or_else(|| line.trim().strip_prefix("mod ")))
        .map(|rest| rest.trim_end_matches(';'))
        .collect();
    assert!(declared.len() > 10, "lib.rs declares too few modules: {declared:?}");
    let missing: Vec<&&str> = declared.iter().filter(|m| rung_of(m).is_none() && !UNRANKED.contains(m)).collect();
    assert!(missing.is_empty(), "modules not placed on the ladder: {missing:?}");
}

#[test]
fn the_names_below_the_ladder_are_crates_the_kernel_re_exports_not_its_modules() {
    let lib = std::fs::read_to_string(kernel_src().join("lib.rs")).unwrap();
    for name in OWN_CRATES {
        assert!(!kernel_src().join(format!("{name}.rs")).exists(), "{name}.rs is back in the kernel");
        assert!(!kernel_src().join(name).exists(), "{name}/ is back in the kernel");
        let re_exported = lib.lines().any(|line| {
            let line = line.trim();
            line.starts_with("pub use oxibot_")
                && (line.ends_with(&format!(" as {name};")) || line.ends_with(&format!("::{name};")))
        });
        assert!(re_exported, "lib.rs does not re-export {name} from a crate");
    }
}

/// The names `lib.rs` gives the `oxibot-host` crate and its modules (`pub use oxibot_host as
/// plugin;`, `pub use oxibot_host::{launcher, paths};`).
fn host_reexports(lib: &str) -> Vec<String> {
    fn names(tree: &syn::UseTree, found: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(path) => names(&path.tree, found),
            syn::UseTree::Name(name) => found.push(name.ident.to_string()),
            syn::UseTree::Rename(rename) => found.push(rename.rename.to_string()),
            syn::UseTree::Group(group) => group.items.iter().for_each(|item| names(item, found)),
            syn::UseTree::Glob(_) => found.push("*".to_owned()),
        }
    }
    let file = syn::parse_file(lib).unwrap_or_else(|error| panic!("lib.rs does not parse: {error}"));
    let mut found = Vec::new();
    for item in &file.items {
        if let syn::Item::Use(item) = item {
            let from_host = match &item.tree {
                syn::UseTree::Path(path) => path.ident == "oxibot_host",
                syn::UseTree::Rename(rename) => rename.ident == "oxibot_host",
                _ => false,
            };
            if from_host {
                names(&item.tree, &mut found);
            }
        }
    }
    found
}

#[test]
fn every_name_the_kernel_gives_the_plugin_host_is_on_the_host_rung() {
    let lib = std::fs::read_to_string(kernel_src().join("lib.rs")).unwrap();
    let names = host_reexports(&lib);
    assert!(names.contains(&"plugin".to_owned()), "lib.rs no longer re-exports the host as `plugin`: {names:?}");
    let host_rung = rung_of("plugin");
    let misplaced: Vec<&String> = names.iter().filter(|name| rung_of(name) != host_rung).collect();
    assert!(misplaced.is_empty(), "host re-exports not on the host's rung of RUNGS: {misplaced:?}");
}

/// Source folders of every crate in the workspace.
fn workspace_source_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![
        root.join("kernel/src"),
        root.join("host/src"),
        root.join("proto/src"),
        root.join("tests/util"),
        root.join("tests/integration"),
    ];
    dirs.push(root.join("llm/src"));
    for group in ["plugins", "channels"] {
        for entry in std::fs::read_dir(root.join(group)).unwrap().flatten() {
            let src = entry.path().join("src");
            if src.is_dir() {
                dirs.push(src);
            }
        }
    }
    dirs
}

/// `name.rs` files that sit next to a `name/` folder, anywhere under `dir`.
fn files_beside_their_folder(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    collect_rs(dir, &mut |file| {
        if file.with_extension("").is_dir() {
            found.push(file);
        }
    });
    found
}

#[test]
fn a_module_with_children_is_a_folder_with_mod_rs_everywhere_in_the_workspace() {
    let dirs = workspace_source_dirs();
    assert!(dirs.len() > 15, "found too few crates: {dirs:?}");
    let mixed: Vec<PathBuf> = dirs.iter().flat_map(|dir| files_beside_their_folder(dir)).collect();
    assert!(mixed.is_empty(), "move each of these to <name>/mod.rs (ARCHITECTURE.md, Module files): {mixed:?}");
}
