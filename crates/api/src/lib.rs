//! Custom resource types of the MAAS Cluster API provider.
//!
//! Group `infrastructure.cluster.x-k8s.io`, version `v1beta1`, 13 namespaced
//! kinds and one cluster-scoped kind ([`MaasIPAddressLock`], the installation-wide
//! lock of an IP address). Their schemas, CEL validation rules, printer columns and
//! CRD labels live here; [`crd::all_crds`] returns every CustomResourceDefinition, the
//! `crdgen` binary writes them to `deploy/crds/` and `docs/crd-reference.md`.
//!
//! [`ipam_layout`] (with [`ipam_net`]) reads a MaasIPPool spec into its address
//! layout; data-controller serves pools from it and the admission webhook
//! validates them with it, so both agree on what a valid pool is.
//!
//! With the `examples` cargo feature (off by default, enabled only by tests),
//! `examples` holds valid and invalid objects for API-server tests; the
//! controllers do not compile it.

pub mod capi;
pub mod capi_ipam;
pub mod cluster;
pub mod common;
pub mod conditions;
pub mod crd;
pub mod data;
pub mod data_checks;
pub mod data_meta;
pub mod data_network;
pub mod dns;
pub mod error;
#[cfg(feature = "examples")]
pub mod examples;
pub mod generate;
pub mod host;
pub mod host_request;
pub mod inventory;
pub mod ipam;
pub mod ipam_layout;
pub mod ipam_lock;
pub mod ipam_net;
pub mod ipam_preallocation;
pub mod keys;
mod kind;
pub mod lxd;
pub mod machine;
pub mod names;
pub mod reboot;
pub mod reference;
pub mod remediation;

pub use cluster::{
    MaasCluster, MaasClusterSpec, MaasClusterStatus, MaasClusterTemplate, MaasClusterTemplateSpec,
};
pub use common::{API_VERSION, GROUP, VERSION};
pub use data::{
    MaasData, MaasDataClaim, MaasDataClaimSpec, MaasDataClaimStatus, MaasDataSpec, MaasDataStatus,
    MaasDataTemplate, MaasDataTemplateSpec, MaasDataTemplateStatus,
};
pub use dns::{MaasDNSRecord, MaasDNSRecordSpec, MaasDNSRecordStatus};
pub use error::Error;
pub use host::{MaasHost, MaasHostSpec, MaasHostStatus};
pub use inventory::{MaasInventory, MaasInventorySpec, MaasInventoryStatus};
pub use ipam::{MaasIPPool, MaasIPPoolSpec, MaasIPPoolStatus};
pub use ipam_lock::{LockHolder, MaasIPAddressLock, MaasIPAddressLockSpec};
pub use machine::{
    MaasMachine, MaasMachineSpec, MaasMachineStatus, MaasMachineTemplate, MaasMachineTemplateSpec,
};
pub use remediation::{
    MaasRemediation, MaasRemediationSpec, MaasRemediationStatus, MaasRemediationTemplate,
    MaasRemediationTemplateSpec,
};
