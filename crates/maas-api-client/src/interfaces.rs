//! Bond and VLAN interfaces, interface updates and deletion, the default gateway, and the
//! VLANs of a fabric.

use std::fmt;
use std::str::FromStr;

use crate::error::MaasError;
use crate::form::Params;
use crate::model::{Interface, Vlan};
use crate::network::{interface_path, interfaces_path};
use crate::transport::{Call, MaasClient};

/// Bond modes MAAS accepts (`bond_mode`; MAAS's default is `active-backup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BondMode {
    /// `balance-rr`.
    BalanceRr,
    /// `active-backup` (MAAS's default).
    #[default]
    ActiveBackup,
    /// `balance-xor`.
    BalanceXor,
    /// `broadcast`.
    Broadcast,
    /// `802.3ad` (LACP).
    Lacp,
    /// `balance-tlb`.
    BalanceTlb,
    /// `balance-alb`.
    BalanceAlb,
}

impl BondMode {
    /// Every mode, in MAAS's order.
    pub const ALL: [Self; 7] = [
        Self::BalanceRr,
        Self::ActiveBackup,
        Self::BalanceXor,
        Self::Broadcast,
        Self::Lacp,
        Self::BalanceTlb,
        Self::BalanceAlb,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BalanceRr => "balance-rr",
            Self::ActiveBackup => "active-backup",
            Self::BalanceXor => "balance-xor",
            Self::Broadcast => "broadcast",
            Self::Lacp => "802.3ad",
            Self::BalanceTlb => "balance-tlb",
            Self::BalanceAlb => "balance-alb",
        }
    }
}

impl fmt::Display for BondMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bond mode string MAAS does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown bond mode {0:?} (expected one of balance-rr, active-backup, balance-xor, broadcast, 802.3ad, balance-tlb, balance-alb)"
)]
pub struct UnknownBondMode(pub String);

impl FromStr for BondMode {
    type Err = UnknownBondMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == wanted)
            .ok_or_else(|| UnknownBondMode(s.to_owned()))
    }
}

/// Parameters of `POST /nodes/{id}/interfaces/?op=create_bond`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateBondRequest {
    /// Interface name, e.g. `bond0`.
    pub name: String,
    /// Ids of the member interfaces (they must be on the same VLAN and in no other bond).
    pub parents: Vec<i64>,
    /// MAC of the bond; MAAS uses the first parent's when absent.
    pub mac_address: Option<String>,
    /// Bond mode; MAAS's default (`active-backup`) when absent.
    pub bond_mode: Option<BondMode>,
    /// MTU.
    pub mtu: Option<u32>,
}

impl CreateBondRequest {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push("name", self.name.clone())
            .push_all("parents", self.parents.iter().map(ToString::to_string))
            .push_opt("mac_address", self.mac_address.as_deref())
            .push_opt("bond_mode", self.bond_mode)
            .push_opt("mtu", self.mtu);
        params
    }
}

/// Parameters of `POST /nodes/{id}/interfaces/?op=create_vlan`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateVlanInterfaceRequest {
    /// Id of the MAAS VLAN object (not the 802.1Q tag): a tagged VLAN on the parent's fabric.
    pub vlan: i64,
    /// Id of the parent interface (physical or bond).
    pub parent: i64,
    /// MTU.
    pub mtu: Option<u32>,
}

impl CreateVlanInterfaceRequest {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push("vlan", self.vlan.to_string())
            .push("parent", self.parent.to_string())
            .push_opt("mtu", self.mtu);
        params
    }
}

/// Fields of `PUT /nodes/{id}/interfaces/{iface}/`; absent ones are left unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceUpdate {
    /// MTU.
    pub mtu: Option<u32>,
    /// Bond mode (bonds only).
    pub bond_mode: Option<BondMode>,
}

impl InterfaceUpdate {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("mtu", self.mtu)
            .push_opt("bond_mode", self.bond_mode);
        params
    }
}

impl MaasClient {
    /// `POST /nodes/{system_id}/interfaces/?op=create_bond`. Not retried (a repeat would clash
    /// on the name and the members); after an ambiguous failure, list the interfaces.
    pub async fn create_bond(
        &self,
        system_id: &str,
        request: &CreateBondRequest,
    ) -> Result<Interface, MaasError> {
        let call = Call::post("interfaces.create_bond", interfaces_path(system_id)?)
            .op("create_bond")
            .params(request.to_params());
        self.json(call).await
    }

    /// `POST /nodes/{system_id}/interfaces/?op=create_vlan`. Not retried.
    pub async fn create_vlan_interface(
        &self,
        system_id: &str,
        request: &CreateVlanInterfaceRequest,
    ) -> Result<Interface, MaasError> {
        let call = Call::post("interfaces.create_vlan", interfaces_path(system_id)?)
            .op("create_vlan")
            .params(request.to_params());
        self.json(call).await
    }

    /// `PUT /nodes/{system_id}/interfaces/{id}/`. Idempotent, retried.
    pub async fn update_interface(
        &self,
        system_id: &str,
        interface_id: i64,
        update: &InterfaceUpdate,
    ) -> Result<Interface, MaasError> {
        self.put_json(
            "interfaces.update",
            interface_path(system_id, interface_id)?,
            update.to_params(),
        )
        .await
    }

    /// `DELETE /nodes/{system_id}/interfaces/{id}/`. Retried; a [`MaasError::NotFound`] after
    /// a retry means an earlier attempt already deleted it.
    pub async fn delete_interface(
        &self,
        system_id: &str,
        interface_id: i64,
    ) -> Result<(), MaasError> {
        self.delete_item(
            "interfaces.delete",
            interface_path(system_id, interface_id)?,
        )
        .await
    }

    /// `POST .../interfaces/{id}/?op=set_default_gateway`: the gateway of the subnet of
    /// `link_id` (a link of this interface) becomes the machine's default for its family.
    /// Without `link_id` MAAS picks the interface's only gateway per family. Idempotent, retried.
    pub async fn set_default_gateway(
        &self,
        system_id: &str,
        interface_id: i64,
        link_id: Option<i64>,
    ) -> Result<Interface, MaasError> {
        let mut params = Params::new();
        params.push_opt("link_id", link_id);
        let call = Call::post(
            "interfaces.set_default_gateway",
            interface_path(system_id, interface_id)?,
        )
        .op("set_default_gateway")
        .params(params)
        .idempotent();
        self.json(call).await
    }

    /// `GET /fabrics/{fabric_id}/vlans/`.
    pub async fn list_vlans(&self, fabric_id: i64) -> Result<Vec<Vlan>, MaasError> {
        self.get_json(
            "vlans.list",
            vec![
                "fabrics".to_owned(),
                fabric_id.to_string(),
                "vlans".to_owned(),
            ],
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bond_modes_round_trip() {
        for mode in BondMode::ALL {
            assert_eq!(mode.as_str().parse::<BondMode>(), Ok(mode));
        }
        assert_eq!(" 802.3AD ".parse::<BondMode>(), Ok(BondMode::Lacp));
        assert!("lacp".parse::<BondMode>().is_err());
        assert_eq!(BondMode::default(), BondMode::ActiveBackup);
    }

    #[test]
    fn request_params() {
        let bond = CreateBondRequest {
            name: "bond0".into(),
            parents: vec![3, 4],
            mac_address: Some("52:54:00:00:00:01".into()),
            bond_mode: Some(BondMode::Lacp),
            mtu: Some(9000),
        };
        assert_eq!(
            bond.to_params().encode(),
            "name=bond0&parents=3&parents=4&mac_address=52%3A54%3A00%3A00%3A00%3A01&bond_mode=802.3ad&mtu=9000"
        );
        let vlan = CreateVlanInterfaceRequest {
            vlan: 5002,
            parent: 9,
            mtu: None,
        };
        assert_eq!(vlan.to_params().encode(), "vlan=5002&parent=9");
        assert!(InterfaceUpdate::default().to_params().is_empty());
        let update = InterfaceUpdate {
            mtu: Some(1400),
            bond_mode: Some(BondMode::BalanceAlb),
        };
        assert_eq!(
            update.to_params().encode(),
            "mtu=1400&bond_mode=balance-alb"
        );
    }
}
