//! The MaasCluster controller (binary `cluster-controller`).
//!
//! For each MaasCluster owned by a Cluster API `Cluster`: honour pause and external management,
//! add the finalizer, publish failure domains (MAAS zones), settle the control-plane endpoint
//! (the user's, or `<cluster>.<dnsDomain>` served by a `MaasDNSRecord` that follows the
//! control-plane machines' addresses), report `initialization.provisioned`, and keep an
//! `APIServerAvailable` condition from one shared, backed-off prober of workload API servers.
//! Deleting waits for the cluster's MaasMachines, then deletes the DNS record.
//!
//! Decisions are pure functions in [`reconcile`] and [`addresses`]; [`controller`] does the I/O.

pub mod addresses;
mod apply;
pub mod args;
mod cleanup;
pub mod controller;
pub mod error;
pub mod kubeconfig;
pub mod prober;
pub mod reconcile;
mod writes;

#[cfg(test)]
mod fixtures;

pub use args::ControllerArgs;
pub use controller::run;
pub use error::{Error, Result};

/// Binary name; also gives the field manager `capmaas-cluster-controller` and the Lease name.
pub const BINARY: &str = "cluster-controller";
/// `--concurrency` default: cluster reconciles are cheap and few.
pub const DEFAULT_CONCURRENCY: u16 = 4;
