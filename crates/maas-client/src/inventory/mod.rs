//! The MaasInventory controller: imports MAAS machines as MaasHosts.

pub mod controller;
pub mod plan;
pub mod schedule;
pub mod status;
