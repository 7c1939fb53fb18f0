//! The workspace's shape, checked: the rules of `docs/ARCHITECTURE.md`
//! that a reviewer would otherwise count by hand.
//!
//! - no circular imports between the files of a crate (a file may use its
//!   parent module and its children freely; siblings may not use each
//!   other in a cycle);
//! - no source file over 600 lines before its tests;
//! - the CLI crate (`crates/dingo/src`) stays a thin shell: at most 1,200
//!   lines.
//!
//! Imports are read with `syn` (paths in `use` items and in code that start
//! with `crate`, `self` or `super`; macro bodies are not parsed) and the
//! cycles found with `petgraph`'s strongly connected components.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use syn::visit::Visit;

const MAX_FILE_LINES_BEFORE_TESTS: usize = 600;
const MAX_CLI_LINES: usize = 1_200;

/// A file's module path inside its crate: `src/a/b.rs` and `src/a/b/mod.rs`
/// are `["a", "b"]`, `src/lib.rs` and `src/main.rs` are `[]`.
type ModPath = Vec<String>;

fn workspace_crates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/").to_path_buf()
}

/// Every `.rs` file under `src`, outside `src/bin` (each binary there is a
/// crate of its own), by module path.
fn crate_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path != src.join("bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src").with_extension("");
            let mut module: ModPath = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            files.insert(module, path);
        }
    }
    files
}

/// Collects the module paths a file refers to through `crate::`, `self::`
/// and `super::`, resolved against the module being visited (inline
/// modules included), skipping `#[cfg(test)]` items.
struct Refs {
    module: ModPath,
    targets: Vec<ModPath>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Path>().is_ok_and(|p| p.is_ident("test")))
}

impl Refs {
    fn resolve(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else { return };
        let target = match first.as_str() {
            "crate" => segments[1..].to_vec(),
            "self" => self.module.iter().chain(&segments[1..]).cloned().collect(),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                base
            }
            _ => return,
        };
        self.targets.push(target);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.resolve(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.resolve(&prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if !is_cfg_test(&item.attrs) {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_cfg_test(&item.attrs) {
            return;
        }
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// The file a module path lives in: the longest prefix that is a file.
fn owning_file<'a>(files: &'a BTreeMap<ModPath, PathBuf>, target: &[String]) -> Option<&'a ModPath> {
    (0..=target.len()).rev().find_map(|n| files.get_key_value(&target[..n]).map(|(k, _)| k))
}

fn is_ancestor_or_descendant(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The import cycles between the files of the crate at `src`, each as the
/// sorted file paths (relative to `src`) that form it.
fn import_cycles(src: &Path) -> Vec<Vec<String>> {
    let files = crate_files(src);
    let mut graph = DiGraph::<&ModPath, ()>::new();
    let nodes: BTreeMap<&ModPath, _> = files.keys().map(|m| (m, graph.add_node(m))).collect();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut refs = Refs { module: module.clone(), targets: Vec::new() };
        refs.visit_file(&parsed);
        let targets: BTreeSet<&ModPath> = refs.targets.iter().filter_map(|t| owning_file(&files, t)).collect();
        for target in targets {
            if !is_ancestor_or_descendant(module, target) {
                graph.update_edge(nodes[module], nodes[target], ());
            }
        }
    }
    let name = |m: &ModPath| files[m].strip_prefix(src).expect("under src").display().to_string();
    let mut cycles: Vec<Vec<String>> = tarjan_scc(&graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut names: Vec<String> = component.iter().map(|&n| name(graph[n])).collect();
            names.sort();
            names
        })
        .collect();
    cycles.sort();
    cycles
}

/// Lines of a source file before its first `#[cfg(test)]`.
fn lines_before_tests(text: &str) -> usize {
    text.lines().take_while(|line| line.trim() != "#[cfg(test)]").count()
}

fn crate_sources() -> Vec<PathBuf> {
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(workspace_crates())
        .expect("crates/")
        .map(|e| e.expect("a directory entry").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    srcs.sort();
    srcs
}

#[test]
fn no_crate_has_circular_imports_between_its_files() {
    let cycles: Vec<String> = crate_sources()
        .iter()
        .flat_map(|src| {
            let krate = src.parent().expect("a crate").file_name().expect("named").to_string_lossy().into_owned();
            import_cycles(src).into_iter().map(move |cycle| format!("{krate}: {}", cycle.join(" <-> ")))
        })
        .collect();
    assert!(cycles.is_empty(), "files that import each other in a cycle:\n{}", cycles.join("\n"));
}

#[test]
fn no_source_file_is_over_600_lines_before_its_tests() {
    let mut long = Vec::new();
    for src in crate_sources() {
        for path in crate_files(&src).into_values() {
            let lines = lines_before_tests(&std::fs::read_to_string(&path).expect("readable"));
            if lines > MAX_FILE_LINES_BEFORE_TESTS {
                long.push(format!("{}: {lines} lines", path.display()));
            }
        }
    }
    assert!(long.is_empty(), "split these files:\n{}", long.join("\n"));
}

#[test]
fn the_cli_crate_stays_a_thin_shell() {
    let src = workspace_crates().join("dingo").join("src");
    let mut paths: Vec<PathBuf> = crate_files(&src).into_values().collect();
    paths.extend(std::fs::read_dir(src.join("bin")).into_iter().flatten().map(|e| e.expect("an entry").path()));
    let lines: usize = paths.iter().map(|p| std::fs::read_to_string(p).expect("readable").lines().count()).sum();
    assert!(
        lines <= MAX_CLI_LINES,
        "crates/dingo/src has {lines} lines (at most {MAX_CLI_LINES}): move logic to a library crate"
    );
}

/// The checker itself: a crate whose two files import each other is
/// caught, and a parent using its child (and the child its parent) is not
/// a cycle.
#[test]
fn the_cycle_check_finds_a_cycle_and_ignores_parent_and_child() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("store")).expect("mkdir");
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod store;\npub use a::A;\n");
    write("store/mod.rs", "mod disk;\nuse self::disk::Disk;\npub struct Store(Disk);\n");
    write("store/disk.rs", "use super::Store;\npub struct Disk;\nfn f(_: &Store) {}\n");
    write("a.rs", "use crate::b::B;\npub struct A(B);\n");
    write("b.rs", "pub struct B;\nfn f() -> usize { std::mem::size_of::<super::a::A>() }\n");
    assert_eq!(import_cycles(&src), vec![vec!["a.rs".to_string(), "b.rs".to_string()]]);

    write("b.rs", "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::A; }\n");
    assert!(import_cycles(&src).is_empty(), "a test module's imports are not the file's");
}

#[test]
fn lines_before_tests_stops_at_the_test_module() {
    assert_eq!(lines_before_tests("fn a() {}\n\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(lines_before_tests("fn a() {}\n"), 1);
}
