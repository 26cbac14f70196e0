//! The workspace-wide layout check: every member's `src/` has no module import cycle and no
//! module that reaches up to its crate root.

use std::path::{Path, PathBuf};

use crate::layout::{module_import_cycles, root_imports};

/// The repository root: two levels above this crate's manifest.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The workspace members with a `src/` folder: `crates/*` and `e2e`, as the root manifest
/// lists them.
pub fn members(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let dir = entry?.path();
        if dir.join("Cargo.toml").is_file() {
            found.push(dir);
        }
    }
    found.push(root.join("e2e"));
    found.retain(|dir| dir.join("src").is_dir());
    found.sort();
    Ok(found)
}

/// Every breach of the workspace layout rules under `root`, one line each; empty when none.
pub fn violations(root: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    for dir in members(root)? {
        let src = dir.join("src");
        let name = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
        for cycle in module_import_cycles(&src)? {
            found.push(format!("{name}: import cycle {}", cycle.join(" -> ")));
        }
        for (module, path) in root_imports(&src)? {
            found.push(format!(
                "{name}: module {module} uses crate::{path} from the crate root; import it from the module that defines it"
            ));
        }
    }
    Ok(found)
}
