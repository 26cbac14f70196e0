//! Shared fixtures, `pools_of`, `hostname_of`, `render`, the documented example and the
//! property tests (never panics, deterministic, metaData YAML round-trips).

use std::collections::BTreeMap;

use capmaas_api::data::MaasDataTemplate;
use capmaas_api::host::HostInterface;
use proptest::prelude::*;
use serde_json::Value;

use super::*;

/// Owned inputs of one rendering; [`Fixture::input`] borrows them as a [`RenderInput`].
#[derive(Debug, Clone)]
pub(super) struct Fixture {
    pub(super) index: i32,
    pub(super) namespace: String,
    pub(super) machine: Option<ObjectInfo>,
    pub(super) maas_machine: Option<ObjectInfo>,
    pub(super) host: Option<ObjectInfo>,
    pub(super) interfaces: Vec<HostInterface>,
    pub(super) boot_interface: Option<HostInterface>,
    pub(super) addresses: BTreeMap<PoolReference, AllocatedAddress>,
}

pub(super) fn object(
    name: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> ObjectInfo {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    ObjectInfo {
        name: name.to_owned(),
        labels: map(labels),
        annotations: map(annotations),
    }
}

pub(super) fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

pub(super) fn pool(name: &str) -> PoolReference {
    PoolReference::maas_ip_pool(name)
}

impl Fixture {
    /// The example plus pool `bare`: 192.168.50.23 with this prefix length, no gateway, no
    /// DNS servers (what the errors of the pool-reading fields are tested with).
    pub(super) fn with_bare_pool(prefix: u8) -> Self {
        let mut fixture = Self::example();
        fixture.addresses.insert(
            pool("bare"),
            AllocatedAddress {
                address: ip("192.168.50.23"),
                prefix,
                gateway: None,
                dns_servers: vec![],
            },
        );
        fixture
    }

    /// The machine of the documented example: index 3, namespace `prod`, host `node-07` with
    /// interfaces eno1..eno3 (booting from eno1), pools `provisioning` (IPv4) and `public-v6` (IPv6).
    pub(super) fn example() -> Self {
        let interface = |name: &str, mac: &str| HostInterface {
            name: name.to_owned(),
            mac: mac.to_owned(),
        };
        let mut addresses = BTreeMap::new();
        addresses.insert(
            pool("provisioning"),
            AllocatedAddress {
                address: ip("10.20.0.23"),
                prefix: 24,
                gateway: Some(ip("10.20.0.1")),
                dns_servers: vec![ip("10.20.0.2"), ip("10.20.0.3")],
            },
        );
        addresses.insert(
            pool("public-v6"),
            AllocatedAddress {
                address: ip("2001:db8:0:10::23"),
                prefix: 64,
                gateway: Some(ip("2001:db8:0:10::1")),
                dns_servers: vec![ip("2001:db8::53")],
            },
        );
        Self {
            index: 3,
            namespace: "prod".to_owned(),
            machine: Some(object(
                "cp-abcde",
                &[("cluster.x-k8s.io/cluster-name", "prod-1")],
                &[],
            )),
            maas_machine: Some(object("prod-1-cp-xyz12", &[], &[])),
            host: Some(object(
                "node-07",
                &[("maas.cluster.x-k8s.io/zone", "rack-2")],
                &[("example.com/asset-tag", "AT-0042")],
            )),
            interfaces: vec![
                interface("eno1", "52:54:00:AA:BB:01"),
                interface("eno2", "52:54:00:aa:bb:02"),
                interface("eno3", "52-54-00-aa-bb-03"),
            ],
            boot_interface: Some(interface("eno1", "52:54:00:AA:BB:01")),
            addresses,
        }
    }

    pub(super) fn input(&self) -> RenderInput<'_> {
        RenderInput {
            index: self.index,
            namespace: &self.namespace,
            machine: self.machine.as_ref(),
            maas_machine: self.maas_machine.as_ref(),
            host: self.host.as_ref(),
            host_interfaces: &self.interfaces,
            host_boot_interface: self.boot_interface.as_ref(),
            addresses: &self.addresses,
        }
    }
}

/// Parses a template from YAML.
pub(super) fn template(yaml: &str) -> MaasDataTemplateSpec {
    let template: MaasDataTemplate = serde_saphyr::from_str(yaml).unwrap();
    template.spec
}

/// Parses only the `spec` part of a template from YAML.
pub(super) fn spec(yaml: &str) -> MaasDataTemplateSpec {
    serde_saphyr::from_str(yaml).unwrap()
}

// networkData helpers shared by links_tests.rs and network_tests.rs.

pub(super) fn net(yaml: &str) -> NetworkData {
    serde_saphyr::from_str(yaml).unwrap()
}

pub(super) fn render_with(yaml: &str, fixture: &Fixture) -> Result<Value, RenderError> {
    let text = render_network_data(&net(yaml), &fixture.input())?;
    Ok(serde_json::from_str(&text).unwrap())
}

pub(super) fn ok(yaml: &str) -> Value {
    render_with(yaml, &Fixture::example()).unwrap()
}

pub(super) fn err(yaml: &str) -> String {
    err_with(yaml, &Fixture::example())
}

pub(super) fn err_with(yaml: &str, fixture: &Fixture) -> String {
    render_with(yaml, fixture).unwrap_err().to_string()
}

/// Ethernets eno1, eno2 and eno3, each with the MAC of the host interface of its name.
pub(super) const ETHERNETS: &str = r"
links:
  ethernets:
    - {id: eno1, macAddress: {fromHostInterface: eno1}}
    - {id: eno2, macAddress: {fromHostInterface: eno2}}
    - {id: eno3, macAddress: {fromHostInterface: eno3}}
";

/// With [`ETHERNETS`]: `bond0` over eno2+eno3 and eno1 alone, the links most tests build on.
const BOND0: &str = r"  bonds:
    - {id: bond0, bondMode: active-backup, bondLinks: [eno2, eno3]}
";

pub(super) fn with_links(rest: &str) -> String {
    format!("{ETHERNETS}{BOND0}{rest}")
}

const DOC: &str = include_str!("../../../../docs/data-controller-render.md");

/// The fenced block following the HTML comment `<!-- marker -->` in the doc.
fn doc_block(marker: &str) -> String {
    let start = DOC
        .find(&format!("<!-- {marker} -->"))
        .unwrap_or_else(|| panic!("marker {marker} missing from the doc"));
    let rest = &DOC[start..];
    let fence = rest.find("```").unwrap();
    let body = &rest[fence..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n```").unwrap();
    format!("{}\n", &body[..end])
}

/// The doc's example renders exactly to the doc's outputs (run with `--nocapture` to see them).
#[test]
fn documented_example_renders_as_documented() {
    let spec = template(&doc_block("example-template"));
    let rendered = render(&spec, &Fixture::example().input()).unwrap();
    let meta = rendered.meta_data.unwrap();
    let net = rendered.network_data.unwrap();
    println!("---- metaData ----\n{meta}---- networkData ----\n{net}\n----");
    assert_eq!(meta, doc_block("example-meta-data"));
    assert_eq!(format!("{net}\n"), doc_block("example-network-data"));
    assert_eq!(rendered.hostname.as_deref(), Some("prod-1-cp-xyz12"));
}

#[test]
fn pools_of_collects_every_reference_once() {
    let spec = spec(
        r"
metaData:
  ipAddressesFromPool: [{key: a, name: p1}]
  prefixesFromPool: [{key: b, name: p1}]
  gatewaysFromPool: [{key: c, name: p2}]
  dnsServersFromPool: [{key: d, name: p3, kind: GlobalInClusterIPPool, apiGroup: ipam.cluster.x-k8s.io}]
networkData:
  networks:
    ipv4:
      - {id: n1, link: l, ipAddressFromPool: {name: p4}, routes: [{network: 0.0.0.0/0, gatewayFromPool: {name: p5}}]}
    ipv6:
      - {id: n2, link: l, ipAddressFromPool: {name: p6}}
    ipv4DHCP:
      - {id: n3, link: l, routes: [{network: 10.0.0.0/8, gatewayFromPool: {name: p7}}, {network: 10.1.0.0/16, gateway: 10.0.0.1}]}
    ipv6DHCP:
      - {id: n4, link: l, routes: [{network: '::/0', gatewayFromPool: {name: p8}}]}
  services: {dns: [1.1.1.1], dnsFromPool: {name: p9}}
",
    );
    let pools = pools_of(&spec);
    let mut expected: BTreeSet<PoolReference> = ["p1", "p2", "p4", "p5", "p6", "p7", "p8", "p9"]
        .into_iter()
        .map(pool)
        .collect();
    expected.insert(PoolReference {
        name: "p3".into(),
        api_group: "ipam.cluster.x-k8s.io".into(),
        kind: "GlobalInClusterIPPool".into(),
    });
    assert_eq!(pools, expected);
    assert!(
        pools_of(&MaasDataTemplateSpec {
            cluster_name: None,
            meta_data: None,
            network_data: None
        })
        .is_empty()
    );
}

#[test]
fn hostname_prefers_local_hostname_and_skips_blank_values() {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(hostname_of(&map(&[])), None);
    assert_eq!(hostname_of(&map(&[("name", "x")])), None);
    assert_eq!(
        hostname_of(&map(&[("hostname", "h")])).as_deref(),
        Some("h")
    );
    assert_eq!(
        hostname_of(&map(&[("hostname", "h"), ("local_hostname", "u")])).as_deref(),
        Some("u")
    );
    assert_eq!(
        hostname_of(&map(&[("hostname", "h"), ("local-hostname", " d ")])).as_deref(),
        Some("d")
    );
    assert_eq!(
        hostname_of(&map(&[("hostname", "h"), ("local-hostname", "  ")])).as_deref(),
        Some("h")
    );
}

#[test]
fn render_skips_absent_sections_and_reports_the_first_error() {
    let fixture = Fixture::example();
    let empty = render(&spec("{}"), &fixture.input()).unwrap();
    assert_eq!(empty, Rendered::default());
    let only_net = render(&spec("networkData: {}"), &fixture.input()).unwrap();
    assert_eq!(only_net.meta_data, None);
    assert_eq!(only_net.hostname, None);
    assert!(only_net.network_data.is_some());
    let err = render(
        &spec("metaData: {fromLabels: [{key: k, object: machine, label: nope}]}\nnetworkData: {}"),
        &fixture.input(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"spec.metaData.fromLabels[0]: Machine has no label "nope""#
    );
}

#[test]
fn object_info_comes_from_object_meta() {
    let meta = ObjectMeta {
        name: Some("m".into()),
        labels: Some(BTreeMap::from([("a".into(), "b".into())])),
        ..ObjectMeta::default()
    };
    let info = ObjectInfo::from(&meta);
    assert_eq!(info.name, "m");
    assert_eq!(info.labels["a"], "b");
    assert!(info.annotations.is_empty());
    assert_eq!(
        ObjectInfo::from(&ObjectMeta::default()),
        ObjectInfo::default()
    );
}

#[test]
fn mac_normalisation() {
    assert_eq!(
        normalize_mac("52:54:00:AA:bb:01").as_deref(),
        Some("52:54:00:aa:bb:01")
    );
    assert_eq!(
        normalize_mac("52-54-00-aa-bb-01").as_deref(),
        Some("52:54:00:aa:bb:01")
    );
    for bad in [
        "",
        "52:54:00:aa:bb",
        "52:54:00:aa:bb:01:02",
        "52:54:00:aa:bb:0g",
        "525:4:00:aa:bb:01",
        " 52:54:00:aa:bb:01",
    ] {
        assert_eq!(normalize_mac(bad), None, "{bad:?}");
    }
}

/// A template using every item kind, with the label, interface and VLAN id from the test,
/// every index at `(offset, step)` and every string `value`.
fn everything_template(
    label: &str,
    interface: &str,
    vlan_id: i32,
    (offset, step): (i32, i32),
    value: &str,
) -> MaasDataTemplateSpec {
    let mut spec = template(&doc_block("example-template"));
    let meta = spec.meta_data.get_or_insert_with(Default::default);
    meta.from_labels = Some(vec![capmaas_api::data_meta::MetaDataFromLabel {
        key: "label-value".into(),
        object: DataObject::MaasHost,
        label: label.to_owned(),
    }]);
    meta.from_host_interfaces = Some(vec![capmaas_api::data_meta::MetaDataFromHostInterface {
        key: "mac".into(),
        interface: interface.to_owned(),
    }]);
    if let Some(vlans) = spec
        .network_data
        .as_mut()
        .and_then(|n| n.links.as_mut())
        .and_then(|l| l.vlans.as_mut())
    {
        for vlan in vlans {
            vlan.vlan_id = vlan_id;
        }
    }
    if let Some(meta) = spec.meta_data.as_mut() {
        for item in meta.indexes.iter_mut().flatten() {
            item.offset = offset;
            item.step = step;
        }
        for item in meta.strings.iter_mut().flatten() {
            item.value = value.to_owned();
        }
    }
    spec
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary indexes, labels, values and names: an `Ok` or an `Err`, never a panic; the
    /// same inputs give byte-identical output; the metaData YAML reads back to the same map.
    #[test]
    fn rendering_is_total_and_deterministic(
        index in any::<i32>(),
        offset in any::<i32>(),
        step in any::<i32>(),
        labels in proptest::collection::btree_map("[a-z./-]{0,12}", any::<String>(), 0..6),
        label in "[a-z./-]{0,12}",
        interface in "eno[0-9]",
        vlan_id in -10i32..5000,
        value in any::<String>(),
    ) {
        let mut fixture = Fixture::example();
        fixture.index = index;
        if let Some(host) = fixture.host.as_mut() {
            host.labels = labels;
        }
        let spec = everything_template(&label, &interface, vlan_id, (offset, step), &value);
        let first = render(&spec, &fixture.input());
        let second = render(&spec, &fixture.input());
        prop_assert_eq!(&first, &second);
        if let Some(meta) = spec.meta_data.as_ref()
            && let Ok(map) = render_meta_data_map(meta, &fixture.input())
        {
            let yaml = meta::to_yaml(&map).unwrap();
            let back: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
            prop_assert_eq!(back, map);
        }
        if let Ok(rendered) = first {
            let net = rendered.network_data.unwrap();
            let value: serde_json::Value = serde_json::from_str(&net).unwrap();
            prop_assert!(value["links"].is_array());
        }
    }

    /// Valid inputs (index, offset, step in range; an existing label and interface; a valid
    /// VLAN id; any string value) always render, and the metaData reads back.
    #[test]
    fn valid_inputs_always_render(
        index in 0..=i32::MAX,
        offset in 0..=i32::MAX,
        step in 1..=i32::MAX,
        labels in proptest::collection::btree_map("[a-z./-]{1,12}", any::<String>(), 1..6),
        pick in any::<proptest::sample::Index>(),
        interface in "eno[1-3]",
        vlan_id in 0i32..=4094,
        value in any::<String>(),
    ) {
        let mut fixture = Fixture::example();
        fixture.index = index;
        let label = (*pick.get(&labels.keys().collect::<Vec<_>>())).clone();
        let expected = labels[&label].clone();
        if let Some(host) = fixture.host.as_mut() {
            host.labels = labels;
        }
        let spec = everything_template(&label, &interface, vlan_id, (offset, step), &value);
        let rendered = render(&spec, &fixture.input()).unwrap();
        let yaml = rendered.meta_data.unwrap();
        let back: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
        prop_assert_eq!(&back["label-value"], &expected);
        prop_assert_eq!(&back["role"], &value);
        let number = i64::from(offset) + i64::from(index) * i64::from(step);
        prop_assert_eq!(&back["slot"], &format!("slot-{number}-a"));
        let net: serde_json::Value = serde_json::from_str(&rendered.network_data.unwrap()).unwrap();
        prop_assert_eq!(&net["links"][4]["vlan_id"], &serde_json::json!(vlan_id));
    }

    /// Any string-to-string map serialises to YAML that reads back identically.
    #[test]
    fn meta_data_yaml_round_trips(map in proptest::collection::btree_map(any::<String>(), any::<String>(), 0..8)) {
        let yaml = meta::to_yaml(&map).unwrap();
        let back: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
        prop_assert_eq!(back, map);
    }
}
