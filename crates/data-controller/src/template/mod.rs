//! The MaasDataTemplate reconciler: `status.indexes` rebuilt from the MaasData of the template
//! (the API server's record of who holds which index), and a finalizer that keeps the template
//! while any MaasData still uses it (deleting a template in use would leave claims unable to
//! render again). It also lets go of MaasData that are being deleted with no live claim left to
//! release them (the claim's finalizer was removed by hand): [`decide::orphaned`].
//!
//! [`act`] reconciles what [`state`] read and [`decide`] (pure) picked, with the status of
//! [`status`] (pure); [`watch`] maps a MaasData to its template.

pub mod act;
pub mod decide;
pub mod state;
pub mod status;
pub mod watch;

#[cfg(test)]
mod fixtures;
