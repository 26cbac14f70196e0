//! networkData: networks, routes, services, every error, and the gateway's parser shape.

use serde::Deserialize;
use serde_json::{Value, json};

use super::super::tests::{Fixture, err_with, ip, net, ok, pool, with_links};
use super::*;

#[test]
fn empty_network_data_has_every_list() {
    assert_eq!(
        ok("{}"),
        json!({"links": [], "networks": [], "services": []})
    );
}

#[test]
fn static_and_dhcp_networks() {
    let doc = ok(&with_links(
        r"
networks:
  ipv4:
    - id: prov
      link: eno1
      ipAddressFromPool: {name: provisioning}
      routes:
        - {network: 0.0.0.0/0, gatewayFromPool: {name: provisioning}}
        - {network: 172.16.5.9/12, gateway: 10.20.0.254}
  ipv6:
    - {id: pub, link: bond0, ipAddressFromPool: {name: public-v6}, routes: [{network: '2001:db8:ff::/48', gateway: 'fe80::1'}]}
  ipv4DHCP:
    - {id: d4, link: bond0}
  ipv6DHCP:
    - {id: d6, link: eno1, routes: [{network: '::/0', gatewayFromPool: {name: public-v6}}]}
",
    ));
    assert_eq!(
        doc["networks"],
        json!([
            {"id": "prov", "type": "ipv4", "link": "eno1", "ip_address": "10.20.0.23",
             "netmask": "255.255.255.0", "routes": [
                {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.20.0.1"},
                {"network": "172.16.0.0", "netmask": "255.240.0.0", "gateway": "10.20.0.254"},
             ]},
            {"id": "pub", "type": "ipv6", "link": "bond0", "ip_address": "2001:db8:0:10::23",
             "netmask": "ffff:ffff:ffff:ffff::", "routes": [
                {"network": "2001:db8:ff::", "netmask": "ffff:ffff:ffff::", "gateway": "fe80::1"},
             ]},
            {"id": "d4", "type": "ipv4_dhcp", "link": "bond0", "routes": []},
            {"id": "d6", "type": "ipv6_dhcp", "link": "eno1", "routes": [
                {"network": "::", "netmask": "::", "gateway": "2001:db8:0:10::1"},
            ]},
        ])
    );
}

#[test]
fn netmasks_cover_every_prefix() {
    let v4 = pool("v4");
    for prefix in 0..=32u8 {
        let mask = static_netmask(&v4, ip("10.0.0.1"), prefix, IpFamily::V4).unwrap();
        let bits: std::net::Ipv4Addr = mask.parse().unwrap();
        assert_eq!(u32::from(bits).count_ones(), u32::from(prefix));
    }
    let v6 = pool("v6");
    for prefix in 0..=128u8 {
        let mask = static_netmask(&v6, ip("2001:db8::1"), prefix, IpFamily::V6).unwrap();
        let bits: std::net::Ipv6Addr = mask.parse().unwrap();
        assert_eq!(u128::from(bits).count_ones(), u32::from(prefix));
    }
    assert_eq!(
        static_netmask(&v6, ip("2001:db8::1"), 56, IpFamily::V6).unwrap(),
        "ffff:ffff:ffff:ff00::"
    );
}

#[test]
fn network_errors() {
    let fixture = Fixture::with_bare_pool(33);
    let cases = [
        (
            "networks: {ipv4: [{id: n, link: eno1, ipAddressFromPool: {name: foo}}]}",
            "spec.networkData.networks.ipv4[0].ipAddressFromPool: no address allocated from pool MaasIPPool/foo",
        ),
        (
            "networks: {ipv4: [{id: n, link: eno1, ipAddressFromPool: {name: public-v6}}]}",
            "spec.networkData.networks.ipv4[0].ipAddressFromPool: pool MaasIPPool/public-v6 gives 2001:db8:0:10::23, not an IPv4 address",
        ),
        (
            "networks: {ipv6: [{id: n, link: eno1, ipAddressFromPool: {name: provisioning}}]}",
            "spec.networkData.networks.ipv6[0].ipAddressFromPool: pool MaasIPPool/provisioning gives 10.20.0.23, not an IPv6 address",
        ),
        (
            "networks: {ipv4: [{id: n, link: eno1, ipAddressFromPool: {name: bare}}]}",
            "spec.networkData.networks.ipv4[0].ipAddressFromPool: pool MaasIPPool/bare gives prefix length 33, more than 32",
        ),
        (
            "networks: {ipv4: [{id: n, link: eno7, ipAddressFromPool: {name: provisioning}}]}",
            r#"spec.networkData.networks.ipv4[0].link: no link with id "eno7""#,
        ),
        (
            "networks: {ipv4: [{id: n, link: eno2, ipAddressFromPool: {name: provisioning}}]}",
            r#"spec.networkData.networks.ipv4[0].link: link "eno2" is a member of bond "bond0": put VLANs and addresses on the bond"#,
        ),
        (
            "networks: {ipv6DHCP: [{id: n, link: eno3}]}",
            r#"spec.networkData.networks.ipv6DHCP[0].link: link "eno3" is a member of bond "bond0": put VLANs and addresses on the bond"#,
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: bond1}]}",
            r#"spec.networkData.networks.ipv4DHCP[0].link: no link with id "bond1""#,
        ),
        (
            "networks: {ipv4: [{id: n, link: eno1, ipAddressFromPool: {name: provisioning}}], ipv6DHCP: [{id: n, link: eno1}]}",
            r#"spec.networkData.networks.ipv6DHCP[0].id: id "n" is already used by spec.networkData.networks.ipv4[0]"#,
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0, gateway: 10.0.0.1}]}]}",
            r#"spec.networkData.networks.ipv4DHCP[0].routes[0].network: "10.0.0.0" is not a CIDR"#,
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: '::/0', gateway: 10.0.0.1}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0].network: ::/0 is not an IPv4 address or network",
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8, gateway: 'fe80::1'}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0].gateway: fe80::1 is not an IPv4 address or network",
        ),
        (
            "networks: {ipv6DHCP: [{id: n, link: eno1, routes: [{network: '::/0', gatewayFromPool: {name: provisioning}}]}]}",
            "spec.networkData.networks.ipv6DHCP[0].routes[0].gatewayFromPool: 10.20.0.1 is not an IPv6 address or network",
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8, gateway: gw}]}]}",
            r#"spec.networkData.networks.ipv4DHCP[0].routes[0].gateway: "gw" is not an IP address"#,
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8, gatewayFromPool: {name: bare}}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0].gatewayFromPool: pool MaasIPPool/bare gives no gateway",
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8, gatewayFromPool: {name: nope}}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0].gatewayFromPool: no address allocated from pool MaasIPPool/nope",
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0]: exactly one of gateway or gatewayFromPool must be set",
        ),
        (
            "networks: {ipv4DHCP: [{id: n, link: eno1, routes: [{network: 10.0.0.0/8, gateway: 10.0.0.1, gatewayFromPool: {name: provisioning}}]}]}",
            "spec.networkData.networks.ipv4DHCP[0].routes[0]: exactly one of gateway or gatewayFromPool must be set",
        ),
    ];
    for (yaml, expected) in cases {
        assert_eq!(err_with(&with_links(yaml), &fixture), expected, "{yaml}");
    }
}

#[test]
fn services_dedupe_in_order() {
    let doc = ok(
        "services: {dns: ['10.20.0.3', '1.1.1.1', '1.1.1.1', '2001:db8::53'], dnsFromPool: {name: provisioning}}",
    );
    assert_eq!(
        doc["services"],
        json!([
            {"type": "dns", "address": "10.20.0.3"},
            {"type": "dns", "address": "1.1.1.1"},
            {"type": "dns", "address": "2001:db8::53"},
            {"type": "dns", "address": "10.20.0.2"},
        ])
    );
    let only_pool = ok("services: {dnsFromPool: {name: public-v6}}");
    assert_eq!(
        only_pool["services"],
        json!([{"type": "dns", "address": "2001:db8::53"}])
    );
    assert_eq!(ok("services: {}")["services"], json!([]));
}

#[test]
fn service_errors() {
    let fixture = Fixture::with_bare_pool(22);
    for (template, message) in [
        (
            "services: {dns: ['1.1.1.1', 'dns.example.com']}",
            r#"spec.networkData.services.dns[1]: "dns.example.com" is not an IP address"#,
        ),
        (
            "services: {dnsFromPool: {name: bare}}",
            "spec.networkData.services.dnsFromPool: pool MaasIPPool/bare gives no DNS servers",
        ),
        (
            "services: {dnsFromPool: {name: gone}}",
            "spec.networkData.services.dnsFromPool: no address allocated from pool MaasIPPool/gone",
        ),
    ] {
        assert_eq!(err_with(template, &fixture), message, "{template}");
    }
}

/// The shape `maas-client`'s `host::network::parse` reads (re-declared: this crate cannot
/// depend on maas-client), parsed the same way (`serde_saphyr::from_str`).
#[derive(Debug, Deserialize)]
struct GatewayView {
    #[serde(default)]
    links: Vec<GatewayLink>,
    #[serde(default)]
    networks: Vec<GatewayNetwork>,
}

#[derive(Debug, Deserialize)]
struct GatewayLink {
    id: String,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    ethernet_mac_address: Option<String>,
}

#[derive(Debug, Deserialize)]
struct GatewayNetwork {
    #[serde(rename = "type")]
    kind: String,
    link: String,
    #[serde(default)]
    ip_address: Option<String>,
}

#[test]
fn the_gateway_parser_reads_the_rendered_document() {
    let text = render_network_data(
        &net(&with_links(
            r"
  vlans: [{id: bond0.10, vlanID: 10, vlanLink: bond0}]
networks:
  ipv4: [{id: prov, link: eno1, ipAddressFromPool: {name: provisioning}}]
  ipv6: [{id: pub, link: eno1, ipAddressFromPool: {name: public-v6}}]
  ipv4DHCP: [{id: d, link: bond0.10}]
services: {dnsFromPool: {name: provisioning}}
",
        )),
        &Fixture::example().input(),
    )
    .unwrap();
    let view: GatewayView = serde_saphyr::from_str(&text).unwrap();
    let kinds: Vec<&str> = view.links.iter().map(|l| l.kind.as_str()).collect();
    assert_eq!(kinds, ["phy", "phy", "phy", "bond", "vlan"]);
    let statics: Vec<(&str, Option<&str>, Option<&str>)> = view
        .networks
        .iter()
        .filter(|n| n.kind == "ipv4" || n.kind == "ipv6")
        .map(|n| {
            let mac = view
                .links
                .iter()
                .find(|l| l.id == n.link)
                .and_then(|l| l.ethernet_mac_address.as_deref());
            (n.kind.as_str(), n.ip_address.as_deref(), mac)
        })
        .collect();
    assert_eq!(
        statics,
        [
            ("ipv4", Some("10.20.0.23"), Some("52:54:00:aa:bb:01")),
            ("ipv6", Some("2001:db8:0:10::23"), Some("52:54:00:aa:bb:01")),
        ]
    );
    let dhcp = view
        .networks
        .iter()
        .find(|n| n.kind == "ipv4_dhcp")
        .unwrap();
    assert_eq!(
        (dhcp.link.as_str(), dhcp.ip_address.as_deref()),
        ("bond0.10", None)
    );
    // JSON readers agree with the YAML reader.
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["networks"][0]["ip_address"], "10.20.0.23");
}

#[test]
fn rendering_is_byte_identical_across_runs() {
    let yaml = with_links(
        "networks: {ipv4: [{id: p, link: bond0, ipAddressFromPool: {name: provisioning}}]}\nservices: {dns: ['9.9.9.9']}",
    );
    let fixture = Fixture::example();
    let first = render_network_data(&net(&yaml), &fixture.input()).unwrap();
    for _ in 0..3 {
        assert_eq!(
            render_network_data(&net(&yaml), &fixture.input()).unwrap(),
            first
        );
    }
}
