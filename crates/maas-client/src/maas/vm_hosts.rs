//! The VM host calls of [`Maas`] (MAAS 3.x LXD hosts): the one listing the inventory sync
//! makes when VM hosts can matter ([`crate::vm_hosts`]), and the composition of VMs and their
//! deletion ([`crate::compose`]). Same rate limit as every other call.

use maas_api_client::{ComposeRequest, MaasError, VmHost};

use super::{Lane, Maas, Timed};

impl Maas {
    forward! {
        /// `GET /vm-hosts/`: every VM host, in one call; [`MaasError::VmHostsUnsupported`] on
        /// a MAAS without VM hosts.
        fn list_vm_hosts() -> Timed<Vec<VmHost>> {
            read("list_vm_hosts", None, Lane::Listing) |client| client.vm_hosts()
        }

        /// `POST /vm-hosts/{id}/?op=compose` (admin): the new machine's system id. Never
        /// retried: after an ambiguous failure the caller looks for the hostname first.
        fn compose(vm_host_id: i64, request: &ComposeRequest) -> String {
            write_value("compose", None) |client| client.compose(vm_host_id, request)
        }

        /// `DELETE /machines/{system_id}/` (admin): a composed VM is deleted with it.
        fn delete_machine(system_id: &str) -> () {
            write_value("delete_machine", Some(system_id)) |client| client.delete_machine(system_id)
        }
    }
}
