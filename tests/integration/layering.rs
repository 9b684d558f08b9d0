//! The kernel's layering, checked from its source: a module imports only modules on lower
//! rungs of the ladder in ARCHITECTURE.md, so no circle can form between them.

use std::path::{Path, PathBuf};

/// The kernel library's rungs, lowest first. A module may import any module on a lower rung
/// and none on its own or a higher one. `cli` (the binary) sits above them all; `testing`
/// is test-only support that any module's tests may use.
const RUNGS: &[&[&str]] = &[
    &["paths", "fsutil", "watch", "message", "launcher"],
    &["plugin"],
    &["config"],
    &["session", "history", "usage", "provider"],
    &["context"],
    &["turn"],
    &["cron"],
    &["services"],
    &["memory", "automation"],
    &["agent"],
    &["gateway"],
    &["import"],
];

/// Modules outside the ladder: the test-only support module.
const UNRANKED: &[&str] = &["testing"];

fn rung_of(module: &str) -> Option<usize> {
    RUNGS.iter().position(|rung| rung.contains(&module))
}

fn kernel_src() -> PathBuf {
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

fn collect_rs(dir: &Path, found: &mut dyn FnMut(PathBuf)) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rs(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found(path);
        }
    }
}

/// The top-level modules `source` names through `crate::…`, including grouped imports
/// (`use crate::{a::X, b::Y}`). Comments are skipped.
fn imported_modules(source: &str) -> Vec<String> {
    let mut modules = Vec::new();
    for line in source.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                modules.extend(inner.split(',').filter_map(|part| leading_ident(part.trim())));
            } else if let Some(module) = leading_ident(rest) {
                modules.push(module);
            }
        }
    }
    modules
}

fn leading_ident(text: &str) -> Option<String> {
    let ident: String = text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!ident.is_empty()).then_some(ident)
}

/// `file imports module` lines that break the ladder.
fn violations() -> Vec<String> {
    let mut broken = Vec::new();
    for (own, path) in library_files() {
        if UNRANKED.contains(&own.as_str()) {
            continue;
        }
        let own_rung = rung_of(&own).unwrap_or_else(|| panic!("module {own} is missing from the ladder in RUNGS"));
        let source = std::fs::read_to_string(&path).unwrap();
        for imported in imported_modules(&source) {
            if imported == own || UNRANKED.contains(&imported.as_str()) {
                continue;
            }
            let rel = path.strip_prefix(kernel_src()).unwrap_or(&path).display().to_string();
            match rung_of(&imported) {
                Some(rung) if rung < own_rung => {}
                Some(_) => broken.push(format!("{rel} ({own}) imports {imported}")),
                None => broken.push(format!("{rel} ({own}) imports {imported}, which is not on the ladder")),
            }
        }
    }
    broken.sort();
    broken.dedup();
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
    let source = "use crate::agent::X;\nuse crate::{memory::Y, turn};\n// crate::gateway in a comment\nlet a = crate::services::f();";
    assert_eq!(imported_modules(source), ["agent", "memory", "turn", "services"]);
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
