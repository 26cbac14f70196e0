//! The network plan of a dual-stack interface (an IPv4 and an IPv6 static address).

use super::*;

/// A dual-stack interface: an IPv4 and an IPv6 static address on one link, each family with
/// its default route (data-controller renders `networks.ipv4` and `networks.ipv6` this way).
const DUAL_STACK: &str = r#"
links:
  - {id: eth0, type: phy, ethernet_mac_address: "52:54:00:aa:bb:01"}
networks:
  - id: v4
    type: ipv4
    link: eth0
    ip_address: 10.20.200.10
    netmask: 255.255.0.0
    routes:
      - {network: 0.0.0.0, netmask: 0.0.0.0, gateway: 10.20.0.1}
  - id: v6
    type: ipv6
    link: eth0
    ip_address: fd00:20::10/64
    routes:
      - {network: "::", netmask: "::", gateway: "fd00:20::1"}
"#;

#[test]
fn dual_stack_links_both_static_addresses_and_both_default_gateways() {
    let mut maas = Fake::new();
    maas.converge(DUAL_STACK, usize::MAX);
    let eth0 = maas.by_name("eth0");
    let statics: Vec<(Option<IpAddr>, Option<i64>)> = eth0
        .links
        .iter()
        .filter(|l| l.mode == LinkMode::Static)
        .map(|l| (l.ip_address, l.subnet.as_ref().map(|s| s.id)))
        .collect();
    assert_eq!(
        statics,
        vec![
            (Some("10.20.200.10".parse().unwrap()), Some(1)),
            (Some("fd00:20::10".parse().unwrap()), Some(5))
        ],
        "{:?}",
        eth0.links
    );
    assert!(
        eth0.links.iter().all(|l| l.mode == LinkMode::Static),
        "the auto link of the commissioning is replaced: {:?}",
        eth0.links
    );
    let link_of = |ip: &str| {
        let ip: IpAddr = ip.parse().unwrap();
        eth0.links
            .iter()
            .find(|l| l.ip_address == Some(ip))
            .map(|l| l.id)
    };
    assert_eq!(maas.gateways.ipv4.link_id, link_of("10.20.200.10"));
    assert_eq!(maas.gateways.ipv6.link_id, link_of("fd00:20::10"));
    assert!(maas.plan(DUAL_STACK).unwrap().is_done());
}
