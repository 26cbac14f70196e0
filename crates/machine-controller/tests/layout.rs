//! The module layout rule of `docs/architecture.md` for this crate: no module imports one that
//! imports it back, `act` is imported by no module (it calls the step modules, never the
//! reverse), `state` sits below `act` and the step modules, and no step module uses another.
#![allow(clippy::panic)]

use xtask::layout::{assert_below, assert_controller_shape, assert_imported_by_none, src_of};

#[test]
fn act_is_on_top_and_state_below_the_steps() {
    let steps = ["claiming", "deployed", "release", "vm_ops"];
    let graph = assert_controller_shape(
        &src_of(env!("CARGO_MANIFEST_DIR")),
        "act",
        &steps,
        &[
            "state", "context", "decide", "status", "host_ops", "error", "watch", "vm",
        ],
    );
    for step in steps {
        for other in steps {
            assert!(
                other == step || !graph[step].contains(other),
                "{step} imports {other}"
            );
        }
    }
}

/// The MaasMachineTemplate controller: `templates` (the I/O) on top, imported by no module; the
/// pure `capacity` and `template_watch` below it, and below the MaasMachine steps too.
#[test]
fn the_template_controller_is_on_top_of_its_pure_modules() {
    let graph = assert_controller_shape(
        &src_of(env!("CARGO_MANIFEST_DIR")),
        "templates",
        &[],
        &["capacity", "template_watch", "choose", "decide"],
    );
    assert_imported_by_none(&graph, "act");
    assert_below(
        &graph,
        &["capacity", "template_watch"],
        &["act", "claiming", "deployed", "release", "state"],
    );
}
