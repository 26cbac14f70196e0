//! Generated files (`deploy/crds/*.yaml`, `docs/crd-reference.md`): render,
//! write, and compare with what is committed (drift check).

use std::path::{Path, PathBuf};

use crate::crd::{all_crds, crd_file_name, render_yaml};
use crate::error::Error;
use crate::reference::render_reference;

/// Directory of the CRD YAML files, relative to the workspace root.
pub const CRD_DIR: &str = "deploy/crds";
/// The CRD reference document, relative to the workspace root.
pub const REFERENCE_DOC: &str = "docs/crd-reference.md";
/// Command that regenerates every file.
pub const REGENERATE_COMMAND: &str = "just crds (= cargo run -p capmaas-api --bin crdgen)";

/// One generated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// Full contents.
    pub contents: String,
}

/// Workspace root, from this crate's location (`crates/api`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every generated file with its contents.
pub fn generated_files() -> Result<Vec<GeneratedFile>, Error> {
    let crds = all_crds();
    let mut files = Vec::with_capacity(crds.len() + 1);
    for crd in &crds {
        files.push(GeneratedFile {
            path: Path::new(CRD_DIR).join(crd_file_name(crd)),
            contents: render_yaml(crd)?,
        });
    }
    files.push(GeneratedFile {
        path: PathBuf::from(REFERENCE_DOC),
        contents: render_reference(&crds)?,
    });
    Ok(files)
}

/// Files under `root` that differ from the generated ones: changed, missing,
/// or stale CRD files of our group that are no longer generated.
pub fn drifted_files(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let files = generated_files()?;
    let mut drifted = Vec::new();
    for file in &files {
        let full = root.join(&file.path);
        match std::fs::read_to_string(&full) {
            Ok(existing) if existing == file.contents => {}
            Ok(_) => drifted.push(file.path.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => drifted.push(file.path.clone()),
            Err(source) => {
                return Err(Error::Io {
                    action: "reading",
                    path: full,
                    source,
                });
            }
        }
    }
    drifted.extend(stale_crd_files(root, &files)?);
    Ok(drifted)
}

/// Write every generated file under `root` and delete stale CRD files of our
/// group. Returns the paths written or deleted.
pub fn write_files(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let files = generated_files()?;
    let mut touched = Vec::new();
    for file in &files {
        let full = root.join(&file.path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                action: "creating",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let unchanged =
            std::fs::read_to_string(&full).is_ok_and(|existing| existing == file.contents);
        if !unchanged {
            std::fs::write(&full, &file.contents).map_err(|source| Error::Io {
                action: "writing",
                path: full.clone(),
                source,
            })?;
            touched.push(file.path.clone());
        }
    }
    for stale in stale_crd_files(root, &files)? {
        let full = root.join(&stale);
        std::fs::remove_file(&full).map_err(|source| Error::Io {
            action: "removing",
            path: full,
            source,
        })?;
        touched.push(stale);
    }
    Ok(touched)
}

/// CRD files of our group in `deploy/crds` that are not generated any more
/// (a renamed or removed kind).
fn stale_crd_files(root: &Path, files: &[GeneratedFile]) -> Result<Vec<PathBuf>, Error> {
    let dir = root.join(CRD_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Io {
                action: "reading",
                path: dir,
                source,
            });
        }
    };
    let prefix = format!("{}_", crate::GROUP);
    let mut stale = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io {
            action: "reading",
            path: dir.clone(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = Path::new(CRD_DIR).join(&name);
        if name.starts_with(&prefix)
            && Path::new(&name)
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("yaml"))
            && !files.iter().any(|f| f.path == relative)
        {
            stale.push(relative);
        }
    }
    stale.sort();
    Ok(stale)
}
