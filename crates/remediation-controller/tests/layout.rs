//! The module layout rule of `docs/architecture.md` for this crate: no module imports one that
//! imports it back, `act` is imported by no module, the step modules (`writes`, `host_ops`,
//! `node_ops`) sit above the pure ones and `state`, and the pure ones never see the context.
#![allow(clippy::panic)]

use xtask::layout::{assert_controller_shape, src_of};

#[test]
fn act_is_on_top_and_the_steps_above_the_pure_modules() {
    let graph = assert_controller_shape(
        &src_of(env!("CARGO_MANIFEST_DIR")),
        "act",
        &["writes", "host_ops", "node_ops"],
        &[
            "state", "context", "decide", "status", "node", "error", "watch", "keys", "args",
        ],
    );
    for module in ["decide", "status", "node", "watch", "keys"] {
        assert!(
            !graph[module].contains("context"),
            "{module} is pure but imports context"
        );
    }
}
