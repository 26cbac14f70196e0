//! Markers maas-client keeps on MAAS machines (workload annotations) and on MaasHosts
//! (Kubernetes annotations), and their pure encodings.
//!
//! MAAS workload annotation keys must match `[\w.-]+` (a `/` crashes MAAS with a 500), hence
//! the dotted `capmaas.*` keys. They are wiped by MAAS on release, which suits them: they
//! describe one allocation.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use capmaas_api::common::{EraseMode, ReleasePolicy};
use maas_api_client::{Interface, LinkMode, ReleaseRequest};

/// MAAS annotation: the installation (agent_name) holding the machine.
pub const INSTALLATION: &str = "capmaas.installation";
/// MAAS annotation: `<namespace>/<name>` of the MaasHost.
pub const HOST: &str = "capmaas.host";
/// MAAS annotation: `<kind>/<name>` of the consumer.
pub const CONSUMER: &str = "capmaas.consumer";
/// MAAS annotation: UID of the consumer.
pub const CONSUMER_UID: &str = "capmaas.consumer-uid";
/// MAAS annotation: erase mode to use on release (`None`, `Quick`, `Secure`, `Full`).
pub const RELEASE_ERASE: &str = "capmaas.release-erase";
/// MAAS annotation: `true` to force the release.
pub const RELEASE_FORCE: &str = "capmaas.release-force";

/// MaasHost annotation: reboot progress (`off`, or `on:<unix seconds>`).
pub const REBOOT_STATE: &str = capmaas_api::keys::ANNOTATION_REBOOT_STATE;
/// MaasHost annotation: failed deployments counted for the current request.
pub const DEPLOY_FAILURES: &str = "maas.cluster.x-k8s.io/deploy-failures";

/// MaasHost annotation: the static addresses the gateway linked (or was about to link) on the
/// machine's MAAS interfaces from the host's network data, a sorted comma-separated list
/// ([`encode_static_addresses`]). Written before the first `link_subnet`; read by the step
/// that unlinks them once MAAS has released the machine (MAAS keeps static links after a
/// release); removed once they are gone, or when the machine is gone from MAAS.
pub const STATIC_ADDRESSES: &str = "maas.cluster.x-k8s.io/static-addresses";

/// MaasHost annotation: the machine's MAAS hostname before the gateway renamed it to the
/// hostname a provisioning request asked for. Written before the rename; once MAAS has
/// released the machine the name is given back and the annotation removed, so the requested
/// name (e.g. an indexed `worker-0`) is free for the next machine that asks for it — MAAS keeps
/// a released machine's hostname and refuses a second machine with the same one.
pub const ORIGINAL_HOSTNAME: &str = "maas.cluster.x-k8s.io/original-hostname";

/// The reboot-state codec, shared with remediation-controller.
pub use capmaas_api::reboot::{POWERED_OFF, RebootState, powering_on, reboot_state};

/// The consumer a machine is allocated for, as its annotations name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consumer<'a> {
    /// Kind of the consumer.
    pub kind: &'a str,
    /// Its namespace when not the host's.
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// Its UID.
    pub uid: &'a str,
}

/// The workload annotations a machine allocated for `host` must carry.
pub fn desired_machine_annotations(
    installation: &str,
    host_namespace: &str,
    host_name: &str,
    consumer: Option<Consumer<'_>>,
    release: Option<&ReleasePolicy>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::from([
        (INSTALLATION.to_owned(), installation.to_owned()),
        (HOST.to_owned(), format!("{host_namespace}/{host_name}")),
    ]);
    if let Some(c) = consumer {
        // `Kind/name` as before; `Kind/namespace/name` for a consumer of another namespace.
        let named = match c.namespace {
            Some(ns) => format!("{}/{ns}/{}", c.kind, c.name),
            None => format!("{}/{}", c.kind, c.name),
        };
        out.insert(CONSUMER.to_owned(), named);
        out.insert(CONSUMER_UID.to_owned(), c.uid.to_owned());
    }
    let (erase, force) = release_values(&release.cloned().unwrap_or_default());
    out.insert(RELEASE_ERASE.to_owned(), erase);
    out.insert(RELEASE_FORCE.to_owned(), force);
    out
}

/// The values of [`RELEASE_ERASE`] and [`RELEASE_FORCE`] for a policy.
pub fn release_values(policy: &ReleasePolicy) -> (String, String) {
    (format!("{:?}", policy.erase), policy.force.to_string())
}

/// The erase of a release when no policy can be found for one of our allocations (nothing
/// recorded on the machine, no `spec.provisioning`), or the recorded one cannot be read:
/// secure erase where the disks support it, else MAAS overwrites them completely.
pub const SAFEST_ERASE: EraseMode = EraseMode::Secure;

/// The erase mode recorded in [`RELEASE_ERASE`]; an unreadable value is [`SAFEST_ERASE`],
/// never weaker than what was asked.
pub fn recorded_erase(value: &str) -> EraseMode {
    match value {
        "None" => EraseMode::None,
        "Quick" => EraseMode::Quick,
        "Secure" => EraseMode::Secure,
        "Full" => EraseMode::Full,
        _ => SAFEST_ERASE,
    }
}

/// The release request for one of our machines: the policy recorded on it at allocation
/// ([`RELEASE_ERASE`], [`RELEASE_FORCE`]), else `spec`'s, else [`SAFEST_ERASE`].
///
/// Every release the gateway sends is built here (host release, deployment retry, orphan
/// sweep), and so is every retry of one that failed (5xx, Releasing failed, Failed disk
/// erasing): MAAS keeps the workload annotations until a release completes, so a retry
/// carries the same erase flags and is never downgraded to a release without erase.
pub fn release_request(
    machine_annotations: &BTreeMap<String, String>,
    spec_policy: Option<&ReleasePolicy>,
    comment: String,
) -> ReleaseRequest {
    let erase = machine_annotations
        .get(RELEASE_ERASE)
        .map(|mode| recorded_erase(mode))
        .or_else(|| spec_policy.map(|p| p.erase))
        .unwrap_or(SAFEST_ERASE);
    let force = machine_annotations
        .get(RELEASE_FORCE)
        .map(|f| f == "true")
        .or_else(|| spec_policy.map(|p| p.force))
        .unwrap_or(false);
    ReleaseRequest {
        comment: Some(comment),
        erase: erase != EraseMode::None,
        quick_erase: erase == EraseMode::Quick,
        secure_erase: erase == EraseMode::Secure,
        force,
    }
}

/// Failed deployments recorded on the host (absent or unreadable = 0).
pub fn deploy_failures(value: Option<&str>) -> u32 {
    value.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The static addresses recorded in [`STATIC_ADDRESSES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticAddresses {
    /// The addresses listed (possibly none).
    Listed(BTreeSet<IpAddr>),
    /// A value that does not read as a list of addresses (edited by hand): never ignored, it
    /// covers every static link of the machine, since which addresses the gateway linked is
    /// no longer known, and leaving one would keep an address the pool may give away.
    Unreadable(String),
}

impl StaticAddresses {
    /// Whether a static link with this address is one the record covers.
    pub fn covers(&self, ip: Option<IpAddr>) -> bool {
        match self {
            Self::Listed(set) => ip.is_some_and(|ip| set.contains(&ip)),
            Self::Unreadable(_) => true,
        }
    }
}

/// The [`STATIC_ADDRESSES`] value for a set of addresses: sorted, comma-separated.
pub fn encode_static_addresses(addresses: &BTreeSet<IpAddr>) -> String {
    addresses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads a [`STATIC_ADDRESSES`] value: comma-separated addresses (blanks around them and an
/// empty value allowed, order free); anything else is [`StaticAddresses::Unreadable`].
pub fn static_addresses(value: &str) -> StaticAddresses {
    if value.trim().is_empty() {
        return StaticAddresses::Listed(BTreeSet::new());
    }
    value
        .split(',')
        .map(|item| item.trim().parse::<IpAddr>())
        .collect::<Result<BTreeSet<_>, _>>()
        .map_or_else(
            |_| StaticAddresses::Unreadable(value.to_owned()),
            StaticAddresses::Listed,
        )
}

/// A static link of the machine to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticLink {
    /// Interface id.
    pub interface: i64,
    /// Link id.
    pub link: i64,
    /// Its address.
    pub ip: Option<IpAddr>,
}

/// The static links of `interfaces` that `recorded` covers and whose address is not in
/// `keep`, in interface and link order. Computed from the current links, so repeating the
/// unlinks after a crash only finds what is left.
pub fn recorded_static_links(
    interfaces: &[Interface],
    recorded: &StaticAddresses,
    keep: &BTreeSet<IpAddr>,
) -> Vec<StaticLink> {
    let mut out: Vec<StaticLink> = interfaces
        .iter()
        .flat_map(|i| i.links.iter().map(move |l| (i.id, l)))
        .filter(|(_, l)| l.mode == LinkMode::Static && recorded.covers(l.ip_address))
        .filter(|(_, l)| l.ip_address.is_none_or(|ip| !keep.contains(&ip)))
        .map(|(interface, l)| StaticLink {
            interface,
            link: l.id,
            ip: l.ip_address,
        })
        .collect();
    out.sort_by_key(|s| (s.interface, s.link));
    out
}

/// Now, in unix seconds (the encoding of the reboot-state annotation).
pub fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_annotations_use_maas_safe_keys() {
        let policy = ReleasePolicy {
            erase: EraseMode::Quick,
            force: false,
        };
        let a = desired_machine_annotations(
            "capmaas-x",
            "ns",
            "h1",
            Some(Consumer {
                kind: "MaasMachine",
                namespace: None,
                name: "m1",
                uid: "uid-1",
            }),
            Some(&policy),
        );
        for key in a.keys() {
            maas_api_client::validate_annotation_key(key).unwrap();
        }
        assert_eq!(a[HOST], "ns/h1");
        assert_eq!(a[CONSUMER], "MaasMachine/m1");
        let across = Consumer {
            kind: "MaasMachine",
            namespace: Some("team-a"),
            name: "m1",
            uid: "uid-1",
        };
        let b = desired_machine_annotations("capmaas-x", "ns", "h1", Some(across), None);
        assert_eq!(b[CONSUMER], "MaasMachine/team-a/m1");
        let release = release_request(&a, None, "bye".into());
        assert!(release.erase && release.quick_erase && !release.force);
        let full = ReleasePolicy {
            erase: EraseMode::Full,
            force: true,
        };
        let spec = release_request(&BTreeMap::new(), Some(&full), "bye".into());
        assert!(spec.erase && !spec.quick_erase && !spec.secure_erase && spec.force);
    }

    #[test]
    fn release_never_goes_without_the_erase_asked_for() {
        let annotations = |erase: Option<&str>| {
            let policy = ReleasePolicy::default();
            let mut a = desired_machine_annotations("i", "ns", "h", None, Some(&policy));
            match erase {
                Some(mode) => a.insert(RELEASE_ERASE.to_owned(), mode.to_owned()),
                None => a.remove(RELEASE_ERASE),
            };
            a
        };
        let secure = ReleasePolicy {
            erase: EraseMode::Secure,
            force: false,
        };
        // Recorded on the machine: wins over the spec, also after the spec is gone.
        let r = release_request(&annotations(Some("Secure")), None, "c".into());
        assert!(r.erase && r.secure_erase && !r.quick_erase);
        let r = release_request(&annotations(Some("Full")), Some(&secure), "c".into());
        assert!(r.erase && !r.secure_erase && !r.quick_erase);
        // An explicit "no erase" policy is honoured.
        let r = release_request(&annotations(Some("None")), None, "c".into());
        assert!(!r.erase && !r.secure_erase && !r.quick_erase);
        // Nothing recorded: the spec's policy.
        let r = release_request(&annotations(None), Some(&secure), "c".into());
        assert!(r.erase && r.secure_erase);
        // Nothing found at all, or an unreadable record: the safest erase.
        for a in [
            BTreeMap::new(),
            annotations(None),
            annotations(Some("garbage")),
        ] {
            let r = release_request(&a, None, "c".into());
            assert!(r.erase && r.secure_erase && !r.quick_erase, "{a:?}");
        }
        assert_eq!(recorded_erase("none"), SAFEST_ERASE);
    }

    #[test]
    fn deploy_failures_read_as_a_count() {
        assert_eq!(deploy_failures(Some("2")), 2);
        assert_eq!(deploy_failures(Some("x")), 0);
    }

    fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn static_addresses_round_trip_sorted() {
        let set = ips(&["10.0.0.20", "fd00::5", "10.0.0.3"]);
        let value = encode_static_addresses(&set);
        assert_eq!(value, "10.0.0.3,10.0.0.20,fd00::5");
        assert_eq!(
            static_addresses(&value),
            StaticAddresses::Listed(set.clone())
        );
        // Order and blanks do not matter; duplicates collapse.
        assert_eq!(
            static_addresses(" fd00::5, 10.0.0.20 ,10.0.0.3,10.0.0.3"),
            StaticAddresses::Listed(set)
        );
        assert_eq!(
            static_addresses(""),
            StaticAddresses::Listed(BTreeSet::new())
        );
        assert_eq!(encode_static_addresses(&BTreeSet::new()), "");
    }

    #[test]
    fn unreadable_static_addresses_cover_every_static_link() {
        for bad in ["10.0.0.300", "10.0.0.1/24", "10.0.0.1,,10.0.0.2", "x", ","] {
            let parsed = static_addresses(bad);
            assert_eq!(parsed, StaticAddresses::Unreadable(bad.to_owned()), "{bad}");
            assert!(parsed.covers(None) && parsed.covers(Some("1.2.3.4".parse().unwrap())));
        }
        let listed = static_addresses("10.0.0.1");
        assert!(listed.covers(Some("10.0.0.1".parse().unwrap())));
        assert!(!listed.covers(Some("10.0.0.2".parse().unwrap())));
        assert!(!listed.covers(None));
    }

    fn interface(id: i64, links: &serde_json::Value) -> Interface {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": format!("eth{id}"), "type": "physical",
            "mac_address": format!("52:54:00:00:00:0{id}"), "links": links,
        }))
        .unwrap()
    }

    #[test]
    fn recorded_static_links_are_only_the_recorded_static_ones() {
        let interfaces = [
            interface(
                1,
                &serde_json::json!([
                    {"id": 11, "mode": "static", "ip_address": "10.0.0.10"},
                    {"id": 12, "mode": "static", "ip_address": "10.0.0.99"},
                ]),
            ),
            interface(
                2,
                &serde_json::json!([
                    {"id": 21, "mode": "auto", "ip_address": "10.0.0.11"},
                    {"id": 22, "mode": "dhcp"},
                    {"id": 23, "mode": "static", "ip_address": "10.0.0.11"},
                    {"id": 24, "mode": "static"},
                ]),
            ),
        ];
        let recorded = static_addresses("10.0.0.10,10.0.0.11,10.0.0.12");
        let link = |interface, link, ip: &str| StaticLink {
            interface,
            link,
            ip: Some(ip.parse().unwrap()),
        };
        assert_eq!(
            recorded_static_links(&interfaces, &recorded, &BTreeSet::new()),
            [link(1, 11, "10.0.0.10"), link(2, 23, "10.0.0.11")]
        );
        // What the next deployment links again is kept.
        assert_eq!(
            recorded_static_links(&interfaces, &recorded, &ips(&["10.0.0.10"])),
            [link(2, 23, "10.0.0.11")]
        );
        // Unreadable: every static link, with or without an address.
        let all = recorded_static_links(
            &interfaces,
            &StaticAddresses::Unreadable("?".into()),
            &BTreeSet::new(),
        );
        assert_eq!(
            all.iter().map(|s| s.link).collect::<Vec<_>>(),
            [11, 12, 23, 24]
        );
        // Nothing left: nothing to do.
        assert!(recorded_static_links(&[], &recorded, &BTreeSet::new()).is_empty());
    }
}
