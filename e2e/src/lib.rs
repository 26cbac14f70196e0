//! End-to-end environment of the provider: Cluster API core built from Go modules and
//! run against a real management API server, a second API server as the workload
//! cluster, the MAAS simulator, our binaries as processes, and a kubelet stand-in that
//! registers Nodes when simulated servers finish deploying.

mod api;
pub mod bench;
pub mod capi;
pub mod cert_manager;
pub mod chaos;
pub mod error;
pub mod first_day;
pub mod harness;
pub mod installed;
pub mod kubelet;
pub mod moving;
pub mod objects;
pub mod otlp;
pub mod overlay;
pub mod progress;
mod starting;
pub mod stopping;
pub mod user_cluster;
pub mod workload;

pub use error::{Error, Result};
pub use harness::{Harness, HarnessConfig, apply, dynamic_api, wait_for};
pub use objects::{ClusterSpec, WorkerAddresses, WorkerRemediation, kubeconfig_secret};
