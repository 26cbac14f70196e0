//! Errors of the machine-controller: the kit's error of a controller that works in workload
//! clusters ([`ReconcileError`](capmaas_runtime::controller::workload::ReconcileError)), whose
//! category is its variant name and whose requeue policy is shared with the other such
//! controller.

pub use capmaas_runtime::controller::workload::ReconcileError as Error;
pub use capmaas_runtime::error::{is_conflict, is_not_found};

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
