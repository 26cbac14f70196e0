//! networkData: OpenStack `network_data.json` (links, networks, services) as JSON.

use std::net::IpAddr;

use capmaas_api::common::PoolReference;
use capmaas_api::data_checks::{IpFamily, TemplateProblem, network_data_issues};
use capmaas_api::data_network::{NetworkData, NetworkLinks, NetworkServices, Networks, Route};
use ipnet::IpNet;
use serde::Serialize;

use super::RenderInput;
use super::error::{RenderError, RenderProblem};
use super::links::{LinkOut, render_links};

/// Renders the network data as pretty-printed JSON: `{"links":[...],"networks":[...],
/// "services":[...]}`, every list present (possibly empty), in template order.
pub fn render_network_data(
    net: &NetworkData,
    input: &RenderInput<'_>,
) -> Result<String, RenderError> {
    if let Some(issue) = network_data_issues(net).into_iter().next() {
        return Err(issue.into());
    }
    let default_links = NetworkLinks::default();
    let links = render_links(net.links.as_ref().unwrap_or(&default_links), input)?;
    let default_networks = Networks::default();
    let networks = render_networks(net.networks.as_ref().unwrap_or(&default_networks), input)?;
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

/// Renders the networks. Ids, links and literal route families were checked beforehand
/// (`capmaas_api::data_checks`); what is checked here needs the allocated addresses.
fn render_networks(
    networks: &Networks,
    input: &RenderInput<'_>,
) -> Result<Vec<Network>, RenderError> {
    let mut out = Vec::new();
    let statics = [
        ("ipv4", IpFamily::V4, &networks.ipv4),
        ("ipv6", IpFamily::V6, &networks.ipv6),
    ];
    for (kind, family, list) in statics {
        for (i, network) in list.iter().flatten().enumerate() {
            let field = format!("spec.networkData.networks.{kind}[{i}]");
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
        ("ipv4_dhcp", "ipv4DHCP", IpFamily::V4, &networks.ipv4_dhcp),
        ("ipv6_dhcp", "ipv6DHCP", IpFamily::V6, &networks.ipv6_dhcp),
    ];
    for (kind, list_name, family, list) in dhcp {
        for (i, network) in list.iter().flatten().enumerate() {
            let field = format!("spec.networkData.networks.{list_name}[{i}]");
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
    family: IpFamily,
) -> Result<String, RenderProblem> {
    if IpFamily::of(address) != family {
        return Err(RenderProblem::WrongFamily {
            pool: pool.clone(),
            address: address.to_string(),
            family: family.name(),
        });
    }
    let max = family.max_prefix();
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
    family: IpFamily,
    input: &RenderInput<'_>,
    network_field: &str,
) -> Result<Vec<RouteOut>, RenderError> {
    let mut out = Vec::new();
    for (i, route) in routes.unwrap_or_default().iter().enumerate() {
        let field = format!("{network_field}.routes[{i}]");
        let destination: IpNet = route.network.trim().parse().map_err(|_| {
            RenderError::new(
                format!("{field}.network"),
                RenderProblem::BadCidr(route.network.clone()),
            )
        })?;
        // Literal gateways and destinations of the wrong family were checked beforehand.
        let gateway: IpAddr = match (&route.gateway, &route.gateway_from_pool) {
            (Some(literal), None) => literal.trim().parse().map_err(|_| {
                RenderError::new(
                    format!("{field}.gateway"),
                    RenderProblem::BadIp(literal.clone()),
                )
            })?,
            (None, Some(pool)) => {
                let gateway_field = format!("{field}.gatewayFromPool");
                let gateway = input
                    .address(pool, &gateway_field)?
                    .gateway
                    .ok_or_else(|| {
                        RenderError::new(&gateway_field, RenderProblem::NoGateway(pool.clone()))
                    })?;
                if IpFamily::of(gateway) != family {
                    return Err(RenderError::new(
                        gateway_field,
                        RenderProblem::Template(TemplateProblem::FamilyMismatch {
                            value: gateway.to_string(),
                            family: family.name(),
                        }),
                    ));
                }
                gateway
            }
            _ => {
                return Err(RenderError::new(field, RenderProblem::BadGatewaySource));
            }
        };
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
