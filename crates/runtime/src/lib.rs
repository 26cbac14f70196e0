//! Shared plumbing for every capmaas binary: flags, Kubernetes clients, logging and tracing,
//! metrics and health endpoints, leader election, shutdown, status/condition helpers, and the
//! controller kit ([`controller`]).
//!
//! A binary builds a [`Runtime`] and runs its controller in each leadership term; the
//! controller itself is wired with the [`controller`] kit (run loop, error policy, finalizers,
//! Events, guarded workload clients). The shape every binary shares is in
//! `docs/architecture.md`; in short:
//!
//! ```no_run
//! use capmaas_runtime::{BoxError, CommonArgs, Term};
//!
//! /// The binary's own flags.
//! #[derive(Debug, Clone, clap::Args)]
//! struct ThingArgs {}
//!
//! async fn run(term: Term, _args: ThingArgs) -> Result<(), BoxError> {
//!     // A context embedding `controller::Base::for_term(&term)`; the kube Controller built from
//!     // term.clients.watch (`controller::scoped`, `controller::cached`); then
//!     // `controller::run(controller, ReconcilerSettings::for_term(&term, "maasthing"), ctx,
//!     // reconcile)` next to `controller::ready_when(&term.health, &term.cancel, synced)`.
//!     term.cancel.cancelled().await;
//!     Ok(())
//! }
//!
//! async fn start(common: CommonArgs, args: ThingArgs) -> Result<(), BoxError> {
//!     capmaas_runtime::serve("thing-controller", 4, common, args, run).await
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     capmaas_runtime::main("thing-controller", "Reconciles MaasThings.", start)
//! }
//! ```
//!
//! [`Runtime::run`] serves `/metrics`, `/healthz` and `/readyz`, joins leader election (when
//! `--leader-elect`), calls the closure each time this replica becomes leader, cancels
//! [`Term::cancel`] when leadership is lost or SIGTERM arrives, releases the Lease and flushes
//! traces before returning.
//!
//! Readiness: a standby replica is ready (it is doing its job: waiting); a leader becomes ready
//! when its controller calls [`Health::mark_ready`], typically once caches are synced.

pub mod backoff;
mod binary;
pub mod client;
pub mod client_spans;
pub mod compat_flags;
pub mod conditions;
pub mod controller;
pub mod embedded;
pub mod error;
pub mod fence;
pub mod flags;
pub mod health;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod metrics_auth;
pub mod metrics_store;
pub mod otlp;
pub mod own_writes;
mod runtime;
pub mod server;
pub mod shutdown;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod trace_context;

pub use backoff::{BackoffConfig, ObjectBackoff};
pub use binary::{exit_code, main, serve};
pub use client::{KubeClients, field_manager};
pub use conditions::{
    ConditionStatus, NewCondition, get_condition, is_true, set_condition, summarize_ready,
};
pub use error::{
    BoxError, Error, ErrorCategory, Requeue, Result, error_chain, is_conflict, is_not_found,
};
pub use fence::{Fence, Fenced};
pub use flags::{CommonArgs, ListenAddr, LogFormat};
pub use health::{Health, Watchdog};
pub use leader::{LeaderElectionConfig, run_while_leader};
pub use metrics::{ControllerMetrics, MetricsRegistry, ReconcileMetrics, ReconcileTimer};
pub use own_writes::OwnWrites;
pub use runtime::{
    DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT, Runtime, RuntimeBuilder, Settings, Term,
    install_crypto_provider,
};
pub use status::{apply_status, apply_status_at};
pub use telemetry::TelemetryGuard;
