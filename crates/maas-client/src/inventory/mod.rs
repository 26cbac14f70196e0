//! The MaasInventory controller: imports MAAS machines as MaasHosts.
//!
//! `state` observes (one filtered MAAS list, and the VM hosts when they can matter: `vm_hosts`), `decide` plans the host changes (pure), `act`
//! carries them out and writes the status built by `status`; `schedule` spaces the syncs.

pub mod act;
pub mod decide;
pub mod schedule;
pub mod state;
pub mod status;
mod vm_hosts;
