//! The controller layout rule (docs/architecture.md), checked for every controller crate at
//! once: no module imports one that imports it back. A controller crate is any workspace crate
//! built on `capmaas-runtime` (and the runtime itself), so a new controller is covered the day
//! it is added.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

fn controller_crates() -> Vec<PathBuf> {
    let crates = capmaas_testenv::repo_root().join("crates");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| {
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
            manifest.contains("name = \"capmaas-runtime\"")
                || manifest.contains("\ncapmaas-runtime = ")
        })
        .collect();
    found.sort();
    found
}

#[test]
fn no_module_import_cycles_in_controller_crates() {
    let crates = controller_crates();
    let names: Vec<String> = crates
        .iter()
        .map(|c| c.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "cluster-controller",
        "machine-controller",
        "maas-client",
        "runtime",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not found in {names:?}"
        );
    }
    for dir in crates {
        capmaas_testenv::layout::assert_no_import_cycles(&dir.join("src"));
    }
}
