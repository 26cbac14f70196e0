//! Source layout checks for the workspace crates: which crate-internal modules each module
//! uses, whether those uses form a cycle, and which modules reach up to the crate root.
//!
//! A small hand-written scanner (no parser, no regexes) reads every `*.rs` file under a
//! crate's `src` folder. Comments, string and character literals are skipped, then every
//! path that starts with `crate::`, `super::` or `self::` is collected: `use` declarations
//! (with `{...}` groups, nested, `self` and `as` renames) as well as paths in code
//! (`crate::error::Error::new(..)`). Each path is resolved to the longest known module
//! prefix, so `crate::host::step::Step` is a use of `host::step` when `host/step.rs`
//! exists and of `host` otherwise.
//!
//! Module names follow the file layout: `src/foo.rs` is `foo`, `src/foo/mod.rs` is `foo`,
//! `src/foo/bar.rs` is `foo::bar`. The crate roots (`lib.rs`, `main.rs`) and `src/bin/` are
//! not modules here: everything is below the root, so uses of items re-exported by the root
//! are not edges of the graph; [`root_imports`] lists them instead. Ignored as test-only: files and folders named `tests`, `*_tests`,
//! `test_support` and `fixtures`, files starting with `#![cfg(test)]`, and items marked
//! `#[cfg(test)]` (such as inline `mod tests { ... }` blocks). Uses of a module by itself,
//! by its submodules or by its parents are not edges.
//!
//! ```no_run
//! # fn demo() {
//! xtask::layout::assert_no_import_cycles(
//!     &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
//! );
//! # }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::tokens::{Token, tokenize};

/// The import graph: every module (see the [module docs](self)) and the other modules it
/// uses.
pub type ImportGraph = BTreeMap<String, BTreeSet<String>>;

/// Module names whose files (or folders) hold only tests.
const TEST_ONLY: &[&str] = &["tests", "test_support", "fixtures"];

/// The crate-internal module uses of every module under `src_dir`.
pub fn module_imports(src_dir: &Path) -> std::io::Result<ImportGraph> {
    let sources = module_sources(src_dir)?;
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = ImportGraph::new();
    for (module, source) in &sources {
        let uses = graph.entry(module.join("::")).or_default();
        for path in referenced_paths(source, module) {
            if let Some(target) = longest_known_prefix(&path, &modules)
                && !related(module, target)
            {
                uses.insert(target.join("::"));
            }
        }
    }
    Ok(graph)
}

/// Every use of the crate root by a module under `src_dir`, as `(module, path)`: a path that
/// names no module, so an item `lib.rs` or `main.rs` defines or re-exports (`crate::BINARY`,
/// `crate::Error`). A module takes what it needs from the module that defines it; the root
/// only wires modules together and is used by none, so it can never sit inside a circle.
pub fn root_imports(src_dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let sources = module_sources(src_dir)?;
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut found = BTreeSet::new();
    for (module, source) in &sources {
        for path in referenced_paths(source, module) {
            if !path.is_empty() && longest_known_prefix(&path, &modules).is_none() {
                found.insert((module.join("::"), path.join("::")));
            }
        }
    }
    Ok(found.into_iter().collect())
}

/// The non-test modules under `src_dir` with their source.
fn module_sources(src_dir: &Path) -> std::io::Result<Vec<(Vec<String>, String)>> {
    let mut files = Vec::new();
    collect_rs_files(src_dir, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for file in files {
        let Ok(relative) = file.strip_prefix(src_dir) else {
            continue;
        };
        let Some(module) = module_path(relative) else {
            continue;
        };
        if module.iter().any(|segment| is_test_only(segment)) {
            continue;
        }
        sources.push((module, std::fs::read_to_string(&file)?));
    }
    Ok(sources)
}

/// Every cycle in the import graph of the modules under `src_dir` (see [`module_imports`]),
/// each as the modules on it starting with the smallest name: `["a", "b"]` means `a` uses
/// `b` and `b` uses `a`. Sorted; empty when there is none.
pub fn module_import_cycles(src_dir: &Path) -> std::io::Result<Vec<Vec<String>>> {
    Ok(cycles(&module_imports(src_dir)?))
}

/// Panics listing every module import cycle under `src_dir` (or when it cannot be read).
// A test helper: a cycle fails the test, like `assert!`.
#[allow(clippy::panic)]
pub fn assert_no_import_cycles(src_dir: &Path) {
    let found = match module_import_cycles(src_dir) {
        Ok(found) => found,
        Err(e) => panic!("reading the modules under {}: {e}", src_dir.display()),
    };
    if !found.is_empty() {
        let listed: Vec<String> = found
            .iter()
            .map(|cycle| {
                let mut names = cycle.clone();
                names.push(cycle[0].clone());
                format!("  {}", names.join(" -> "))
            })
            .collect();
        panic!(
            "{} module import cycle(s) under {}:\n{}",
            found.len(),
            src_dir.display(),
            listed.join("\n")
        );
    }
}

/// Panics when a module of `graph` uses `module`: the top of a layering, which calls the
/// modules below it and is called by none (such as a controller's `act`).
// A test helper: a wrong import fails the test, like `assert!`.
#[allow(clippy::panic)]
pub fn assert_imported_by_none(graph: &ImportGraph, module: &str) {
    for (importer, uses) in graph {
        assert!(!uses.contains(module), "{importer} imports {module}");
    }
}

/// Panics when one of the `lower` modules of `graph` is missing or uses one of the `upper`
/// ones: the lower layer (state, pure decisions) must not reach up into the steps that act.
// A test helper: a wrong import fails the test, like `assert!`.
#[allow(clippy::panic)]
pub fn assert_below(graph: &ImportGraph, lower: &[&str], upper: &[&str]) {
    for module in lower {
        let uses = graph
            .get(*module)
            .unwrap_or_else(|| panic!("module {module} not found"));
        for step in upper {
            assert!(!uses.contains(*step), "{module} imports {step}");
        }
    }
}

/// The `src` folder of the crate whose manifest folder is `manifest_dir` (a test passes
/// `env!("CARGO_MANIFEST_DIR")`).
pub fn src_of(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("src")
}

/// The shape of a controller crate (docs/architecture.md): no import cycle; `top` (the module
/// that walks the steps) imported by no module; none of the `lower` modules (state, pure
/// decisions) using any of the `steps` that act or `top`. Returns the graph for the crate's
/// own further rules.
// A test helper: a wrong import fails the test, like `assert!`.
#[allow(clippy::panic)]
pub fn assert_controller_shape(
    src_dir: &Path,
    top: &str,
    steps: &[&str],
    lower: &[&str],
) -> ImportGraph {
    assert_no_import_cycles(src_dir);
    let graph = match module_imports(src_dir) {
        Ok(graph) => graph,
        Err(e) => panic!("reading the modules under {}: {e}", src_dir.display()),
    };
    assert_imported_by_none(&graph, top);
    for step in steps {
        assert!(graph.contains_key(*step), "module {step} not found");
    }
    let mut upper = steps.to_vec();
    upper.push(top);
    assert_below(&graph, lower, &upper);
    graph
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `foo/bar.rs` -> `[foo, bar]`, `foo/mod.rs` -> `[foo]`; `None` for the crate roots and
/// `bin/` (separate crates).
fn module_path(relative: &Path) -> Option<Vec<String>> {
    let mut segments: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segments.first().is_some_and(|s| s == "bin") {
        return None;
    }
    if segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    if segments.is_empty() || segments == ["lib"] || segments == ["main"] {
        return None;
    }
    Some(segments)
}

fn is_test_only(segment: &str) -> bool {
    TEST_ONLY.contains(&segment) || segment.ends_with("_tests")
}

fn longest_known_prefix<'a>(
    path: &[String],
    modules: &'a BTreeSet<Vec<String>>,
) -> Option<&'a Vec<String>> {
    (1..=path.len())
        .rev()
        .find_map(|len| modules.get(&path[..len]))
}

/// Whether `a` and `b` are the same module or one contains the other.
fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Every elementary cycle, each rotated to start at its smallest module, sorted.
fn cycles(graph: &ImportGraph) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = graph
        .values()
        .map(|uses| uses.iter().filter_map(|u| index.get(u).copied()).collect())
        .collect();
    let mut found = Vec::new();
    for start in 0..names.len() {
        // Only through modules after `start`, so each cycle is found once, from its smallest.
        let mut path = vec![start];
        let mut on_path = vec![false; names.len()];
        on_path[start] = true;
        let mut stack = vec![edges[start].iter()];
        while let Some(next) = stack.last_mut() {
            match next.next().copied() {
                Some(n) if n == start => {
                    found.push(path.iter().map(|&i| names[i].clone()).collect());
                }
                Some(n) if n > start && !on_path[n] => {
                    on_path[n] = true;
                    path.push(n);
                    stack.push(edges[n].iter());
                }
                Some(_) => {}
                None => {
                    stack.pop();
                    if let Some(done) = path.pop() {
                        on_path[done] = false;
                    }
                }
            }
        }
    }
    found.sort();
    found
}

/// The crate-internal paths `source` (the file of `module`) refers to, made absolute
/// (without the leading `crate`).
fn referenced_paths(source: &str, module: &[String]) -> Vec<Vec<String>> {
    let tokens = tokenize(source);
    let mut paths = Vec::new();
    // Inline `mod name { ... }` blocks we are in, with the brace depth inside each.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(token) = tokens.get(i) {
        if token == &Token::Punct('#') && is_cfg_test(&tokens, i + 1) {
            i = skip_item(&tokens, i + 7); // `#[cfg(test)]` and the item it marks
            continue;
        }
        if token == &Token::Punct('#')
            && tokens.get(i + 1) == Some(&Token::Punct('!'))
            && is_cfg_test(&tokens, i + 2)
        {
            if inline.is_empty() {
                return Vec::new(); // `#![cfg(test)]`: the whole file is a test module
            }
            i += 8;
            continue;
        }
        match token {
            Token::Ident(word) if word == "mod" => {
                if let (Some(Token::Ident(name)), Some(Token::Punct('{'))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                    continue;
                }
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && tokens.get(i + 1) == Some(&Token::PathSep)
                    && !matches!(
                        i.checked_sub(1).and_then(|p| tokens.get(p)),
                        Some(Token::PathSep | Token::Punct('$'))
                    ) =>
            {
                let mut raw = Vec::new();
                let end = parse_tree(&tokens, i + 2, vec![word.clone()], &mut raw);
                let mut current = module.to_vec();
                current.extend(inline.iter().map(|(name, _)| name.clone()));
                paths.extend(raw.iter().filter_map(|p| resolve(p, &current)));
                i = end.max(i + 1);
                continue;
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// Whether `tokens[i..]` is `[cfg(test)]`.
fn is_cfg_test(tokens: &[Token], i: usize) -> bool {
    let ident = |s: &str| Token::Ident(s.to_owned());
    let expected = [
        Token::Punct('['),
        ident("cfg"),
        Token::Punct('('),
        ident("test"),
        Token::Punct(')'),
        Token::Punct(']'),
    ];
    tokens.get(i..i + expected.len()) == Some(&expected[..])
}

/// From the start of an item to just after its end: its `;`, or its closing `}`.
fn skip_item(tokens: &[Token], mut i: usize) -> usize {
    let (mut braces, mut others) = (0usize, 0usize);
    while let Some(token) = tokens.get(i) {
        i += 1;
        match token {
            Token::Punct('(' | '[') => others += 1,
            Token::Punct(')' | ']') => others = others.saturating_sub(1),
            Token::Punct('{') => braces += 1,
            Token::Punct('}') => {
                braces = braces.saturating_sub(1);
                if braces == 0 && others == 0 {
                    return i;
                }
            }
            Token::Punct(';') if braces == 0 && others == 0 => return i,
            _ => {}
        }
    }
    i
}

/// Parses a path (tree) after `prefix::`, pushing each full path to `out`; returns the index
/// after it. Handles `a::b`, `{a, b::{c, self}}`, `*` and `x as y`.
fn parse_tree(
    tokens: &[Token],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i) {
            Some(Token::Punct('{')) => {
                i += 1;
                loop {
                    match tokens.get(i) {
                        None => return i,
                        Some(Token::Punct('}')) => return i + 1,
                        Some(Token::Punct(',')) => i += 1,
                        Some(_) => i = parse_tree(tokens, i, path.clone(), out).max(i + 1),
                    }
                }
            }
            Some(Token::Ident(segment)) => {
                path.push(segment.clone());
                i += 1;
                match tokens.get(i) {
                    Some(Token::PathSep) => i += 1,
                    Some(Token::Ident(word)) if word == "as" => {
                        out.push(path);
                        return i + 2;
                    }
                    _ => {
                        out.push(path);
                        return i;
                    }
                }
            }
            Some(Token::Punct('*')) => {
                out.push(path);
                return i + 1;
            }
            _ => {
                out.push(path);
                return i;
            }
        }
    }
}

/// `[crate|self|super, ...]` seen from module `current` as an absolute path.
fn resolve(raw: &[String], current: &[String]) -> Option<Vec<String>> {
    let (anchor, rest) = raw.split_first()?;
    let mut path = match anchor.as_str() {
        "crate" => Vec::new(),
        "self" => current.to_vec(),
        "super" => current.split_last()?.1.to_vec(),
        _ => return None,
    };
    let mut leading = true;
    for segment in rest {
        match segment.as_str() {
            "super" if leading => {
                path.pop()?;
            }
            "self" => {}
            _ => {
                leading = false;
                path.push(segment.clone());
            }
        }
    }
    Some(path)
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
