//! Rules about the data kinds that data-controller's renderer and the admission webhook both
//! apply: the structure of a MaasDataTemplate (link and network ids, bond members, VLAN
//! parents, route address families, metadata keys) and the name of a MaasData.
//!
//! They live here, once, so that a template the webhook admits is one the renderer accepts
//! and both name a problem in the same words. Only what the CRD schema and CEL rules cannot
//! express is checked; syntax (a CIDR, an IP, a MAC) is left to them, and whatever needs a host
//! or an allocated address stays in the renderer.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::net::IpAddr;

use crate::data::MaasDataTemplateSpec;
use crate::data_meta::MetaData;
use crate::data_network::{NetworkData, NetworkLinks, Networks, Route};

/// Name of the MaasData holding `index` of `template`. The API server refuses a second object
/// of one name, and that is what keeps two claims from taking one index.
pub fn maas_data_name(template: &str, index: i32) -> String {
    format!("{template}-{index}")
}

/// An IP address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl IpFamily {
    /// The family of `address`.
    pub fn of(address: IpAddr) -> Self {
        if address.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        }
    }

    /// `IPv4` or `IPv6`, as messages say it.
    pub fn name(self) -> &'static str {
        match self {
            IpFamily::V4 => "IPv4",
            IpFamily::V6 => "IPv6",
        }
    }

    /// The longest prefix length of the family.
    pub fn max_prefix(self) -> u8 {
        match self {
            IpFamily::V4 => 32,
            IpFamily::V6 => 128,
        }
    }
}

/// A problem with one template field. `Display` gives `<field>: <problem>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct TemplateIssue {
    /// Path of the field, e.g. `spec.networkData.networks.ipv4[0].link`. A duplicate metadata
    /// key names the item (`spec.metaData.strings[1]`), a duplicate id its `id` field.
    pub field: String,
    /// What is wrong with it.
    pub problem: TemplateProblem,
}

/// What is wrong with a template field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateProblem {
    /// A bond member, VLAN parent or network link names no link of a kind usable there.
    #[error("no {expected} with id {id:?}")]
    UnknownLink {
        /// The id named.
        id: String,
        /// What was looked for: `link`, `ethernet link` or `ethernet or bond link`.
        expected: &'static str,
    },
    /// An ethernet link is a member of two bonds (or twice of one).
    #[error("link {id:?} is already a member of the bond at {first}")]
    DuplicateMember {
        /// The member id.
        id: String,
        /// Path of the first membership.
        first: String,
    },
    /// A VLAN or a network on an ethernet link that is a bond member: the bond owns it.
    #[error("link {id:?} is a member of bond {bond:?}: put VLANs and addresses on the bond")]
    BondMember {
        /// The member id.
        id: String,
        /// The bond's id.
        bond: String,
    },
    /// Two links, or two networks, share an id.
    #[error("id {id:?} is already used by {first}")]
    DuplicateId {
        /// The id.
        id: String,
        /// Path of the first use.
        first: String,
    },
    /// Two VLANs with the same VLAN id on the same parent link.
    #[error("VLAN {vlan_id} on {parent:?} is already defined by {first}")]
    DuplicateVlan {
        /// The VLAN id (802.1Q tag) both VLANs use.
        vlan_id: i32,
        /// Parent link.
        parent: String,
        /// Path of the first definition.
        first: String,
    },
    /// Two metadata items, in one list or in two, with the same key.
    #[error("key {key:?} is already set by {first}")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Path of the first item.
        first: String,
    },
    /// A route destination or gateway of the other family than its network.
    #[error("{value} is not an {family} address or network")]
    FamilyMismatch {
        /// The value.
        value: String,
        /// `IPv4` or `IPv6`.
        family: &'static str,
    },
}

/// Every structural problem of the template, metaData first, each section in document order
/// (the renderer reports the first).
pub fn template_issues(spec: &MaasDataTemplateSpec) -> Vec<TemplateIssue> {
    let mut issues = spec
        .meta_data
        .as_ref()
        .map(meta_data_issues)
        .unwrap_or_default();
    if let Some(net) = &spec.network_data {
        issues.extend(network_data_issues(net));
    }
    issues
}

/// Metadata keys given twice: each later item is an issue naming the first.
pub fn meta_data_issues(meta: &MetaData) -> Vec<TemplateIssue> {
    fn keys<T>(items: Option<&Vec<T>>, key: fn(&T) -> &str) -> Vec<&str> {
        items.into_iter().flatten().map(key).collect()
    }
    // The order the renderer takes the lists in, so its first error is the first issue.
    let lists = [
        ("strings", keys(meta.strings.as_ref(), |i| &i.key)),
        ("objectNames", keys(meta.object_names.as_ref(), |i| &i.key)),
        ("namespaces", keys(meta.namespaces.as_ref(), |i| &i.key)),
        ("indexes", keys(meta.indexes.as_ref(), |i| &i.key)),
        (
            "ipAddressesFromPool",
            keys(meta.ip_addresses_from_pool.as_ref(), |i| &i.key),
        ),
        (
            "prefixesFromPool",
            keys(meta.prefixes_from_pool.as_ref(), |i| &i.key),
        ),
        (
            "gatewaysFromPool",
            keys(meta.gateways_from_pool.as_ref(), |i| &i.key),
        ),
        (
            "dnsServersFromPool",
            keys(meta.dns_servers_from_pool.as_ref(), |i| &i.key),
        ),
        (
            "fromHostInterfaces",
            keys(meta.from_host_interfaces.as_ref(), |i| &i.key),
        ),
        ("fromLabels", keys(meta.from_labels.as_ref(), |i| &i.key)),
        (
            "fromAnnotations",
            keys(meta.from_annotations.as_ref(), |i| &i.key),
        ),
    ];
    let mut first_use: BTreeMap<&str, String> = BTreeMap::new();
    let mut issues = Vec::new();
    for (list, keys) in lists {
        for (i, key) in keys.into_iter().enumerate() {
            let field = format!("spec.metaData.{list}[{i}]");
            match first_use.entry(key) {
                Entry::Occupied(first) => issues.push(TemplateIssue {
                    field,
                    problem: TemplateProblem::DuplicateKey {
                        key: key.to_owned(),
                        first: first.get().clone(),
                    },
                }),
                Entry::Vacant(slot) => {
                    slot.insert(field);
                }
            }
        }
    }
    issues
}

/// Problems of the links, the networks on them and their routes.
pub fn network_data_issues(net: &NetworkData) -> Vec<TemplateIssue> {
    let mut issues = Vec::new();
    let links = net
        .links
        .as_ref()
        .map(|l| link_table(l, &mut issues))
        .unwrap_or_default();
    if let Some(networks) = &net.networks {
        network_issues(networks, &links, &mut issues);
    }
    issues
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkKind {
    Ethernet,
    Bond,
    Vlan,
}

/// The declared links by id (kind, field of the declaration), and bond members by id (the
/// bond's id).
#[derive(Debug, Default)]
struct LinkTable {
    by_id: BTreeMap<String, (LinkKind, String)>,
    enslaved: BTreeMap<String, String>,
}

impl LinkTable {
    fn declare(
        &mut self,
        id: &str,
        kind: LinkKind,
        field: String,
        issues: &mut Vec<TemplateIssue>,
    ) {
        match self.by_id.entry(id.to_owned()) {
            Entry::Occupied(first) => issues.push(TemplateIssue {
                field: format!("{field}.id"),
                problem: TemplateProblem::DuplicateId {
                    id: id.to_owned(),
                    first: first.get().1.clone(),
                },
            }),
            Entry::Vacant(slot) => {
                slot.insert((kind, field));
            }
        }
    }

    /// Whether `id` is a declared link of one of `kinds`; an issue at `field` if not.
    fn resolves(
        &self,
        id: &str,
        kinds: &[LinkKind],
        expected: &'static str,
        field: &str,
        issues: &mut Vec<TemplateIssue>,
    ) -> bool {
        let found = self.by_id.get(id).is_some_and(|(k, _)| kinds.contains(k));
        if !found {
            issues.push(TemplateIssue {
                field: field.to_owned(),
                problem: TemplateProblem::UnknownLink {
                    id: id.to_owned(),
                    expected,
                },
            });
        }
        found
    }

    /// An issue at `field` when `id` is a bond member.
    fn not_enslaved(&self, id: &str, field: &str, issues: &mut Vec<TemplateIssue>) {
        if let Some(bond) = self.enslaved.get(id) {
            issues.push(TemplateIssue {
                field: field.to_owned(),
                problem: TemplateProblem::BondMember {
                    id: id.to_owned(),
                    bond: bond.clone(),
                },
            });
        }
    }
}

/// Ethernets, then bonds (of ethernets), then VLANs (on ethernets or bonds): every parent is
/// declared before its children whatever the list order.
fn link_table(links: &NetworkLinks, issues: &mut Vec<TemplateIssue>) -> LinkTable {
    let mut table = LinkTable::default();
    for (i, link) in links.ethernets.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.ethernets[{i}]");
        table.declare(&link.id, LinkKind::Ethernet, field, issues);
    }
    // Member id -> (field of its first membership, the bond's id).
    let mut members: BTreeMap<&str, (String, &str)> = BTreeMap::new();
    for (i, bond) in links.bonds.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.bonds[{i}]");
        for (j, member) in bond.bond_links.iter().enumerate() {
            let member_field = format!("{field}.bondLinks[{j}]");
            let ethernet = [LinkKind::Ethernet];
            if !table.resolves(member, &ethernet, "ethernet link", &member_field, issues) {
                continue;
            }
            match members.entry(member.as_str()) {
                Entry::Occupied(first) => issues.push(TemplateIssue {
                    field: member_field,
                    problem: TemplateProblem::DuplicateMember {
                        id: member.clone(),
                        first: first.get().0.clone(),
                    },
                }),
                Entry::Vacant(slot) => {
                    slot.insert((member_field, bond.id.as_str()));
                }
            }
        }
        table.declare(&bond.id, LinkKind::Bond, field, issues);
    }
    table.enslaved = members
        .into_iter()
        .map(|(member, (_, bond))| (member.to_owned(), bond.to_owned()))
        .collect();
    // (parent, VLAN id) -> field of the VLAN that defined it.
    let mut vlans: BTreeMap<(&str, i32), String> = BTreeMap::new();
    for (i, vlan) in links.vlans.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.vlans[{i}]");
        let parent_field = format!("{field}.vlanLink");
        let parents = [LinkKind::Ethernet, LinkKind::Bond];
        let expected = "ethernet or bond link";
        if table.resolves(&vlan.vlan_link, &parents, expected, &parent_field, issues) {
            table.not_enslaved(&vlan.vlan_link, &parent_field, issues);
            match vlans.entry((vlan.vlan_link.as_str(), vlan.vlan_id)) {
                Entry::Occupied(first) => issues.push(TemplateIssue {
                    field: format!("{field}.vlanID"),
                    problem: TemplateProblem::DuplicateVlan {
                        vlan_id: vlan.vlan_id,
                        parent: vlan.vlan_link.clone(),
                        first: first.get().clone(),
                    },
                }),
                Entry::Vacant(slot) => {
                    slot.insert(field.clone());
                }
            }
        }
        table.declare(&vlan.id, LinkKind::Vlan, field, issues);
    }
    table
}

/// Static networks, then DHCP ones: unique ids, a usable link, routes of the network's family.
fn network_issues(networks: &Networks, links: &LinkTable, issues: &mut Vec<TemplateIssue>) {
    let statics = network_entries(
        [
            ("ipv4", IpFamily::V4, &networks.ipv4),
            ("ipv6", IpFamily::V6, &networks.ipv6),
        ],
        |n| (&n.id, &n.link, n.routes.as_deref()),
    );
    let dhcp = network_entries(
        [
            ("ipv4DHCP", IpFamily::V4, &networks.ipv4_dhcp),
            ("ipv6DHCP", IpFamily::V6, &networks.ipv6_dhcp),
        ],
        |n| (&n.id, &n.link, n.routes.as_deref()),
    );
    let all = [LinkKind::Ethernet, LinkKind::Bond, LinkKind::Vlan];
    let mut ids: BTreeMap<&str, String> = BTreeMap::new();
    for (field, family, (id, link, routes)) in statics.chain(dhcp) {
        match ids.entry(id.as_str()) {
            Entry::Occupied(first) => issues.push(TemplateIssue {
                field: format!("{field}.id"),
                problem: TemplateProblem::DuplicateId {
                    id: id.clone(),
                    first: first.get().clone(),
                },
            }),
            Entry::Vacant(slot) => {
                slot.insert(field.clone());
            }
        }
        let link_field = format!("{field}.link");
        if links.resolves(link, &all, "link", &link_field, issues) {
            links.not_enslaved(link, &link_field, issues);
        }
        route_issues(routes.unwrap_or_default(), family, &field, issues);
    }
}

/// What [`network_issues`] checks of a network, read from a static or a DHCP one: id, link and
/// routes. The two types have these fields but no common type.
type NetworkParts<'a> = (&'a String, &'a String, Option<&'a [Route]>);

/// The networks of two lists of one type, each with its field path and family.
fn network_entries<'a, N>(
    lists: [(&'static str, IpFamily, &'a Option<Vec<N>>); 2],
    parts: fn(&'a N) -> NetworkParts<'a>,
) -> impl Iterator<Item = (String, IpFamily, NetworkParts<'a>)> {
    lists.into_iter().flat_map(move |(list, family, networks)| {
        networks.iter().flatten().enumerate().map(move |(i, n)| {
            let field = format!("spec.networkData.networks.{list}[{i}]");
            (field, family, parts(n))
        })
    })
}

/// Literal route destinations and gateways of the other family than the network. A gateway
/// from a pool is only known once allocated: the renderer checks that one.
fn route_issues(
    routes: &[Route],
    family: IpFamily,
    network_field: &str,
    issues: &mut Vec<TemplateIssue>,
) {
    for (i, route) in routes.iter().enumerate() {
        let field = format!("{network_field}.routes[{i}]");
        if let Some(destination) = cidr_address(&route.network)
            && IpFamily::of(destination) != family
        {
            issues.push(TemplateIssue {
                field: format!("{field}.network"),
                problem: TemplateProblem::FamilyMismatch {
                    value: route.network.clone(),
                    family: family.name(),
                },
            });
        }
        // With both gateway sources set the renderer reports that instead (CEL forbids it).
        let literal = match (&route.gateway, &route.gateway_from_pool) {
            (Some(literal), None) => literal.trim().parse::<IpAddr>().ok(),
            _ => None,
        };
        if let Some(gateway) = literal
            && IpFamily::of(gateway) != family
        {
            issues.push(TemplateIssue {
                field: format!("{field}.gateway"),
                problem: TemplateProblem::FamilyMismatch {
                    value: gateway.to_string(),
                    family: family.name(),
                },
            });
        }
    }
}

/// The address of a CIDR (`address/length`, the length within the family), or `None` for
/// anything else: a malformed CIDR is for the schema and the renderer to report.
fn cidr_address(text: &str) -> Option<IpAddr> {
    let (address, length) = text.trim().split_once('/')?;
    let address: IpAddr = address.parse().ok()?;
    let length: u8 = length.parse().ok()?;
    (length <= IpFamily::of(address).max_prefix()).then_some(address)
}

#[cfg(test)]
#[path = "data_checks_tests.rs"]
mod tests;
