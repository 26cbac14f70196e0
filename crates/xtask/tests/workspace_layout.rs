//! The layout rule (docs/architecture.md), checked for every workspace member at once: no
//! module imports one that imports it back. The members are read from the workspace manifest
//! (`crates/*` and `e2e`), so a new crate is covered the day it is added.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

/// Every workspace member with a `src/` folder.
fn workspace_members() -> Vec<PathBuf> {
    let root = capmaas_testenv::repo_root();
    let crates = root.join("crates");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .collect();
    found.push(root.join("e2e"));
    found.retain(|dir| dir.join("src").is_dir());
    found.sort();
    found
}

#[test]
fn no_module_import_cycles_in_any_workspace_member() {
    let manifest =
        std::fs::read_to_string(capmaas_testenv::repo_root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"members = ["crates/*", "e2e"]"#),
        "the workspace members changed: walk them here too"
    );
    let members = workspace_members();
    let names: Vec<String> = members
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
    let mut cycles = Vec::new();
    for dir in members {
        for cycle in capmaas_testenv::layout::module_import_cycles(&dir.join("src")).unwrap() {
            cycles.push(format!("{}: {}", dir.display(), cycle.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "module import cycles:\n{}",
        cycles.join("\n")
    );
}
