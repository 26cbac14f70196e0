//! Applying rendered network data to the (Allocated) machine before deploy: plan a phase
//! ([`plan_network`]), carry it out, read the machine again, until nothing is left. Bad data
//! and MAAS refusals (an address another machine holds, a missing VLAN...) are
//! [`Error::InvalidSpec`] naming the link or network; the host reports them and is not
//! deployed.

use std::collections::BTreeSet;

use capmaas_api::common::SecretKeyReference;
use maas_api_client::{
    CreateBondRequest, CreateVlanInterfaceRequest, DefaultGateways, InterfaceUpdate,
    LinkSubnetRequest, MaasError, Vlan,
};
use tracing::{info, warn};

use super::plan::{MaasNetwork, NetAction, plan_network};
use super::{self as network, LinkKind, NetworkDataError};
use crate::error::{Error, Result};
use crate::host::run::Run;

/// Phases at most: settling the recorded static addresses, structure, VLAN interfaces on new
/// bonds, links, gateway, and one spare.
const MAX_ROUNDS: usize = 7;

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

impl Run<'_> {
    /// Makes the machine's MAAS interfaces match the rendered network data; does only what is
    /// missing, so it is safe to repeat after a crash.
    pub(in crate::host) async fn apply_network_data(
        &mut self,
        reference: &SecretKeyReference,
    ) -> Result<()> {
        let raw = self.secret_value(reference).await?;
        let text = String::from_utf8(raw).map_err(|_| {
            Error::InvalidSpec(format!(
                "network data in Secret {} is not UTF-8",
                reference.name
            ))
        })?;
        let data = network::parse(&text).map_err(|e| spec(&e))?;
        let static_addresses = data.static_addresses();
        let subnets = self
            .gw
            .maas
            .list_subnets()
            .await
            .map_err(Error::maas("list subnets"))?;
        let wants_vlans = data
            .links
            .iter()
            .any(|l| l.link_kind() == Some(LinkKind::Vlan));
        let mut vlans: Vec<Vlan> = Vec::new();
        let mut fabrics_read = BTreeSet::new();
        let mut calls = 0usize;
        for round in 0..MAX_ROUNDS {
            let machine = self.machine.clone().ok_or_else(|| {
                Error::InvalidSpec(format!("MAAS machine {} is gone", self.system_id))
            })?;
            if wants_vlans {
                let fabrics: BTreeSet<i64> = machine
                    .interface_set
                    .iter()
                    .filter_map(|i| i.vlan.as_ref().map(|v| v.fabric_id))
                    .collect();
                let missing: Vec<i64> = fabrics.difference(&fabrics_read).copied().collect();
                for fabric in &missing {
                    let listed = self
                        .gw
                        .maas
                        .list_vlans(*fabric)
                        .await
                        .map_err(Error::maas("list VLANs"))?;
                    vlans.extend(listed);
                    fabrics_read.insert(*fabric);
                }
            }
            let gateways: &DefaultGateways = &machine.default_gateways;
            let view = MaasNetwork {
                interfaces: &machine.interface_set,
                subnets: &subnets,
                vlans: &vlans,
                gateways,
            };
            let plan = plan_network(&data, &view).map_err(|e| spec(&e))?;
            if round == 0 {
                if !plan.notes.is_empty() {
                    let note = plan.notes.join("; ");
                    warn!(system_id = %self.system_id, %note, "network data: not applied to MAAS");
                    self.gw
                        .base
                        .events
                        .warning(self.host, "NetworkDataNotApplied", &note)
                        .await;
                }
                // The data is valid: record its static addresses before the first link (and
                // unlink recorded ones it no longer asks for); plan again if that changed MAAS.
                if self.settle_static_addresses(&static_addresses).await? {
                    continue;
                }
            }
            if plan.is_done() {
                if calls > 0 {
                    info!(system_id = %self.system_id, calls, "applied network data to the MAAS interfaces");
                }
                return Ok(());
            }
            if plan.actions.is_empty() {
                break;
            }
            for action in plan.actions {
                self.apply_net_action(action).await?;
                calls += 1;
            }
            self.refresh().await?;
        }
        Err(Error::InvalidSpec(format!(
            "network data: the MAAS interfaces of {} do not converge to it",
            self.system_id
        )))
    }

    async fn apply_net_action(&self, action: NetAction) -> Result<()> {
        let (maas, sid) = (&self.gw.maas, self.system_id.as_str());
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
