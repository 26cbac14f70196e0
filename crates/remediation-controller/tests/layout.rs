//! The module layout rule of `docs/architecture.md` for this crate: no module imports one that
//! imports it back, `act` is imported by no module, and the step modules (`writes`,
//! `host_ops`, `node_ops`) sit above the pure ones and `state`.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

use capmaas_testenv::layout::{
    assert_below, assert_imported_by_none, assert_no_import_cycles, module_imports,
};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    assert_no_import_cycles(&src());
}

#[test]
fn act_is_on_top_and_the_steps_above_the_pure_modules() {
    let graph = module_imports(&src()).unwrap();
    assert_imported_by_none(&graph, "act");
    let steps = ["writes", "host_ops", "node_ops"];
    assert_below(
        &graph,
        &[
            "state", "context", "decide", "status", "node", "error", "watch", "keys", "args",
        ],
        &steps,
    );
    for module in ["decide", "status", "node", "watch", "keys"] {
        let uses = &graph[module];
        assert!(
            !uses.contains("context"),
            "{module} is pure but imports context"
        );
    }
}
