//! The layout rules (docs/architecture.md), checked for every workspace member at once: no
//! module imports one that imports it back, and no module uses its crate root. The members are
//! read from the source tree (`crates/*` and `e2e`), so a new crate is covered the day it is
//! added.
#![allow(clippy::unwrap_used, clippy::panic)]

use xtask::workspace::{members, repo_root, violations};

#[test]
fn every_workspace_member_keeps_the_module_rules() {
    let root = repo_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"members = ["crates/*", "e2e"]"#),
        "the workspace members changed: walk them here too"
    );
    let names: Vec<String> = members(&root)
        .unwrap()
        .iter()
        .map(|c| c.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "cluster-controller",
        "machine-controller",
        "maas-client",
        "maas-sim",
        "runtime",
        "e2e",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not found in {names:?}"
        );
    }
    let found = violations(&root).unwrap();
    assert!(found.is_empty(), "layout breaches:\n{}", found.join("\n"));
}
