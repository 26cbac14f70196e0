//! The MaasHost controller: provisioning state machine, reboot requests, status.

mod actions;
pub mod annotations;
pub mod controller;
pub mod network;
mod run;
pub mod status;
pub mod step;
