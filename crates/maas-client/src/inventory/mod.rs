//! The MaasInventory controller: imports MAAS machines as MaasHosts.

pub mod controller;
pub mod plan;
