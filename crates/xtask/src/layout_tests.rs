use super::*;

/// A `src` folder holding `files` (path relative to `src`, contents).
fn src(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    dir
}

fn cycles_in(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    module_import_cycles(src(files).path()).unwrap()
}

fn uses_of(files: &[(&str, &str)], module: &str) -> Vec<String> {
    let graph = module_imports(src(files).path()).unwrap();
    graph[module].iter().cloned().collect()
}

#[test]
fn no_cycle() {
    let files = [
        ("lib.rs", "mod a; mod b; mod c; pub use crate::a::A;"),
        ("a.rs", "use crate::b::B;\nuse crate::c;\npub struct A(B);"),
        ("b.rs", "use crate::c::C;\npub struct B(C);"),
        (
            "c.rs",
            "pub struct C;\nuse crate::Error; // the root is not a module",
        ),
    ];
    assert!(cycles_in(&files).is_empty());
    assert_eq!(uses_of(&files, "a"), ["b", "c"]);
    assert_no_import_cycles(src(&files).path());
}

#[test]
fn two_cycle() {
    let files = [
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "use crate::b::B;"),
        ("b.rs", "pub fn f() { crate::a::g(); }"),
    ];
    assert_eq!(cycles_in(&files), [["a", "b"]]);
}

#[test]
fn three_cycle_and_nested_modules() {
    let files = [
        ("lib.rs", "mod a; mod host;"),
        ("a.rs", "use crate::host::step::Step;"),
        ("host/mod.rs", "mod step; mod status;"),
        ("host/step.rs", "use super::status;"),
        ("host/status.rs", "fn f() -> crate::a::A { todo() }"),
    ];
    assert_eq!(cycles_in(&files), [["a", "host::step", "host::status"]]);
}

#[test]
fn grouped_imports_with_nesting_self_and_renames() {
    let files = [
        ("lib.rs", ""),
        (
            "a.rs",
            "pub(crate) use crate::{b, c::{self, d::{D as Dee, E}}, e::*};",
        ),
        ("b.rs", ""),
        ("c/mod.rs", ""),
        ("c/d.rs", "use crate::a::{A};"),
        ("e.rs", ""),
    ];
    assert_eq!(uses_of(&files, "a"), ["b", "c", "c::d", "e"]);
    assert_eq!(cycles_in(&files), [["a", "c::d"]]);
}

#[test]
fn super_paths_resolve_to_absolute_modules() {
    let files = [
        ("lib.rs", ""),
        ("x/mod.rs", "pub mod y; pub mod z;"),
        (
            "x/y.rs",
            "use super::z::Z;\nuse super::super::w;\nuse super::Parent;",
        ),
        ("x/z.rs", "pub fn f() -> super::y::Y { self::g() }"),
        ("w.rs", "use crate::x::Thing; // `x` is not a parent of `w`"),
    ];
    assert_eq!(uses_of(&files, "x::y"), ["w", "x::z"]);
    assert_eq!(uses_of(&files, "x::z"), ["x::y"]);
    assert_eq!(uses_of(&files, "w"), ["x"]);
    assert_eq!(cycles_in(&files), [["x::y", "x::z"]]);
}

#[test]
fn own_submodules_and_parents_are_not_edges() {
    let files = [
        ("lib.rs", ""),
        (
            "host/mod.rs",
            "use crate::host::step::Step;\nuse self::step::run;",
        ),
        (
            "host/step.rs",
            "use crate::host::Host;\nuse super::Host as H;",
        ),
    ];
    assert!(uses_of(&files, "host").is_empty());
    assert!(uses_of(&files, "host::step").is_empty());
}

#[test]
fn test_code_comments_and_literals_are_ignored() {
    let files = [
        ("lib.rs", ""),
        (
            "a.rs",
            r##"
//! Docs mentioning [`crate::b`].
/* crate::b::X /* nested */ crate::b */
const S: &str = "crate::b::X \" crate::b";
const R: &str = r#"crate::b "quoted" "#;
const C: char = '{';
fn f<'a>(x: &'a str) -> &'a str { x }
#[cfg(test)]
mod tests {
    use crate::b::helper;
}
#[cfg(test)]
use crate::b::Other;
"##,
        ),
        ("b.rs", "use crate::a::S;"),
        ("b_tests.rs", "use crate::a::S;"),
        ("a_tests.rs", "use crate::b::S;"),
        ("test_support.rs", "use crate::b::S;"),
        ("fixtures.rs", "use crate::b::S;"),
        ("c.rs", "#![cfg(test)]\nuse crate::b::S;"),
        ("bin/tool.rs", "use crate::b::S;"),
    ];
    assert!(cycles_in(&files).is_empty());
    let graph = module_imports(src(&files).path()).unwrap();
    assert_eq!(
        graph.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert!(graph["a"].is_empty());
}

#[test]
fn every_cycle_is_listed_once() {
    let files = [
        ("lib.rs", ""),
        ("a.rs", "use crate::{b, c};"),
        ("b.rs", "use crate::{a, c};"),
        ("c.rs", "use crate::a;"),
    ];
    assert_eq!(
        cycles_in(&files),
        [vec!["a", "b"], vec!["a", "b", "c"], vec!["a", "c"]]
    );
}

#[test]
#[should_panic(expected = "a -> b -> a")]
fn assert_no_import_cycles_lists_them() {
    let files = [
        ("lib.rs", ""),
        ("a.rs", "use crate::b;"),
        ("b.rs", "use crate::a;"),
    ];
    assert_no_import_cycles(src(&files).path());
}

#[test]
fn layering_checks_name_the_wrong_import() {
    let files = [
        ("lib.rs", "mod act; mod step; mod state;"),
        ("act.rs", "use crate::step;\nuse crate::state;"),
        ("step.rs", "use crate::state;"),
        ("state.rs", "use crate::step; // reaches up"),
    ];
    let graph = module_imports(src(&files).path()).unwrap();
    assert_imported_by_none(&graph, "act");
    assert_below(&graph, &["step"], &["act"]);
    let panicked = |check: &dyn Fn()| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_err();
        caught.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    assert_eq!(
        panicked(&|| assert_below(&graph, &["state"], &["act", "step"])),
        "state imports step"
    );
    assert_eq!(
        panicked(&|| assert_below(&graph, &["missing"], &["act"])),
        "module missing not found"
    );
    assert_eq!(
        panicked(&|| assert_imported_by_none(&graph, "state")),
        "act imports state"
    );
}

#[test]
fn uses_of_the_crate_root_are_found_and_module_paths_are_not() {
    let dir = src(&[
        (
            "lib.rs",
            "mod a; mod b; pub use crate::a::A; pub const NAME: &str = \"x\";",
        ),
        (
            "a.rs",
            "use crate::b::B;\nuse crate::NAME;\n// crate::IN_A_COMMENT\npub struct A(B);",
        ),
        (
            "b.rs",
            "pub struct B;\nfn f() -> &'static str { super::NAME }",
        ),
        ("c/mod.rs", "use super::A;"),
    ]);
    assert_eq!(
        root_imports(dir.path()).unwrap(),
        [
            ("a".to_owned(), "NAME".to_owned()),
            ("b".to_owned(), "NAME".to_owned()),
            ("c".to_owned(), "A".to_owned()),
        ]
    );
}
