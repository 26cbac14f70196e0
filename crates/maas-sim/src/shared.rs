//! The simulator's state shared by every connection, the control API and the test handle.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::auth::NonceStore;
use crate::config::ApiKey;
use crate::latency::Region;
use crate::world::World;

/// State shared by every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) world: Mutex<World>,
    pub(crate) keys: Vec<ApiKey>,
    pub(crate) strict_auth: bool,
    pub(crate) auth_window: Duration,
    pub(crate) nonces: Mutex<NonceStore>,
    pub(crate) scheme: &'static str,
    pub(crate) state_file: Option<PathBuf>,
    pub(crate) api_hash: String,
    /// How long calls take to serve, and how many are served at once.
    pub(crate) region: Region,
}

impl Shared {
    /// Locks the world; a poisoned lock (a panicking holder) still yields the data.
    pub(crate) fn lock(&self) -> MutexGuard<'_, World> {
        self.world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Call counts per operation key.
pub(crate) fn counts(world: &World) -> BTreeMap<String, u64> {
    world.counts.clone()
}
