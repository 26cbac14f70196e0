//! A real Kubernetes control plane for tests: etcd, kube-apiserver and (optionally)
//! kube-controller-manager, built from Go modules by `hack/testenv/build.sh` and started
//! here on free loopback ports with their own PKI, the way controller-runtime's envtest
//! does it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), capmaas_testenv::Error> {
//! let env = capmaas_testenv::TestEnv::start().await?;
//! let client = env.client();
//! // ... create objects, run controllers against `client` ...
//! # Ok(()) }
//! ```
//!
//! Everything (processes, temporary directory) goes when the `TestEnv` is dropped, also
//! when a test panics; on panic the tail of each process log is printed first.

pub mod api_requests;
pub mod bench;
mod builder;
mod crds;
mod env;
mod error;
mod kubeconfig;
pub mod objects;
mod paths;
mod pki;
mod ports;
mod process;
pub mod slow_client;
pub mod task;
mod wait;
mod webhooks;

pub use crate::api_requests::ApiRequests;
pub use crate::builder::Builder;
pub use crate::crds::{
    install as install_crds, load_dir as load_crd_dir, load_file as load_crd_file,
};
pub use crate::env::TestEnv;
pub use crate::error::{Error, Result};
pub use crate::paths::{cache_dir, env_or, kubectl, repo_root};
pub use crate::pki::{Authority, CertPair};
pub use crate::ports::free_port;
pub use crate::process::{Process, cpu_time_of, peak_rss_kib, proc_status_kib, rss_kib};
pub use crate::wait::{POLL_INTERVAL, eventually, poll_until};
pub use crate::webhooks::WebhookServing;
