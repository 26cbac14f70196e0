//! The MaasHost controller: provisioning state machine, reboot requests, status.
//!
//! `state` observes, `decide` picks the next step (pure), `act` walks the steps and writes the
//! status; `run` holds one reconcile's state and shared writes, `actions` executes a step.
//! `watch` is the batched observation of machines in flight that wakes their hosts.

pub mod act;
mod actions;
pub mod allocations;
pub mod annotations;
pub mod decide;
pub mod finalizer;
pub mod identity;
mod machines;
pub mod network;
mod run;
pub mod state;
mod static_links;
pub mod status;
mod takeover;
pub mod user_data;
pub mod vm_host;
pub mod watch;
