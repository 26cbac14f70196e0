//! Which addresses the control-plane DNS record publishes: pure functions.

use std::collections::BTreeSet;
use std::net::IpAddr;

use capmaas_api::MaasMachine;
use capmaas_api::cluster::DnsRecordOptions;
use capmaas_api::common::MachineAddressType;
use capmaas_api::keys::{LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE};
use ipnet::IpNet;

/// Whether the MaasMachine belongs to the control plane of `cluster`.
pub fn is_control_plane_of(machine: &MaasMachine, cluster: &str) -> bool {
    let labels = machine.metadata.labels.as_ref();
    labels.is_some_and(|l| {
        l.get(LABEL_CLUSTER_NAME).map(String::as_str) == Some(cluster)
            && l.contains_key(LABEL_CONTROL_PLANE)
    })
}

/// The IP addresses of the live control-plane machines of `cluster`, sorted and deduplicated.
///
/// Only `InternalIP`/`ExternalIP` entries count (host names cannot go into an A record); machines
/// being deleted are left out so a replaced control-plane server drops out of the record; with
/// `subnets` (none: no filter), only addresses inside one of them are published (a multi-NIC
/// server would otherwise publish its PXE address too); a dual-stack cluster names one subnet
/// per family and publishes both. An unparsable address is skipped, never a reason to fail.
pub fn control_plane_addresses(
    machines: &[MaasMachine],
    cluster: &str,
    subnets: &[IpNet],
) -> BTreeSet<IpAddr> {
    machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none() && is_control_plane_of(m, cluster))
        .filter_map(|m| m.status.as_ref()?.addresses.as_ref())
        .flatten()
        .filter(|a| {
            matches!(
                a.type_,
                MachineAddressType::InternalIp | MachineAddressType::ExternalIp
            )
        })
        .filter_map(|a| a.address.trim().parse::<IpAddr>().ok())
        .filter(|ip| subnets.is_empty() || subnets.iter().any(|net| net.contains(ip)))
        .collect()
}

/// Parses `spec.dnsRecord.publishedAddressSubnet`.
pub fn parse_subnet(subnet: Option<&str>) -> Result<Option<IpNet>, String> {
    subnet
        .map(|s| {
            s.trim().parse::<IpNet>().map_err(|_| {
                format!(
                    "spec.dnsRecord.publishedAddressSubnet {s:?} is not a CIDR such as 10.0.0.0/24"
                )
            })
        })
        .transpose()
}

/// The subnets the record publishes from: `spec.dnsRecord.publishedAddressSubnets` when it
/// names any, else the single `publishedAddressSubnet` (CAPMAAS's field, unchanged), else none
/// (every address). The API server checks both with CEL; this re-checks for a CRD without it.
pub fn published_subnets(options: &DnsRecordOptions) -> Result<Vec<IpNet>, String> {
    let list = options
        .published_address_subnets
        .as_deref()
        .unwrap_or_default();
    if list.is_empty() {
        return Ok(parse_subnet(options.published_address_subnet.as_deref())?
            .into_iter()
            .collect());
    }
    let mut nets: Vec<IpNet> = Vec::with_capacity(list.len());
    for text in list {
        let net = text.trim().parse::<IpNet>().map_err(|_| {
            format!(
                "spec.dnsRecord.publishedAddressSubnets: {text:?} is not a CIDR such as 10.0.0.0/24 or fd00::/64"
            )
        })?;
        let v4 = matches!(net, IpNet::V4(_));
        if nets.iter().any(|n| matches!(n, IpNet::V4(_)) == v4) {
            return Err(
                "spec.dnsRecord.publishedAddressSubnets holds at most one CIDR per family (one IPv4, one IPv6)"
                    .to_owned(),
            );
        }
        nets.push(net);
    }
    Ok(nets)
}

/// What to do with the record's address list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressPlan {
    /// The addresses the record must hold, sorted.
    pub addresses: Vec<String>,
    /// The current addresses are kept because no control-plane machine has one right now.
    pub kept_previous: bool,
}

/// The address list the record must hold, given the live control-plane addresses and the
/// record's current `spec.addresses` (`None` when the record does not exist yet).
///
/// An empty set never replaces a non-empty one: while every control-plane machine is being
/// replaced or re-imaged, the API name keeps resolving to the last known servers instead of
/// vanishing (CAPMAAS PR #339 wiped the record and never healed it).
pub fn plan_addresses(live: &BTreeSet<IpAddr>, current: Option<&[String]>) -> AddressPlan {
    let current_set = parse_set(current.unwrap_or_default());
    if live.is_empty() && !current_set.is_empty() {
        return AddressPlan {
            addresses: to_strings(&current_set),
            kept_previous: true,
        };
    }
    AddressPlan {
        addresses: to_strings(live),
        kept_previous: false,
    }
}

/// Whether the record's current addresses differ, as a set, from `wanted`.
pub fn addresses_differ(current: Option<&[String]>, wanted: &[String]) -> bool {
    parse_set(current.unwrap_or_default()) != parse_set(wanted)
}

fn parse_set(addresses: &[String]) -> BTreeSet<IpAddr> {
    addresses
        .iter()
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .collect()
}

fn to_strings(set: &BTreeSet<IpAddr>) -> Vec<String> {
    set.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::machine;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn only_live_control_plane_ips_of_the_cluster_sorted_and_deduplicated() {
        let mut deleting = machine("cp-old", "prod", true, &[("InternalIP", "10.0.0.9")]);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let machines = vec![
            machine(
                "cp-1",
                "prod",
                true,
                &[
                    ("ExternalIP", "10.0.0.12"),
                    ("InternalIP", "10.0.0.12"),
                    ("Hostname", "cp-1"),
                    ("InternalDNS", "cp-1.maas"),
                ],
            ),
            machine("cp-2", "prod", true, &[("InternalIP", "10.0.0.3")]),
            machine("worker", "prod", false, &[("InternalIP", "10.0.0.50")]),
            machine("other-cp", "dev", true, &[("InternalIP", "10.0.1.1")]),
            machine("bad", "prod", true, &[("InternalIP", "not-an-ip")]),
            deleting,
        ];
        let got = control_plane_addresses(&machines, "prod", &[]);
        assert_eq!(got, ips(&["10.0.0.3", "10.0.0.12"]));
        assert_eq!(
            to_strings(&got),
            strings(&["10.0.0.3", "10.0.0.12"]),
            "numeric order, not string order"
        );
    }

    #[test]
    fn subnet_filter_drops_pxe_addresses() {
        let machines = vec![machine(
            "cp-1",
            "prod",
            true,
            &[
                ("InternalIP", "192.168.10.5"),
                ("ExternalIP", "10.20.0.5"),
                ("InternalIP", "fd00::5"),
            ],
        )];
        let net: Vec<IpNet> = parse_subnet(Some("10.20.0.0/16"))
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(
            control_plane_addresses(&machines, "prod", &net),
            ips(&["10.20.0.5"])
        );
        let v6: Vec<IpNet> = parse_subnet(Some("fd00::/64"))
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(
            control_plane_addresses(&machines, "prod", &v6),
            ips(&["fd00::5"])
        );
        assert!(parse_subnet(Some("10.20.0.0")).is_err());
        assert_eq!(parse_subnet(None).unwrap(), None);
    }

    fn options(single: Option<&str>, list: Option<&[&str]>) -> DnsRecordOptions {
        DnsRecordOptions {
            published_address_subnet: single.map(str::to_owned),
            published_address_subnets: list.map(strings),
            ttl: None,
        }
    }

    #[test]
    fn a_dual_stack_record_publishes_one_subnet_per_family() {
        let machines = vec![machine(
            "cp-1",
            "prod",
            true,
            &[
                ("InternalIP", "192.168.10.5"),
                ("InternalIP", "10.20.0.5"),
                ("InternalIP", "fd00:20::5"),
                ("InternalIP", "fd00:99::5"),
                ("Hostname", "cp-1"),
            ],
        )];
        let both = published_subnets(&options(None, Some(&["10.20.0.0/16", "fd00:20::/64"])));
        assert_eq!(
            control_plane_addresses(&machines, "prod", &both.unwrap()),
            ips(&["10.20.0.5", "fd00:20::5"])
        );
        // No filter: both families, every network.
        let none = published_subnets(&options(None, None)).unwrap();
        assert!(none.is_empty());
        assert_eq!(control_plane_addresses(&machines, "prod", &none).len(), 4);
        // The list replaces the single field; the single field alone keeps its meaning (its
        // family only: the IPv6 addresses are not published).
        let list_wins =
            published_subnets(&options(Some("192.168.0.0/16"), Some(&["fd00:20::/64"])));
        assert_eq!(
            control_plane_addresses(&machines, "prod", &list_wins.unwrap()),
            ips(&["fd00:20::5"])
        );
        let single = published_subnets(&options(Some("10.20.0.0/16"), Some(&[]))).unwrap();
        assert_eq!(
            control_plane_addresses(&machines, "prod", &single),
            ips(&["10.20.0.5"])
        );
    }

    #[test]
    fn published_subnets_are_cidrs_one_per_family() {
        let same = published_subnets(&options(None, Some(&["10.20.0.0/16", "10.30.0.0/16"])));
        assert!(same.unwrap_err().contains("at most one CIDR per family"));
        let bad = published_subnets(&options(None, Some(&["fd00::1"])));
        assert!(bad.unwrap_err().contains("publishedAddressSubnets"));
        let bad_single = published_subnets(&options(Some("10.20.0.1"), None));
        assert!(bad_single.unwrap_err().contains("publishedAddressSubnet "));
    }

    #[test]
    fn never_empties_a_published_record() {
        let live = BTreeSet::new();
        let current = strings(&["10.0.0.2", "10.0.0.1"]);
        let plan = plan_addresses(&live, Some(&current));
        assert!(plan.kept_previous);
        assert_eq!(plan.addresses, strings(&["10.0.0.1", "10.0.0.2"]));
        assert!(!addresses_differ(Some(&current), &plan.addresses));
    }

    #[test]
    fn new_record_starts_empty_and_follows_the_machines() {
        let plan = plan_addresses(&BTreeSet::new(), None);
        assert_eq!(plan.addresses, Vec::<String>::new());
        assert!(!plan.kept_previous);
        assert!(addresses_differ(
            Some(&strings(&["10.0.0.1"])),
            &plan.addresses
        ));

        let live = ips(&["10.0.0.3", "10.0.0.1"]);
        let plan = plan_addresses(&live, Some(&[]));
        assert_eq!(plan.addresses, strings(&["10.0.0.1", "10.0.0.3"]));
        assert!(addresses_differ(Some(&[]), &plan.addresses));

        // A replaced server: the set changes, nothing is kept from before.
        let plan = plan_addresses(
            &ips(&["10.0.0.4"]),
            Some(&strings(&["10.0.0.1", "10.0.0.3"])),
        );
        assert_eq!(plan.addresses, strings(&["10.0.0.4"]));
        assert!(!plan.kept_previous);
    }

    #[test]
    fn unchanged_set_in_another_order_is_no_change() {
        let current = strings(&["10.0.0.3", "10.0.0.1"]);
        let plan = plan_addresses(&ips(&["10.0.0.1", "10.0.0.3"]), Some(&current));
        assert!(!addresses_differ(Some(&current), &plan.addresses));
        assert!(addresses_differ(None, &plan.addresses));
    }
}
