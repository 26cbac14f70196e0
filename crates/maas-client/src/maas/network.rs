//! The network calls of [`Maas`]: interfaces (bonds, VLAN interfaces, updates, deletion, the
//! default gateway), the VLANs of a fabric, and IP ranges. Same rate limit and fence as every
//! other call.

use maas_api_client::{
    CreateBondRequest, CreateVlanInterfaceRequest, Interface, InterfaceUpdate, IpRange,
    IpRangeSpec, MaasError, Vlan,
};

use super::{Lane, Maas};

impl Maas {
    forward! {
        /// `POST /nodes/{id}/interfaces/?op=create_bond` (never retried by the client).
        fn create_bond(system_id: &str, request: &CreateBondRequest) -> Interface {
            write_value("create_bond", Some(system_id))
                |client| client.create_bond(system_id, request)
        }

        /// `POST /nodes/{id}/interfaces/?op=create_vlan` (never retried by the client).
        fn create_vlan_interface(
            system_id: &str,
            request: &CreateVlanInterfaceRequest
        ) -> Interface {
            write_value("create_vlan_interface", Some(system_id))
                |client| client.create_vlan_interface(system_id, request)
        }

        /// `PUT /nodes/{id}/interfaces/{iface}/` (MTU, bond mode).
        fn update_interface(
            system_id: &str,
            interface_id: i64,
            update: &InterfaceUpdate
        ) -> Interface {
            write_value("update_interface", Some(system_id))
                |client| client.update_interface(system_id, interface_id, update)
        }

        /// `DELETE /nodes/{id}/interfaces/{iface}/`.
        fn delete_interface(system_id: &str, interface_id: i64) -> () {
            write_value("delete_interface", Some(system_id))
                |client| client.delete_interface(system_id, interface_id)
        }

        /// `POST /nodes/{id}/interfaces/{iface}/?op=set_default_gateway`.
        fn set_default_gateway(system_id: &str, interface_id: i64, link_id: i64) -> Interface {
            write_value("set_default_gateway", Some(system_id))
                |client| client.set_default_gateway(system_id, interface_id, Some(link_id))
        }

        /// `GET /fabrics/{id}/vlans/`.
        fn list_vlans(fabric_id: i64) -> Vec<Vlan> {
            read_value("list_vlans", None, Lane::InTurn) |client| client.list_vlans(fabric_id)
        }

        /// `GET /ipranges/`.
        fn list_ipranges() -> Vec<IpRange> {
            read_value("list_ipranges", None, Lane::InTurn) |client| client.list_ipranges()
        }

        /// `POST /ipranges/` (never retried by the client).
        fn create_iprange(spec: &IpRangeSpec) -> IpRange {
            write_value("create_iprange", None) |client| client.create_iprange(spec)
        }

        /// `PUT /ipranges/{id}/`.
        fn update_iprange(id: i64, spec: &IpRangeSpec) -> IpRange {
            write_value("update_iprange", None) |client| client.update_iprange(id, spec)
        }

        /// `DELETE /ipranges/{id}/`.
        fn delete_iprange(id: i64) -> () {
            write_value("delete_iprange", None) |client| client.delete_iprange(id)
        }
    }
}
