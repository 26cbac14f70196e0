//! The MaasHost controller: provisioning state machine, reboot requests, status.

mod actions;
pub mod annotations;
pub mod controller;
pub mod finalizer;
pub mod network;
mod network_apply;
pub mod network_plan;
mod network_resolve;
pub mod observe;
mod run;
mod static_links;
pub mod status;
pub mod step;
pub mod user_data;
