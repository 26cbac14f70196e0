//! Template structure checks: every problem once, all problems of a template, valid input clean.
//! (data-controller's render tests check the renderer reports the first one, in its words.)

use super::*;

fn net(yaml: &str) -> NetworkData {
    serde_saphyr::from_str(yaml).unwrap()
}

fn meta(yaml: &str) -> MetaData {
    serde_saphyr::from_str(yaml).unwrap()
}

fn texts(issues: &[TemplateIssue]) -> Vec<String> {
    issues.iter().map(ToString::to_string).collect()
}

const LINKS: &str = r"
links:
  ethernets:
    - {id: eno1, macAddress: {fromHostInterface: eno1}}
    - {id: eno2, macAddress: {fromHostInterface: eno2}}
    - {id: eno3, macAddress: {fromHostInterface: eno3}}
  bonds:
    - {id: bond0, bondMode: 802.3ad, bondLinks: [eno2, eno3]}
  vlans:
    - {id: bond0.7, vlanID: 7, vlanLink: bond0}
";

#[test]
fn a_sound_template_has_no_issues() {
    let yaml = format!(
        "{LINKS}networks:
  ipv4: [{{id: a, link: eno1, ipAddressFromPool: {{name: p}}, routes: [{{network: 0.0.0.0/0, gateway: 10.0.0.1}}]}}]
  ipv6: [{{id: b, link: bond0, ipAddressFromPool: {{name: q}}, routes: [{{network: '::/0', gatewayFromPool: {{name: q}}}}]}}]
  ipv4DHCP: [{{id: c, link: bond0.7}}]
  ipv6DHCP: [{{id: d, link: bond0.7, routes: [{{network: 'fd00::/8', gateway: 'fe80::1'}}]}}]
"
    );
    assert_eq!(
        texts(&network_data_issues(&net(&yaml))),
        Vec::<String>::new()
    );
    let spec = MaasDataTemplateSpec {
        cluster_name: None,
        meta_data: Some(meta(
            "strings: [{key: a, value: x}]\nindexes: [{key: b}]\nfromLabels: [{key: c, object: machine, label: l}]",
        )),
        network_data: Some(net(&yaml)),
    };
    assert!(template_issues(&spec).is_empty());
}

#[test]
fn every_link_problem_is_reported_not_just_the_first() {
    let yaml = r"
links:
  ethernets:
    - {id: e1, macAddress: {fromHostInterface: eno1}}
    - {id: e1, macAddress: {fromHostInterface: eno2}}
    - {id: e2, macAddress: {fromHostInterface: eno2}}
  bonds:
    - {id: b, bondMode: broadcast, bondLinks: [e2, e9, e2]}
    - {id: c, bondMode: broadcast, bondLinks: [b]}
  vlans:
    - {id: v, vlanID: 5, vlanLink: e2}
    - {id: w, vlanID: 5, vlanLink: b}
    - {id: x, vlanID: 5, vlanLink: b}
    - {id: y, vlanID: 6, vlanLink: v}
    - {id: y, vlanID: 7, vlanLink: nope}
";
    assert_eq!(
        texts(&network_data_issues(&net(yaml))),
        [
            r#"spec.networkData.links.ethernets[1].id: id "e1" is already used by spec.networkData.links.ethernets[0]"#,
            r#"spec.networkData.links.bonds[0].bondLinks[1]: no ethernet link with id "e9""#,
            r#"spec.networkData.links.bonds[0].bondLinks[2]: link "e2" is already a member of the bond at spec.networkData.links.bonds[0].bondLinks[0]"#,
            r#"spec.networkData.links.bonds[1].bondLinks[0]: no ethernet link with id "b""#,
            r#"spec.networkData.links.vlans[0].vlanLink: link "e2" is a member of bond "b": put VLANs and addresses on the bond"#,
            r#"spec.networkData.links.vlans[2].vlanID: VLAN 5 on "b" is already defined by spec.networkData.links.vlans[1]"#,
            r#"spec.networkData.links.vlans[3].vlanLink: no ethernet or bond link with id "v""#,
            r#"spec.networkData.links.vlans[4].vlanLink: no ethernet or bond link with id "nope""#,
            r#"spec.networkData.links.vlans[4].id: id "y" is already used by spec.networkData.links.vlans[3]"#,
        ]
    );
}

#[test]
fn network_ids_links_and_route_families() {
    let yaml = format!(
        "{LINKS}networks:
  ipv4: [{{id: n, link: eno2, ipAddressFromPool: {{name: p}}, routes: [{{network: '::/0', gateway: 'fe80::1'}}, {{network: 10.0.0.0/8, gatewayFromPool: {{name: p}}}}]}}]
  ipv6: [{{id: m, link: eth9, ipAddressFromPool: {{name: q}}, routes: [{{network: 10.0.0.0/99, gateway: ' 10.0.0.1 '}}]}}]
  ipv6DHCP: [{{id: n, link: bond0, routes: [{{network: '2001:db8::/32', gateway: 'not-an-ip'}}, {{network: 10.0.0.0, gateway: '::1'}}]}}]
"
    );
    assert_eq!(
        texts(&network_data_issues(&net(&yaml))),
        [
            r#"spec.networkData.networks.ipv4[0].link: link "eno2" is a member of bond "bond0": put VLANs and addresses on the bond"#,
            "spec.networkData.networks.ipv4[0].routes[0].network: ::/0 is not an IPv4 address or network",
            "spec.networkData.networks.ipv4[0].routes[0].gateway: fe80::1 is not an IPv4 address or network",
            r#"spec.networkData.networks.ipv6[0].link: no link with id "eth9""#,
            "spec.networkData.networks.ipv6[0].routes[0].gateway: 10.0.0.1 is not an IPv6 address or network",
            r#"spec.networkData.networks.ipv6DHCP[0].id: id "n" is already used by spec.networkData.networks.ipv4[0]"#,
        ],
        "a malformed CIDR or IP is the schema's to report, not a family mismatch"
    );
}

#[test]
fn metadata_keys_are_unique_across_lists() {
    let yaml = r"
strings: [{key: a, value: x}, {key: hostname, value: y}]
objectNames: [{key: hostname, object: maasmachine}]
namespaces: [{key: ns}]
ipAddressesFromPool: [{key: a, name: p}]
fromAnnotations: [{key: ns, object: maashost, annotation: x}]
";
    assert_eq!(
        texts(&meta_data_issues(&meta(yaml))),
        [
            r#"spec.metaData.objectNames[0]: key "hostname" is already set by spec.metaData.strings[1]"#,
            r#"spec.metaData.ipAddressesFromPool[0]: key "a" is already set by spec.metaData.strings[0]"#,
            r#"spec.metaData.fromAnnotations[0]: key "ns" is already set by spec.metaData.namespaces[0]"#,
        ]
    );
}

#[test]
fn cidrs_parse_as_ipnet_does() {
    assert_eq!(
        cidr_address("10.0.0.0/8"),
        Some("10.0.0.0".parse().unwrap())
    );
    assert_eq!(cidr_address(" ::/0 "), Some("::".parse().unwrap()));
    assert_eq!(cidr_address("10.0.0.0/33"), None);
    assert_eq!(cidr_address("::/129"), None);
    assert_eq!(cidr_address("10.0.0.0"), None);
    assert_eq!(cidr_address("x/8"), None);
}

#[test]
fn data_names_are_template_dash_index() {
    assert_eq!(maas_data_name("prod-data", 0), "prod-data-0");
    assert_eq!(maas_data_name("t", 17), "t-17");
}
