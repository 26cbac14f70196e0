//! The MaasMachine controller of the MAAS Cluster API provider.
//!
//! For each MaasMachine it waits for the Cluster's infrastructure and the Machine's bootstrap
//! data, chooses a MaasHost with a pure ranking ([`choose`]), claims it with an optimistic
//! lock, asks the MAAS gateway to deploy it (through `spec.provisioning` on the host), and once
//! the host is deployed sets `spec.providerID` (`maas:///<zone>/<system_id>`), the addresses,
//! the provisioning signals, and the workload Node's `spec.providerID`. Deleting releases the
//! host and, with `nodeReuse`, keeps it reserved for the owner's next machine.
//!
//! The decisions are pure ([`reconcile::decide`], [`choose::rank_hosts`],
//! [`status::next_status`]); [`actions`] and [`controller`] do the I/O.
//!
//! Run it in-process (tests, embedding) with [`run_controller`].

pub mod actions;
pub mod choose;
mod claiming;
pub mod context;
pub mod controller;
mod deployed;
pub mod error;
pub mod host_ops;
pub mod reconcile;
mod release;
pub mod reuse;
pub mod status;
pub mod workload;

#[cfg(test)]
mod test_support;

pub use context::{BINARY, DEFAULT_CONCURRENCY, Options};
pub use controller::{run, run_controller};
pub use error::{Error, Result};
