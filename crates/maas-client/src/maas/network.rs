//! The network calls of [`Maas`]: interfaces (bonds, VLAN interfaces, updates, deletion, the
//! default gateway), the VLANs of a fabric, and IP ranges. Same rate limit and fence as every
//! other call.

use maas_api_client::{
    CreateBondRequest, CreateVlanInterfaceRequest, Interface, InterfaceUpdate, IpRange,
    IpRangeSpec, MaasError, Vlan,
};

use super::{Lane, Maas};

impl Maas {
    /// `POST /nodes/{id}/interfaces/?op=create_bond` (never retried by the client).
    pub async fn create_bond(
        &self,
        system_id: &str,
        request: &CreateBondRequest,
    ) -> Result<Interface, MaasError> {
        self.write(
            "create_bond",
            Some(system_id),
            self.client.create_bond(system_id, request),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `POST /nodes/{id}/interfaces/?op=create_vlan` (never retried by the client).
    pub async fn create_vlan_interface(
        &self,
        system_id: &str,
        request: &CreateVlanInterfaceRequest,
    ) -> Result<Interface, MaasError> {
        self.write(
            "create_vlan_interface",
            Some(system_id),
            self.client.create_vlan_interface(system_id, request),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `PUT /nodes/{id}/interfaces/{iface}/` (MTU, bond mode).
    pub async fn update_interface(
        &self,
        system_id: &str,
        interface_id: i64,
        update: &InterfaceUpdate,
    ) -> Result<Interface, MaasError> {
        self.write(
            "update_interface",
            Some(system_id),
            self.client
                .update_interface(system_id, interface_id, update),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `DELETE /nodes/{id}/interfaces/{iface}/`.
    pub async fn delete_interface(
        &self,
        system_id: &str,
        interface_id: i64,
    ) -> Result<(), MaasError> {
        self.write(
            "delete_interface",
            Some(system_id),
            self.client.delete_interface(system_id, interface_id),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `POST /nodes/{id}/interfaces/{iface}/?op=set_default_gateway`.
    pub async fn set_default_gateway(
        &self,
        system_id: &str,
        interface_id: i64,
        link_id: i64,
    ) -> Result<Interface, MaasError> {
        self.write(
            "set_default_gateway",
            Some(system_id),
            self.client
                .set_default_gateway(system_id, interface_id, Some(link_id)),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `GET /fabrics/{id}/vlans/`.
    pub async fn list_vlans(&self, fabric_id: i64) -> Result<Vec<Vlan>, MaasError> {
        self.read(
            "list_vlans",
            None,
            Lane::InTurn,
            self.client.list_vlans(fabric_id),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `GET /ipranges/`.
    pub async fn list_ipranges(&self) -> Result<Vec<IpRange>, MaasError> {
        self.read(
            "list_ipranges",
            None,
            Lane::InTurn,
            self.client.list_ipranges(),
        )
        .await
        .map(|answer| answer.value)
    }

    /// `POST /ipranges/` (never retried by the client).
    pub async fn create_iprange(&self, spec: &IpRangeSpec) -> Result<IpRange, MaasError> {
        self.write("create_iprange", None, self.client.create_iprange(spec))
            .await
            .map(|answer| answer.value)
    }

    /// `PUT /ipranges/{id}/`.
    pub async fn update_iprange(&self, id: i64, spec: &IpRangeSpec) -> Result<IpRange, MaasError> {
        self.write("update_iprange", None, self.client.update_iprange(id, spec))
            .await
            .map(|answer| answer.value)
    }

    /// `DELETE /ipranges/{id}/`.
    pub async fn delete_iprange(&self, id: i64) -> Result<(), MaasError> {
        self.write("delete_iprange", None, self.client.delete_iprange(id))
            .await
            .map(|answer| answer.value)
    }
}
