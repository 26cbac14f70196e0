//! The MaasHost controller: provisioning state machine, reboot requests, status.

mod actions;
pub mod annotations;
pub mod controller;
pub mod finalizer;
pub mod network;
pub mod observe;
mod run;
mod static_links;
pub mod status;
pub mod step;
pub mod user_data;
