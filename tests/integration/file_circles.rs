//! No circle of imports between the kernel library's files: when file A takes names from
//! file B, B takes none from A, directly or through other files, so each file can be read
//! knowing only the files below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::layering::{collect_rs, kernel_src};

/// A file by its module path: `gateway/router/outbox.rs` is `gateway::router::outbox`,
/// `gateway/router/mod.rs` is `gateway::router`.
type Module = Vec<String>;

fn module_of(relative: &Path) -> Module {
    let mut parts: Module = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// Every file of the kernel library (not the binary's `main.rs` and `cli/`, not `lib.rs`),
/// by its module, with its source.
fn library_modules() -> BTreeMap<Module, String> {
    let root = kernel_src();
    let mut modules = BTreeMap::new();
    collect_rs(&root, &mut |file| {
        let relative = file.strip_prefix(&root).unwrap().to_path_buf();
        let top = relative.iter().next().unwrap().to_string_lossy().into_owned();
        if ["main.rs", "lib.rs", "cli"].contains(&top.as_str()) {
            return;
        }
        modules.insert(module_of(&relative), std::fs::read_to_string(&file).unwrap());
    });
    modules
}

/// The full paths a `use` tree names, each as segments after `prefix`.
fn leaf_paths(tree: &syn::UseTree, prefix: &mut Module, found: &mut Vec<Module>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            leaf_paths(&path.tree, prefix, found);
            prefix.pop();
        }
        syn::UseTree::Name(name) => found.push([prefix.clone(), vec![name.ident.to_string()]].concat()),
        syn::UseTree::Rename(rename) => found.push([prefix.clone(), vec![rename.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => found.push(prefix.clone()),
        syn::UseTree::Group(group) => group.items.iter().for_each(|item| leaf_paths(item, prefix, found)),
    }
}

/// The path `path`, written in the file of module `own`, as a path from the crate root; `None`
/// for a path into another crate.
fn absolute(own: &[String], path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let (first, rest) = path.split_first()?;
    let mut base: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => own.to_vec(),
        "super" => own[..own.len().checked_sub(1)?].to_vec(),
        _ if modules.contains(&[own, std::slice::from_ref(first)].concat()) => {
            [own, std::slice::from_ref(first)].concat()
        }
        _ => return None,
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|segment| *segment == "super") {
        base.pop();
        rest.next();
    }
    base.extend(rest.cloned());
    Some(base)
}

/// The top-level `use` items of a file: each named path, and whether the item re-exports it
/// (`pub use`).
fn use_items(own: &[String], source: &str) -> Vec<(Module, bool)> {
    let file = syn::parse_file(source).unwrap_or_else(|error| panic!("{own:?} does not parse: {error}"));
    let mut found = Vec::new();
    for item in &file.items {
        if let syn::Item::Use(item) = item {
            let mut paths = Vec::new();
            leaf_paths(&item.tree, &mut Vec::new(), &mut paths);
            let public = !matches!(item.vis, syn::Visibility::Inherited);
            found.extend(paths.into_iter().map(|path| (path, public)));
        }
    }
    found
}

/// The file a path from the crate root reaches: the longest module it starts with, or the
/// file that module re-exports the next name from (a folder's `mod.rs` that only passes a
/// child's name on is not where the name comes from).
fn file_reached(path: &[String], modules: &BTreeSet<Module>, reexports: &Reexports) -> Option<Module> {
    let module = (1..=path.len()).rev().map(|len| path[..len].to_vec()).find(|m| modules.contains(m))?;
    let passed_on = path.get(module.len()).and_then(|name| reexports.get(&module)?.get(name));
    Some(passed_on.cloned().unwrap_or(module))
}

/// Per module, the names its `pub use` items pass on, with the file each comes from.
type Reexports = BTreeMap<Module, BTreeMap<String, Module>>;

fn reexports_of(modules: &BTreeMap<Module, String>, names: &BTreeSet<Module>) -> Reexports {
    let none = Reexports::new();
    modules
        .iter()
        .map(|(own, source)| {
            let passed_on = use_items(own, source)
                .into_iter()
                .filter(|(_, public)| *public)
                .filter_map(|(path, _)| {
                    let name = path.last()?.clone();
                    let target = file_reached(&absolute(own, &path, names)?, names, &none)?;
                    Some((name, target))
                })
                .collect();
            (own.clone(), passed_on)
        })
        .collect()
}

/// The other files that the file of module `own` imports from with its top-level `use` items
/// (a `pub use` only passes a name on: the file's own code does not need it).
fn imported_files(own: &[String], source: &str, modules: &BTreeSet<Module>, reexports: &Reexports) -> BTreeSet<Module> {
    use_items(own, source)
        .into_iter()
        .filter(|(_, public)| !*public)
        .filter_map(|(path, _)| file_reached(&absolute(own, &path, modules)?, modules, reexports))
        .filter(|target| target != own)
        .collect()
}

/// The groups of files that import each other in a circle (strongly connected components of
/// more than one file), each sorted.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    let reaches = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(next) = todo.pop() {
            for target in edges.get(&next).into_iter().flatten() {
                if seen.insert(target.clone()) {
                    todo.push(target.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = edges.keys().map(|module| (module, reaches(module))).collect();
    let mut found: BTreeSet<Vec<Module>> = BTreeSet::new();
    for (module, from_here) in &reached {
        if !from_here.contains(*module) {
            continue;
        }
        let circle: Vec<Module> = from_here
            .iter()
            .filter(|other| reached.get(other).is_some_and(|back| back.contains(*module)))
            .cloned()
            .collect();
        found.insert(circle);
    }
    found.into_iter().collect()
}

fn edges_of(modules: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let names: BTreeSet<Module> = modules.keys().cloned().collect();
    let reexports = reexports_of(modules, &names);
    modules.iter().map(|(own, source)| (own.clone(), imported_files(own, source, &names, &reexports))).collect()
}

fn shown(circle: &[Module]) -> String {
    circle.iter().map(|module| module.join("::")).collect::<Vec<_>>().join(" <-> ")
}

#[test]
fn no_files_of_the_kernel_import_each_other_in_a_circle() {
    let modules = library_modules();
    assert!(modules.len() > 100, "found too few kernel files: {}", modules.len());
    let edges = edges_of(&modules);
    assert!(edges.values().map(BTreeSet::len).sum::<usize>() > 200, "found too few imports; is the resolver broken?");
    let found: Vec<String> = circles(&edges).iter().map(|circle| shown(circle)).collect();
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a file of its own):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_through_super_a_child_module_and_a_wrapped_group_is_found() {
    let source = |text: &str| text.to_owned();
    let modules: BTreeMap<Module, String> = [
        (vec!["a".to_owned()], source("mod b;\nuse b::Thing;\n")),
        (vec!["a".to_owned(), "b".to_owned()], source("use crate::{\n    c::{\n        Other,\n    },\n};\n")),
        (vec!["c".to_owned()], source("use super::a::Root;\n")),
        (vec!["d".to_owned()], source("use crate::c::Other;\nuse std::fmt;\n")),
    ]
    .into_iter()
    .collect();
    let found = circles(&edges_of(&modules));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(shown(&found[0]), "a <-> a::b <-> c");
}
