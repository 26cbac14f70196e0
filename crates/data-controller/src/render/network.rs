//! networkData: OpenStack `network_data.json` (links, networks, services) as JSON.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::net::IpAddr;

use capmaas_api::common::PoolReference;
use capmaas_api::data_network::{NetworkData, NetworkLinks, NetworkServices, Networks, Route};
use ipnet::IpNet;
use serde::Serialize;

use super::RenderInput;
use super::error::{RenderError, RenderProblem};
use super::links::{LinkKind, LinkOut, Links, render_links};

/// Renders the network data as pretty-printed JSON: `{"links":[...],"networks":[...],
/// "services":[...]}`, every list present (possibly empty), in template order.
pub fn render_network_data(
    net: &NetworkData,
    input: &RenderInput<'_>,
) -> Result<String, RenderError> {
    let default_links = NetworkLinks::default();
    let links = render_links(net.links.as_ref().unwrap_or(&default_links), input)?;
    let default_networks = Networks::default();
    let networks = render_networks(
        net.networks.as_ref().unwrap_or(&default_networks),
        &links,
        input,
    )?;
    let services = render_services(net.services.as_ref(), input)?;
    let document = Document {
        links: links.rendered,
        networks,
        services,
    };
    serde_json::to_string_pretty(&document)
        .map_err(|e| RenderError::new("spec.networkData", RenderProblem::Serialize(e.to_string())))
}

/// The rendered document; field order is the JSON key order.
#[derive(Debug, Serialize)]
struct Document {
    links: Vec<LinkOut>,
    networks: Vec<Network>,
    services: Vec<Service>,
}

#[derive(Debug, Serialize)]
struct Network {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    link: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    netmask: Option<String>,
    routes: Vec<RouteOut>,
}

#[derive(Debug, Serialize)]
struct RouteOut {
    network: String,
    netmask: String,
    gateway: String,
}

#[derive(Debug, Serialize)]
struct Service {
    #[serde(rename = "type")]
    kind: &'static str,
    address: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    fn of(address: IpAddr) -> Self {
        if address.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }
}

/// Network ids seen so far, with the field of their first use.
#[derive(Debug, Default)]
struct NetworkIds(BTreeMap<String, String>);

impl NetworkIds {
    fn declare(&mut self, id: &str, field: &str) -> Result<(), RenderError> {
        match self.0.entry(id.to_owned()) {
            Entry::Occupied(first) => Err(RenderError::new(
                format!("{field}.id"),
                RenderProblem::DuplicateId {
                    id: id.to_owned(),
                    first: first.get().clone(),
                },
            )),
            Entry::Vacant(slot) => {
                slot.insert(field.to_owned());
                Ok(())
            }
        }
    }
}

fn render_networks(
    networks: &Networks,
    links: &Links,
    input: &RenderInput<'_>,
) -> Result<Vec<Network>, RenderError> {
    let all = [LinkKind::Ethernet, LinkKind::Bond, LinkKind::Vlan];
    let mut ids = NetworkIds::default();
    let mut out = Vec::new();
    let statics = [
        ("ipv4", Family::V4, &networks.ipv4),
        ("ipv6", Family::V6, &networks.ipv6),
    ];
    for (kind, family, list) in statics {
        for (i, network) in list.iter().flatten().enumerate() {
            let field = format!("spec.networkData.networks.{kind}[{i}]");
            ids.declare(&network.id, &field)?;
            let link_field = format!("{field}.link");
            links.mac_of(&network.link, &all, "link", &link_field)?;
            links.check_not_enslaved(&network.link, &link_field)?;
            let pool_field = format!("{field}.ipAddressFromPool");
            let pool = &network.ip_address_from_pool;
            let allocated = input.address(pool, &pool_field)?;
            let netmask = static_netmask(pool, allocated.address, allocated.prefix, family)
                .map_err(|p| RenderError::new(&pool_field, p))?;
            out.push(Network {
                id: network.id.clone(),
                kind,
                link: network.link.clone(),
                ip_address: Some(allocated.address.to_string()),
                netmask: Some(netmask),
                routes: render_routes(network.routes.as_deref(), family, input, &field)?,
            });
        }
    }
    let dhcp = [
        ("ipv4_dhcp", "ipv4DHCP", Family::V4, &networks.ipv4_dhcp),
        ("ipv6_dhcp", "ipv6DHCP", Family::V6, &networks.ipv6_dhcp),
    ];
    for (kind, list_name, family, list) in dhcp {
        for (i, network) in list.iter().flatten().enumerate() {
            let field = format!("spec.networkData.networks.{list_name}[{i}]");
            ids.declare(&network.id, &field)?;
            let link_field = format!("{field}.link");
            links.mac_of(&network.link, &all, "link", &link_field)?;
            links.check_not_enslaved(&network.link, &link_field)?;
            out.push(Network {
                id: network.id.clone(),
                kind,
                link: network.link.clone(),
                ip_address: None,
                netmask: None,
                routes: render_routes(network.routes.as_deref(), family, input, &field)?,
            });
        }
    }
    Ok(out)
}

/// The netmask of a pool allocation (dotted for IPv4, an IPv6 mask such as
/// `ffff:ffff:ffff:ffff::` for IPv6, as Metal3 and Nova render it).
fn static_netmask(
    pool: &PoolReference,
    address: IpAddr,
    prefix: u8,
    family: Family,
) -> Result<String, RenderProblem> {
    if Family::of(address) != family {
        return Err(RenderProblem::WrongFamily {
            pool: pool.clone(),
            address: address.to_string(),
            family: family.name(),
        });
    }
    let max = match family {
        Family::V4 => 32,
        Family::V6 => 128,
    };
    IpNet::new(address, prefix)
        .map(|net| net.netmask().to_string())
        .map_err(|_| RenderProblem::BadPrefix {
            pool: pool.clone(),
            prefix,
            max,
        })
}

fn render_routes(
    routes: Option<&[Route]>,
    family: Family,
    input: &RenderInput<'_>,
    network_field: &str,
) -> Result<Vec<RouteOut>, RenderError> {
    let mut out = Vec::new();
    for (i, route) in routes.unwrap_or_default().iter().enumerate() {
        let field = format!("{network_field}.routes[{i}]");
        let network_field = format!("{field}.network");
        let destination: IpNet = route.network.trim().parse().map_err(|_| {
            RenderError::new(
                &network_field,
                RenderProblem::BadCidr(route.network.clone()),
            )
        })?;
        if Family::of(destination.addr()) != family {
            return Err(RenderError::new(
                network_field,
                RenderProblem::FamilyMismatch {
                    value: route.network.clone(),
                    family: family.name(),
                },
            ));
        }
        let (gateway, gateway_field) = match (&route.gateway, &route.gateway_from_pool) {
            (Some(literal), None) => {
                let gateway_field = format!("{field}.gateway");
                let gateway: IpAddr = literal.trim().parse().map_err(|_| {
                    RenderError::new(&gateway_field, RenderProblem::BadIp(literal.clone()))
                })?;
                (gateway, gateway_field)
            }
            (None, Some(pool)) => {
                let gateway_field = format!("{field}.gatewayFromPool");
                let gateway = input
                    .address(pool, &gateway_field)?
                    .gateway
                    .ok_or_else(|| {
                        RenderError::new(&gateway_field, RenderProblem::NoGateway(pool.clone()))
                    })?;
                (gateway, gateway_field)
            }
            _ => {
                return Err(RenderError::new(field, RenderProblem::BadGatewaySource));
            }
        };
        if Family::of(gateway) != family {
            return Err(RenderError::new(
                gateway_field,
                RenderProblem::FamilyMismatch {
                    value: gateway.to_string(),
                    family: family.name(),
                },
            ));
        }
        out.push(RouteOut {
            network: destination.network().to_string(),
            netmask: destination.netmask().to_string(),
            gateway: gateway.to_string(),
        });
    }
    Ok(out)
}

/// `dns` then the pool's DNS servers, duplicates dropped (first occurrence kept).
fn render_services(
    services: Option<&NetworkServices>,
    input: &RenderInput<'_>,
) -> Result<Vec<Service>, RenderError> {
    let Some(services) = services else {
        return Ok(Vec::new());
    };
    let mut servers: Vec<IpAddr> = Vec::new();
    for (i, literal) in services.dns.iter().flatten().enumerate() {
        let server: IpAddr = literal.trim().parse().map_err(|_| {
            RenderError::new(
                format!("spec.networkData.services.dns[{i}]"),
                RenderProblem::BadIp(literal.clone()),
            )
        })?;
        servers.push(server);
    }
    if let Some(pool) = &services.dns_from_pool {
        let field = "spec.networkData.services.dnsFromPool";
        let allocated = input.address(pool, field)?;
        if allocated.dns_servers.is_empty() {
            return Err(RenderError::new(
                field,
                RenderProblem::NoDnsServers(pool.clone()),
            ));
        }
        servers.extend(allocated.dns_servers.iter().copied());
    }
    let mut unique: Vec<IpAddr> = Vec::with_capacity(servers.len());
    for server in servers {
        if !unique.contains(&server) {
            unique.push(server);
        }
    }
    Ok(unique
        .into_iter()
        .map(|server| Service {
            kind: "dns",
            address: server.to_string(),
        })
        .collect())
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
