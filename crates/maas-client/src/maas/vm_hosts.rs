//! The VM host calls of [`Maas`] (MAAS 3.x LXD hosts): the one listing the inventory sync
//! makes when VM hosts can matter ([`crate::vm_hosts`]). Same rate limit as every other call.

use maas_api_client::{MaasError, VmHost};

use super::{Lane, Maas, Timed};

impl Maas {
    forward! {
        /// `GET /vm-hosts/`: every VM host, in one call; [`MaasError::VmHostsUnsupported`] on
        /// a MAAS without VM hosts.
        fn list_vm_hosts() -> Timed<Vec<VmHost>> {
            read("list_vm_hosts", None, Lane::Listing) |client| client.vm_hosts()
        }
    }
}
