//! Optional JSON state file: loaded at start, rewritten (atomically) after changes.

use std::path::Path;

use crate::error::SimError;
use crate::world::World;

/// Reads a state file; `Ok(None)` when it does not exist yet.
pub(crate) fn load(path: &Path) -> Result<Option<World>, SimError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SimError::State {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SimError::io(path.display().to_string(), e)),
    }
}

/// Serializes a snapshot (done under the lock; cheap compared with the write).
pub(crate) fn serialize(world: &World) -> Result<Vec<u8>, SimError> {
    serde_json::to_vec_pretty(&crate::world::rebase_for_save(world)).map_err(|e| SimError::State {
        path: String::new(),
        message: e.to_string(),
    })
}

/// Writes through a temporary file and a rename, so a crash never leaves half a file.
pub(crate) async fn write(path: &Path, bytes: Vec<u8>) -> Result<(), SimError> {
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, bytes)
        .await
        .map_err(|e| SimError::io(tmp.display().to_string(), e))?;
    tokio::fs::rename(&tmp, path)
        .await
        .map_err(|e| SimError::io(path.display().to_string(), e))
}
