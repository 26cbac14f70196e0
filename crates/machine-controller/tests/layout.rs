//! The module layout rule of `docs/architecture.md` for this crate: no module imports one that
//! imports it back, `act` is imported by no module (it calls the step modules, never the
//! reverse), and `state` sits below `act` and the step modules.
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
fn act_is_on_top_and_state_below_the_steps() {
    let graph = module_imports(&src()).unwrap();
    assert_imported_by_none(&graph, "act");
    let steps = ["act", "claiming", "deployed", "release"];
    for step in steps {
        assert!(graph.contains_key(step), "module {step} not found");
    }
    assert_below(
        &graph,
        &[
            "state", "context", "decide", "status", "host_ops", "error", "watch",
        ],
        &steps,
    );
    for step in ["claiming", "deployed", "release"] {
        for other in ["claiming", "deployed", "release"] {
            assert!(
                other == step || !graph[step].contains(other),
                "{step} imports {other}"
            );
        }
    }
}
