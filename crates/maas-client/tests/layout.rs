//! The module layout rule of `docs/architecture.md` for the gateway's host controller: `act`
//! walks the steps and is imported by no module; `actions` executes them on `run`; the
//! observation (`state`), the pure decisions and the narrow handles (`machines`,
//! `static_links`, `network`) sit below both and never reach the reconcile in progress.
#![allow(clippy::panic)]

use xtask::layout::{assert_controller_shape, src_of};

#[test]
fn host_act_is_on_top_and_the_observation_and_decisions_below_the_steps() {
    let graph = assert_controller_shape(
        &src_of(env!("CARGO_MANIFEST_DIR")),
        "host::act",
        &["host::actions", "host::run"],
        &[
            "host::state",
            "host::decide",
            "host::status",
            "host::finalizer",
            "host::annotations",
            "host::machines",
            "host::static_links",
            "host::network::apply",
            "host::network::plan",
            "host::watch",
        ],
    );
    for pure in [
        "host::decide",
        "host::status",
        "host::finalizer",
        "inventory::decide",
        "compose::decide",
    ] {
        assert!(
            !graph[pure].contains("context"),
            "{pure} is pure but imports context"
        );
    }
}
