//! Typed async client for the MAAS REST API 2.0.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use maas_api_client::{AllocateRequest, ApiKey, Config, MaasClient, MachineFilter};
//!
//! let key = ApiKey::parse("consumer:token:secret")?;
//! let client = MaasClient::new(Config::builder("https://maas.example:5443/MAAS/", key).build()?)?;
//! let ready = client.list_machines(&MachineFilter::new().pool("prod")).await?;
//! // Check for an earlier allocation before allocating: allocate is never retried.
//! let mine = client.list_machines(&MachineFilter::new().agent_name("capmaas-123")).await?;
//! if mine.is_empty() {
//!     let request = AllocateRequest {
//!         system_id: ready.first().map(|m| m.system_id.clone()),
//!         agent_name: Some("capmaas-123".into()),
//!         ..AllocateRequest::default()
//!     };
//!     client.allocate(&request).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Design notes: one pooled reqwest client per [`MaasClient`] (clones share it), OAuth 1.0
//! PLAINTEXT with a fresh nonce and timestamp on every attempt, form-encoded bodies with `op`
//! in the query string, a global concurrency limit, jittered exponential retries for
//! idempotent calls only, typed errors ([`MaasError`]) and a metrics hook
//! ([`RequestObserver`]). See `docs/maas-api-client.md`.

mod auth;
mod calls;
mod config;
mod dns;
mod error;
mod form;
mod interfaces;
mod inventory;
mod ipranges;
mod machine_requests;
mod machines;
pub mod model;
mod network;
mod observer;
mod text;
mod transport;
mod vm_hosts;

pub use auth::{ApiKey, ApiKeyError};
pub use config::{
    CaMode, Config, ConfigBuilder, DEFAULT_LARGE_RESPONSE_BYTES, DEFAULT_MAX_RESPONSE_BYTES,
    RetryPolicy, TlsOptions, api_root,
};
pub use dns::{DnsResourceFilter, DnsResourceSpec, DomainSpec};
pub use error::{ErrorContext, MAX_ERROR_BODY, MaasError, error_from_response};
pub use form::Params;
pub use interfaces::{
    BondMode, CreateBondRequest, CreateVlanInterfaceRequest, InterfaceUpdate, UnknownBondMode,
};
pub use inventory::{BootResourceKind, TagSpec};
pub use ipranges::IpRangeSpec;
pub use machine_requests::{
    AllocateRequest, DeployRequest, MachineFilter, ReleaseRequest, StopMode,
    validate_annotation_key,
};
pub use model::{
    BootResource, CurrentUser, DefaultGateway, DefaultGateways, DnsIpAddress, DnsResource, Domain,
    Interface, InterfaceParams, IpRange, IpRangeType, Link, LinkMode, Machine, MachineList,
    MachineStatus, NodeRef, PodRef, PowerState, ResourcePool, SkippedMachine, Subnet, Tag,
    TagUpdateResult, Version, Vlan, VmHost, VmHostResources, VmHostStoragePool, Zone,
};
pub use network::LinkSubnetRequest;
pub use observer::{NoopObserver, RequestEvent, RequestObserver};
pub use transport::{MaasClient, decode};
pub use vm_hosts::{ComposeRequest, VmHostUpdate};
