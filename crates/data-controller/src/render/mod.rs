//! Pure rendering of a `MaasDataTemplate` for one machine: no I/O, no clock, no randomness.
//!
//! The claim controller gathers the inputs ([`RenderInput`]: the claim's index, the Machine,
//! MaasMachine and MaasHost, the host's interfaces and one [`AllocatedAddress`] per pool of
//! [`pools_of`]) and calls [`render_meta_data`] / [`render_network_data`] (or [`render`] for
//! both). The same inputs always give byte-identical output, so re-rendering never causes a
//! spurious Secret write.
//!
//! - metaData renders to a YAML mapping of string keys to string values (Metal3 style).
//! - networkData renders to JSON in the OpenStack `network_data.json` shape
//!   (`{"links":[...],"networks":[...],"services":[...]}`), as cloud-init's ConfigDrive /
//!   OpenStack datasource and the MAAS gateway (`maas-client` `host::network::parse`) read it.
//!
//! Every template problem (a missing label, an unknown pool, an interface the host lacks, an
//! unknown link id, a duplicate key or id, ...) is a [`RenderError`] naming the template field;
//! nothing panics and nothing renders as a silent empty value. The structural problems (ids,
//! bond members, VLAN parents, literal route families, metadata keys) come from
//! `capmaas_api::data_checks`, checked before anything is resolved; the admission webhook
//! applies the same checks, so a template it admits never fails on them here. See
//! `docs/data-controller-render.md` for the rules and a worked example.

mod error;
mod links;
mod meta;
mod network;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use capmaas_api::common::PoolReference;
use capmaas_api::data::MaasDataTemplateSpec;
use capmaas_api::data_meta::{DataObject, MetaData};
use capmaas_api::data_network::{NetworkData, Route};
use capmaas_api::host::HostInterface;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use error::{RenderError, RenderProblem};
pub use meta::{render_meta_data, render_meta_data_map};
pub use network::render_network_data;

/// Name, labels and annotations of a Machine, MaasMachine or MaasHost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

impl From<&ObjectMeta> for ObjectInfo {
    fn from(meta: &ObjectMeta) -> Self {
        Self {
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
        }
    }
}

/// The address allocated to the claim from one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedAddress {
    /// The address.
    pub address: IpAddr,
    /// Prefix length of the pool's subnet.
    pub prefix: u8,
    /// The pool's gateway, if it has one.
    pub gateway: Option<IpAddr>,
    /// The pool's DNS servers.
    pub dns_servers: Vec<IpAddr>,
}

/// Everything one claim's rendering reads.
#[derive(Debug, Clone, Copy)]
pub struct RenderInput<'a> {
    /// The claim's index in the template.
    pub index: i32,
    /// Namespace of the machine.
    pub namespace: &'a str,
    /// The CAPI Machine, once known.
    pub machine: Option<&'a ObjectInfo>,
    /// The MaasMachine, once known.
    pub maas_machine: Option<&'a ObjectInfo>,
    /// The MaasHost, once known.
    pub host: Option<&'a ObjectInfo>,
    /// The MaasHost's interfaces (`status.interfaces`).
    pub host_interfaces: &'a [HostInterface],
    /// The MaasHost's boot interface (`status.bootInterface`), when MAAS named one.
    pub host_boot_interface: Option<&'a HostInterface>,
    /// One address per pool the template uses ([`pools_of`]).
    pub addresses: &'a BTreeMap<PoolReference, AllocatedAddress>,
}

impl<'a> RenderInput<'a> {
    /// The related object, or an error at `field` when it is not known yet.
    fn object(&self, which: DataObject, field: &str) -> Result<&'a ObjectInfo, RenderError> {
        let object = match which {
            DataObject::Machine => self.machine,
            DataObject::MaasMachine => self.maas_machine,
            DataObject::MaasHost => self.host,
        };
        object.ok_or_else(|| RenderError::new(field, RenderProblem::MissingObject(which)))
    }

    /// The address allocated from `pool`, or an error at `field`.
    fn address(
        &self,
        pool: &PoolReference,
        field: &str,
    ) -> Result<&'a AllocatedAddress, RenderError> {
        self.addresses
            .get(pool)
            .ok_or_else(|| RenderError::new(field, RenderProblem::NoAddress(pool.clone())))
    }

    /// The normalised MAC of the host interface `name`, or an error at `field`.
    fn interface_mac(&self, name: &str, field: &str) -> Result<String, RenderError> {
        if self.host.is_none() {
            return Err(RenderError::new(
                field,
                RenderProblem::MissingObject(DataObject::MaasHost),
            ));
        }
        let interface = self
            .host_interfaces
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| {
                RenderError::new(field, RenderProblem::UnknownInterface(name.to_owned()))
            })?;
        normalize_mac(&interface.mac)
            .ok_or_else(|| RenderError::new(field, RenderProblem::BadMac(interface.mac.clone())))
    }

    /// The normalised MAC of the host's boot interface, or an error at `field`.
    fn boot_mac(&self, field: &str) -> Result<String, RenderError> {
        if self.host.is_none() {
            return Err(RenderError::new(
                field,
                RenderProblem::MissingObject(DataObject::MaasHost),
            ));
        }
        let interface = self
            .host_boot_interface
            .ok_or_else(|| RenderError::new(field, RenderProblem::NoBootInterface))?;
        normalize_mac(&interface.mac)
            .ok_or_else(|| RenderError::new(field, RenderProblem::BadMac(interface.mac.clone())))
    }
}

/// `aa:bb:cc:dd:ee:ff` (lower case, colons) from six hex pairs separated by `:` or `-`.
fn normalize_mac(raw: &str) -> Option<String> {
    let parts: Vec<&str> = raw.split([':', '-']).collect();
    let valid = parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    valid.then(|| parts.join(":").to_ascii_lowercase())
}

/// Both rendered documents of a template, and the hostname the metadata names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Rendered `metaData` (YAML), when the template has metaData.
    pub meta_data: Option<String>,
    /// Rendered `networkData` (JSON), when the template has networkData.
    pub network_data: Option<String>,
    /// [`hostname_of`] the rendered metadata.
    pub hostname: Option<String>,
}

/// Renders everything the template defines.
pub fn render(
    spec: &MaasDataTemplateSpec,
    input: &RenderInput<'_>,
) -> Result<Rendered, RenderError> {
    let mut rendered = Rendered::default();
    if let Some(meta) = &spec.meta_data {
        let map = render_meta_data_map(meta, input)?;
        rendered.hostname = hostname_of(&map);
        rendered.meta_data = Some(meta::to_yaml(&map)?);
    }
    if let Some(net) = &spec.network_data {
        rendered.network_data = Some(render_network_data(net, input)?);
    }
    Ok(rendered)
}

/// Every pool the template references: metaData `*FromPool` items, static networks'
/// `ipAddressFromPool`, routes' `gatewayFromPool` and `services.dnsFromPool`.
pub fn pools_of(spec: &MaasDataTemplateSpec) -> BTreeSet<PoolReference> {
    let mut pools = BTreeSet::new();
    if let Some(meta) = &spec.meta_data {
        meta_pools(meta, &mut pools);
    }
    if let Some(net) = &spec.network_data {
        network_pools(net, &mut pools);
    }
    pools
}

fn meta_pools(meta: &MetaData, pools: &mut BTreeSet<PoolReference>) {
    let lists = [
        &meta.ip_addresses_from_pool,
        &meta.prefixes_from_pool,
        &meta.gateways_from_pool,
        &meta.dns_servers_from_pool,
    ];
    for item in lists.into_iter().flatten().flatten() {
        pools.insert(item.pool());
    }
}

fn network_pools(net: &NetworkData, pools: &mut BTreeSet<PoolReference>) {
    let route_pools = |routes: &Option<Vec<Route>>, pools: &mut BTreeSet<PoolReference>| {
        for route in routes.iter().flatten() {
            if let Some(pool) = &route.gateway_from_pool {
                pools.insert(pool.clone());
            }
        }
    };
    if let Some(networks) = &net.networks {
        for network in [&networks.ipv4, &networks.ipv6]
            .into_iter()
            .flatten()
            .flatten()
        {
            pools.insert(network.ip_address_from_pool.clone());
            route_pools(&network.routes, pools);
        }
        for network in [&networks.ipv4_dhcp, &networks.ipv6_dhcp]
            .into_iter()
            .flatten()
            .flatten()
        {
            route_pools(&network.routes, pools);
        }
    }
    if let Some(pool) = net.services.as_ref().and_then(|s| s.dns_from_pool.as_ref()) {
        pools.insert(pool.clone());
    }
}

/// Metadata keys naming the machine's hostname, in order of preference.
pub const HOSTNAME_KEYS: [&str; 3] = ["local-hostname", "local_hostname", "hostname"];

/// The hostname the rendered metadata names (first non-blank value of [`HOSTNAME_KEYS`],
/// trimmed), for the gateway to set in MAAS. The caller checks it is a valid MAAS hostname.
pub fn hostname_of(meta_rendered: &BTreeMap<String, String>) -> Option<String> {
    HOSTNAME_KEYS
        .iter()
        .filter_map(|key| meta_rendered.get(*key))
        .map(|value| value.trim())
        .find(|value| !value.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
