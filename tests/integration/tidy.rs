//! Repository hygiene checks that a compiler cannot make.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_line_saying_what_it_is_for() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "found only {} files; is the walk broken?", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).unwrap().starts_with("//!"))
        .map(|path| path.strip_prefix(&root).unwrap_or(path).display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a leading //! line: {missing:#?}");
}
