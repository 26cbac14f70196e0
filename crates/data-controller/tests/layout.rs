//! The module layout rule of `docs/architecture.md`: no module of the crate imports one that
//! imports it back; the claim, template and hold reconcilers' `act` is imported by no module and
//! their pure modules (and `render`) read no context. For the IPAM provider (`src/ipam`): the
//! reconcilers (`claim`, `pool`, `address`, `lock`) are imported by no module; the pure modules
//! import no I/O module.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

use xtask::layout::{assert_imported_by_none, assert_no_import_cycles, module_imports};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn ipam() -> PathBuf {
    src().join("ipam")
}

#[test]
fn no_module_of_the_crate_imports_one_that_imports_it_back() {
    assert_no_import_cycles(&src());
}

#[test]
fn act_is_on_top_and_the_pure_modules_read_no_context() {
    let graph = module_imports(&src()).unwrap();
    for act in ["claim::act", "template::act", "hold::act"] {
        assert_imported_by_none(&graph, act);
    }
    for module in [
        "claim::decide",
        "claim::status",
        "claim::watch",
        "template::decide",
        "template::status",
        "template::watch",
        "hold::decide",
        "hold::watch",
        "render",
    ] {
        let uses = &graph[module];
        assert!(
            !uses.contains("context") && !uses.contains("writes"),
            "{module} is pure but imports {uses:?}"
        );
    }
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    assert_no_import_cycles(&ipam());
}

#[test]
fn reconcilers_on_top_and_pure_modules_below() {
    let graph = module_imports(&ipam()).unwrap();
    // The scanner sees the `super::` paths: the claim reconciler uses the context.
    assert!(graph["claim"].contains("context"), "{graph:?}");
    let reconcilers = ["claim", "pool", "address", "lock"];
    let io = [
        "claim",
        "pool",
        "address",
        "lock",
        "address_lock",
        "feed",
        "context",
    ];
    for module in reconcilers.iter().chain(&io) {
        assert!(graph.contains_key(*module), "module {module} not found");
    }
    for (module, uses) in &graph {
        for r in reconcilers {
            assert!(!uses.contains(r), "{module} imports the reconciler {r}");
        }
    }
    // `layout` and `net` are pure by construction: they live in capmaas-api, which cannot
    // import this crate's I/O modules.
    for pure in ["allocator", "decide", "status", "watch", "index", "error"] {
        let uses = &graph[pure];
        for m in io {
            assert!(!uses.contains(m), "pure module {pure} imports {m}");
        }
    }
}
