//! Applying rendered network data to the (Allocated) machine before deploy: plan a phase
//! ([`plan_network`]), carry it out, read the machine again, until nothing is left. An
//! [`Applying`] works through the narrow [`Machines`] handle: MAAS and the machine cache. Bad data
//! and MAAS refusals (an address another machine holds, a missing VLAN...) are
//! [`Error::InvalidSpec`] naming the link or network; the host reports them and is not
//! deployed.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use maas_api_client::{
    CreateBondRequest, CreateVlanInterfaceRequest, InterfaceUpdate, LinkSubnetRequest, MaasError,
    Machine, Subnet, Vlan,
};
use tracing::info;

use super::plan::{MaasNetwork, NetAction, NetworkPlan, plan_network};
use super::{self as network, LinkKind, NetworkDataError, RenderedNetworkData};
use crate::error::{Error, Result};
use crate::host::machines::Machines;

/// Phases at most once the recorded static addresses are settled: structure, VLAN interfaces
/// on new bonds, links, gateway, one spare, and the one that finds nothing left.
const MAX_ROUNDS: usize = 6;

/// A MAAS refusal of what the data asks for is an invalid spec naming it; anything else
/// (MAAS down, a 409 state change) stays a MAAS error to retry.
fn refused(what: String, operation: String) -> impl FnOnce(MaasError) -> Error {
    move |e| match e {
        MaasError::AddressUnavailable { .. }
        | MaasError::BadRequest { .. }
        | MaasError::Forbidden { .. } => Error::InvalidSpec(
            NetworkDataError::Refused {
                what,
                operation,
                message: e.maas_message(),
            }
            .to_string(),
        ),
        source => Error::Maas {
            operation: "configure network",
            source,
        },
    }
}

fn spec(e: &NetworkDataError) -> Error {
    Error::InvalidSpec(e.to_string())
}

/// The network data of one deployment being applied to one machine, with what MAAS showed of
/// its networks so far.
pub(in crate::host) struct Applying<'a> {
    machines: Machines<'a>,
    system_id: &'a str,
    data: RenderedNetworkData,
    subnets: Vec<Subnet>,
    wants_vlans: bool,
    vlans: Vec<Vlan>,
    fabrics_read: BTreeSet<i64>,
}

/// What the first plan tells before anything is changed.
pub(in crate::host) struct Checked {
    /// What the data asks for that MAAS does not model (reported, not applied).
    pub(in crate::host) notes: Vec<String>,
    /// The static addresses the data links: recorded on the host before the first link.
    pub(in crate::host) static_addresses: BTreeSet<IpAddr>,
}

impl<'a> Applying<'a> {
    /// Parses the data and reads MAAS's subnets.
    pub(in crate::host) async fn start(
        machines: Machines<'a>,
        system_id: &'a str,
        text: &str,
    ) -> Result<Self> {
        let data = network::parse(text).map_err(|e| spec(&e))?;
        let subnets = machines
            .maas
            .list_subnets()
            .await
            .map_err(Error::maas("list subnets"))?;
        let wants_vlans = data
            .links
            .iter()
            .any(|l| l.link_kind() == Some(LinkKind::Vlan));
        Ok(Self {
            machines,
            system_id,
            data,
            subnets,
            wants_vlans,
            vlans: Vec::new(),
            fabrics_read: BTreeSet::new(),
        })
    }

    /// Plans against `machine` once: an error here is the data's, found before MAAS is touched.
    pub(in crate::host) async fn check(&mut self, machine: Option<&Machine>) -> Result<Checked> {
        let plan = self.plan(machine).await?;
        Ok(Checked {
            notes: plan.notes,
            static_addresses: self.data.static_addresses(),
        })
    }

    /// Carries out phases until the interfaces match the data; returns the machine as last read.
    pub(in crate::host) async fn converge(
        mut self,
        mut machine: Option<Arc<Machine>>,
    ) -> Result<Option<Arc<Machine>>> {
        let mut calls = 0usize;
        for _ in 0..MAX_ROUNDS {
            let plan = self.plan(machine.as_deref()).await?;
            if plan.is_done() {
                if calls > 0 {
                    info!(system_id = %self.system_id, calls, "applied network data to the MAAS interfaces");
                }
                return Ok(machine);
            }
            if plan.actions.is_empty() {
                break;
            }
            for action in plan.actions {
                self.act(action).await?;
                calls += 1;
            }
            machine = self.machines.read(self.system_id).await?;
        }
        Err(Error::InvalidSpec(format!(
            "network data: the MAAS interfaces of {} do not converge to it",
            self.system_id
        )))
    }

    /// The next phase against `machine`, after reading the VLANs of fabrics not seen yet.
    async fn plan(&mut self, machine: Option<&Machine>) -> Result<NetworkPlan> {
        let machine = machine.ok_or_else(|| {
            Error::InvalidSpec(format!("MAAS machine {} is gone", self.system_id))
        })?;
        if self.wants_vlans {
            let fabrics: BTreeSet<i64> = machine
                .interface_set
                .iter()
                .filter_map(|i| i.vlan.as_ref().map(|v| v.fabric_id))
                .collect();
            let missing: Vec<i64> = fabrics.difference(&self.fabrics_read).copied().collect();
            for fabric in missing {
                let listed = self
                    .machines
                    .maas
                    .list_vlans(fabric)
                    .await
                    .map_err(Error::maas("list VLANs"))?;
                self.vlans.extend(listed);
                self.fabrics_read.insert(fabric);
            }
        }
        let view = MaasNetwork {
            interfaces: &machine.interface_set,
            subnets: &self.subnets,
            vlans: &self.vlans,
            gateways: &machine.default_gateways,
        };
        plan_network(&self.data, &view).map_err(|e| spec(&e))
    }

    async fn act(&self, action: NetAction) -> Result<()> {
        let (maas, sid) = (self.machines.maas, self.system_id);
        match action {
            NetAction::DeleteInterface {
                interface,
                name,
                link,
            } => {
                info!(system_id = %sid, interface = %name, %link, "deleting MAAS interface in the way of the network data");
                match maas.delete_interface(sid, interface).await {
                    Ok(()) | Err(MaasError::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(refused(
                            format!("link {link}"),
                            format!("deleting interface {name}"),
                        )(e));
                    }
                }
            }
            NetAction::CreateBond {
                link,
                name,
                parents,
                mac_address,
                mode,
                mtu,
            } => {
                let request = CreateBondRequest {
                    name: name.clone(),
                    parents,
                    mac_address,
                    bond_mode: Some(mode),
                    mtu,
                };
                maas.create_bond(sid, &request)
                    .await
                    .map_err(refused(format!("link {link}"), format!("bond {name}")))?;
            }
            NetAction::CreateVlan {
                link,
                parent,
                vlan,
                mtu,
            } => {
                let request = CreateVlanInterfaceRequest { vlan, parent, mtu };
                maas.create_vlan_interface(sid, &request)
                    .await
                    .map_err(refused(
                        format!("link {link}"),
                        "the VLAN interface".to_owned(),
                    ))?;
            }
            NetAction::UpdateInterface {
                link,
                interface,
                mtu,
                bond_mode,
            } => {
                let update = InterfaceUpdate { mtu, bond_mode };
                maas.update_interface(sid, interface, &update)
                    .await
                    .map_err(refused(
                        format!("link {link}"),
                        "MTU or bond mode".to_owned(),
                    ))?;
            }
            NetAction::Unlink { interface, link } => {
                maas.unlink_subnet(sid, interface, link)
                    .await
                    .map_err(Error::maas("unlink subnet"))?;
            }
            NetAction::LinkStatic {
                network,
                interface,
                subnet,
                ip,
            } => {
                maas.link_subnet(sid, interface, &LinkSubnetRequest::static_ip(subnet, ip))
                    .await
                    .map_err(refused(
                        format!("network {network}"),
                        format!("static address {ip}"),
                    ))?;
            }
            NetAction::LinkDhcp {
                network,
                interface,
                subnet,
            } => {
                maas.link_subnet(sid, interface, &LinkSubnetRequest::dhcp(subnet))
                    .await
                    .map_err(refused(
                        format!("network {network}"),
                        "a DHCP link".to_owned(),
                    ))?;
            }
            NetAction::SetDefaultGateway {
                network,
                interface,
                link,
            } => {
                maas.set_default_gateway(sid, interface, link)
                    .await
                    .map_err(refused(
                        format!("network {network}"),
                        "the default gateway".to_owned(),
                    ))?;
            }
        }
        Ok(())
    }
}
