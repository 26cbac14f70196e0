//! The module layout rule of `docs/architecture.md` for this crate: no module imports one that
//! imports it back, `act` is imported by no module (it calls the step modules, never the
//! reverse), `state` sits below `act` and the step modules, and no step module uses another.
#![allow(clippy::panic)]

use xtask::layout::{assert_controller_shape, src_of};

#[test]
fn act_is_on_top_and_state_below_the_steps() {
    let steps = ["claiming", "deployed", "release"];
    let graph = assert_controller_shape(
        &src_of(env!("CARGO_MANIFEST_DIR")),
        "act",
        &steps,
        &[
            "state", "context", "decide", "status", "host_ops", "error", "watch",
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
