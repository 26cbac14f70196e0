//! Unit tests of the network plan: a tiny in-memory MAAS applies each phase, the plan is made
//! again from the result, until it is done; crashes after any call; bad data.

use std::net::IpAddr;

use maas_api_client::{DefaultGateways, Interface, Link, LinkMode, Subnet, Vlan};
use serde_json::json;

use super::*;
use crate::host::network::{NetworkDataError, parse};

fn vlan(id: i64, vid: u32, fabric: i64) -> serde_json::Value {
    json!({"id": id, "vid": vid, "fabric": format!("fabric-{fabric}"), "fabric_id": fabric, "mtu": 1500})
}

fn subnets() -> Vec<Subnet> {
    serde_json::from_value(json!([
        {"id": 1, "cidr": "10.20.0.0/16", "vlan": vlan(5000, 0, 0), "gateway_ip": "10.20.0.1", "dns_servers": ["10.20.0.2"]},
        {"id": 2, "cidr": "10.30.0.0/16", "vlan": vlan(5001, 0, 1), "gateway_ip": "10.30.0.1"},
        {"id": 3, "cidr": "10.40.0.0/24", "vlan": vlan(5101, 100, 0), "gateway_ip": "10.40.0.1", "dns_servers": ["10.40.0.2"]},
        {"id": 4, "cidr": "10.40.0.0/16", "vlan": vlan(5000, 0, 0)},
        {"id": 5, "cidr": "fd00:20::/64", "vlan": vlan(5000, 0, 0), "gateway_ip": "fd00:20::1"}
    ]))
    .unwrap()
}

fn vlans() -> Vec<Vlan> {
    serde_json::from_value(json!([
        vlan(5000, 0, 0),
        vlan(5101, 100, 0),
        vlan(5001, 0, 1)
    ]))
    .unwrap()
}

fn interfaces() -> Vec<Interface> {
    serde_json::from_value(json!([
        {"id": 10, "name": "eth0", "type": "physical", "mac_address": "52:54:00:aa:bb:01", "vlan": vlan(5000, 0, 0),
         "effective_mtu": 1500, "links": [{"id": 100, "mode": "auto", "subnet": {"id": 1, "cidr": "10.20.0.0/16"}}]},
        {"id": 11, "name": "eth1", "type": "physical", "mac_address": "52:54:00:aa:bb:02", "vlan": vlan(5000, 0, 0),
         "effective_mtu": 1500, "links": [{"id": 101, "mode": "link_up"}]},
        {"id": 12, "name": "eth2", "type": "physical", "mac_address": "52:54:00:aa:bb:03", "vlan": vlan(5001, 0, 1),
         "effective_mtu": 1500, "links": [{"id": 102, "mode": "static", "ip_address": "10.30.0.9", "subnet": {"id": 2, "cidr": "10.30.0.0/16"}}]}
    ]))
    .unwrap()
}

const FULL: &str = r#"
links:
  - {id: enp1, type: phy, ethernet_mac_address: "52:54:00:AA:BB:01", mtu: 9000}
  - {id: enp2, type: phy, ethernet_mac_address: "52:54:00:aa:bb:02", mtu: 9000}
  - {id: bond0, type: bond, bond_links: [enp1, enp2], bond_mode: 802.3ad, mtu: "9000", ethernet_mac_address: "52:54:00:aa:bb:01"}
  - {id: vlan100, type: vlan, vlan_link: bond0, vlan_id: 100, vlan_mac_address: "52:54:00:aa:bb:01"}
  - {id: enp3, type: phy, ethernet_mac_address: "52:54:00:aa:bb:03"}
networks:
  - id: prov
    type: ipv4
    link: vlan100
    ip_address: 10.40.0.10/24
    netmask: 255.255.255.0
    routes:
      - {network: 0.0.0.0, netmask: 0.0.0.0, gateway: 10.40.0.1}
      - {network: 192.168.0.0, netmask: 255.255.0.0, gateway: 10.40.0.254}
  - {id: dhcp, type: ipv4_dhcp, link: enp3}
services:
  - {type: dns, address: 10.40.0.2}
  - {type: dns, address: 1.1.1.1}
"#;

/// An in-memory MAAS for the plan's calls, doing what MAAS does with each.
struct Fake {
    interfaces: Vec<Interface>,
    gateways: DefaultGateways,
    next: i64,
    calls: usize,
}

impl Fake {
    fn new() -> Self {
        Self {
            interfaces: interfaces(),
            gateways: DefaultGateways::default(),
            next: 1000,
            calls: 0,
        }
    }

    fn id(&mut self) -> i64 {
        self.next += 1;
        self.next
    }

    fn iface(&mut self, id: i64) -> &mut Interface {
        self.interfaces.iter_mut().find(|i| i.id == id).unwrap()
    }

    fn link_up(&mut self) -> Link {
        serde_json::from_value(json!({"id": self.id(), "mode": "link_up"})).unwrap()
    }

    fn plan(&self, data: &str) -> Result<NetworkPlan, NetworkDataError> {
        let (subnets, vlans) = (subnets(), vlans());
        let view = MaasNetwork {
            interfaces: &self.interfaces,
            subnets: &subnets,
            vlans: &vlans,
            gateways: &self.gateways,
        };
        plan_network(&parse(data).unwrap(), &view)
    }

    fn add_link(&mut self, interface: i64, mode: &str, subnet: Option<i64>, ip: Option<IpAddr>) {
        let subnet = subnet.map(|id| subnets().into_iter().find(|s| s.id == id).unwrap());
        let link: Link = serde_json::from_value(
            json!({"id": self.id(), "mode": mode, "subnet": subnet, "ip_address": ip}),
        )
        .unwrap();
        let iface = self.iface(interface);
        iface.links.retain(|l| l.mode != LinkMode::LinkUp);
        iface.links.push(link);
    }

    fn apply(&mut self, action: &NetAction) {
        self.calls += 1;
        match action.clone() {
            NetAction::DeleteInterface {
                interface, name, ..
            } => {
                let gone = self
                    .interfaces
                    .iter()
                    .find(|i| i.id == interface)
                    .unwrap()
                    .clone();
                self.interfaces
                    .retain(|i| i.id != interface && !i.parents.contains(&name));
                for parent in gone.parents {
                    let up = self.link_up();
                    let p = self
                        .interfaces
                        .iter_mut()
                        .find(|i| i.name == parent)
                        .unwrap();
                    p.children.retain(|c| *c != name);
                    p.links = vec![up];
                }
            }
            NetAction::CreateBond {
                name,
                parents,
                mode,
                mtu,
                ..
            } => {
                let members: Vec<String> = parents
                    .iter()
                    .map(|p| self.iface(*p).name.clone())
                    .collect();
                let first = self.iface(parents[0]).clone();
                for p in &parents {
                    let m = self.iface(*p);
                    m.links.clear();
                    m.children.push(name.clone());
                }
                let bond: Interface = serde_json::from_value(json!({
                    "id": self.id(), "name": name, "type": "bond", "mac_address": first.mac_address,
                    "vlan": first.vlan, "parents": members, "links": [{"id": self.id(), "mode": "link_up"}],
                    "params": {"bond_mode": mode.as_str(), "mtu": mtu}, "effective_mtu": mtu.unwrap_or(1500)
                }))
                .unwrap();
                self.interfaces.push(bond);
            }
            NetAction::CreateVlan {
                parent, vlan, mtu, ..
            } => {
                let v = vlans().into_iter().find(|v| v.id == vlan).unwrap();
                let p = self.iface(parent).clone();
                let name = format!("{}.{}", p.name, v.vid);
                self.iface(parent).children.push(name.clone());
                let iface: Interface = serde_json::from_value(json!({
                    "id": self.id(), "name": name, "type": "vlan", "mac_address": p.mac_address, "vlan": v,
                    "parents": [p.name], "links": [{"id": self.id(), "mode": "link_up"}], "params": {"mtu": mtu}
                }))
                .unwrap();
                self.interfaces.push(iface);
            }
            NetAction::UpdateInterface {
                interface,
                mtu,
                bond_mode,
                ..
            } => {
                let i = self.iface(interface);
                if mtu.is_some() {
                    i.params.mtu = mtu;
                }
                if let Some(mode) = bond_mode {
                    i.params.bond_mode = Some(mode.as_str().to_owned());
                }
            }
            NetAction::Unlink { interface, link } => {
                let i = self.iface(interface);
                let before = i.links.len();
                i.links.retain(|l| l.id != link);
                assert_eq!(i.links.len() + 1, before, "unlink of a missing link {link}");
            }
            NetAction::LinkStatic {
                interface,
                subnet,
                ip,
                ..
            } => {
                let held = self
                    .interfaces
                    .iter()
                    .any(|i| i.links.iter().any(|l| l.ip_address == Some(ip)));
                assert!(!held, "{ip} is already in use");
                self.add_link(interface, "static", Some(subnet), Some(ip));
            }
            NetAction::LinkDhcp {
                interface, subnet, ..
            } => self.add_link(interface, "dhcp", subnet, None),
            NetAction::SetDefaultGateway {
                interface, link, ..
            } => {
                // MAAS sets the default of the link's family.
                let v4 = self
                    .iface(interface)
                    .links
                    .iter()
                    .find(|l| l.id == link)
                    .and_then(|l| l.subnet.as_ref())
                    .is_some_and(|s| s.cidr.addr().is_ipv4());
                if v4 {
                    self.gateways.ipv4.link_id = Some(link);
                } else {
                    self.gateways.ipv6.link_id = Some(link);
                }
            }
        }
    }

    /// Plans and applies phases until done (applying only `per_round` calls of each plan, as
    /// if the gateway crashed after them); the number of plans made.
    fn converge(&mut self, data: &str, per_round: usize) -> usize {
        for round in 1..=40 {
            let plan = self.plan(data).unwrap();
            if plan.is_done() {
                return round;
            }
            assert!(!plan.actions.is_empty(), "stuck: {plan:?}");
            for action in plan.actions.iter().take(per_round) {
                self.apply(action);
            }
        }
        panic!("no convergence");
    }

    fn by_name(&self, name: &str) -> &Interface {
        self.interfaces.iter().find(|i| i.name == name).unwrap()
    }
}

#[test]
fn full_network_data_converges_in_phases() {
    let mut maas = Fake::new();
    let first = maas.plan(FULL).unwrap();
    assert_eq!(
        first.actions,
        vec![NetAction::CreateBond {
            link: "bond0".into(),
            name: "bond0".into(),
            parents: vec![10, 11],
            mac_address: Some("52:54:00:aa:bb:01".into()),
            mode: BondMode::Lacp,
            mtu: Some(9000),
        }],
        "first the bond, nothing else"
    );
    assert!(first.more);
    assert_eq!(first.notes.len(), 2, "{:?}", first.notes);
    assert!(first.notes.iter().any(|n| n.contains("1.1.1.1")));
    assert!(first.notes.iter().any(|n| n.contains("192.168.0.0")));
    let rounds = maas.converge(FULL, usize::MAX);
    assert_eq!(
        rounds, 5,
        "bond, VLAN interface, MTU and links, gateway, done"
    );
    let bond = maas.by_name("bond0");
    assert_eq!(
        (bond.parents.clone(), bond.params.bond_mode.as_deref()),
        (vec!["eth0".to_owned(), "eth1".to_owned()], Some("802.3ad"))
    );
    let vif = maas.by_name("bond0.100");
    let link = vif
        .links
        .iter()
        .find(|l| l.mode == LinkMode::Static)
        .unwrap();
    assert_eq!(
        (link.ip_address, link.subnet.as_ref().map(|s| s.id)),
        (Some("10.40.0.10".parse().unwrap()), Some(3))
    );
    assert_eq!(maas.gateways.ipv4.link_id, Some(link.id));
    assert_eq!(maas.by_name("eth0").params.mtu, Some(9000));
    let eth2 = maas.by_name("eth2");
    assert_eq!(eth2.links.len(), 1);
    assert_eq!(
        (
            eth2.links[0].mode.clone(),
            eth2.links[0].subnet.as_ref().map(|s| s.id)
        ),
        (LinkMode::Dhcp, Some(2)),
        "its static link replaced"
    );
    // Idempotent: the finished machine needs nothing.
    assert!(maas.plan(FULL).unwrap().is_done());
}

#[test]
fn a_crash_after_any_call_only_leaves_the_rest() {
    let mut done = Fake::new();
    done.converge(FULL, usize::MAX);
    let mut crashing = Fake::new();
    crashing.converge(FULL, 1);
    assert_eq!(crashing.calls, done.calls, "no call repeated or wasted");
    let names = |m: &Fake| {
        m.interfaces
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    i.links
                        .iter()
                        .map(|l| (l.mode.clone(), l.ip_address))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&crashing), names(&done));
}

#[test]
fn phy_only_data_keeps_working_as_before() {
    let data = r#"
links:
  - {id: enp1, type: phy, ethernet_mac_address: "52:54:00:AA:BB:01"}
  - {id: enp2, ethernet_mac_address: "52:54:00:aa:bb:03"}
networks:
  - {id: n1, type: ipv4, link: enp1, ip_address: 10.20.5.50, netmask: 255.255.0.0}
  - {id: n2, type: ipv4, link: enp2, ip_address: 10.30.0.9/16}
"#;
    let maas = Fake::new();
    assert_eq!(
        maas.plan(data).unwrap().actions,
        vec![
            NetAction::Unlink {
                interface: 10,
                link: 100
            },
            NetAction::LinkStatic {
                network: "n1".into(),
                interface: 10,
                subnet: 1,
                ip: "10.20.5.50".parse().unwrap()
            },
        ],
        "eth2 already holds its address"
    );
}

#[test]
fn bonds_in_the_way_are_removed_first() {
    let mut maas = Fake::new();
    maas.converge(FULL, usize::MAX);
    // Other data: eth0 alone with a static address, eth1 in a new bond with eth2... here just
    // eth0 and eth1 as plain NICs: the bond (and its VLAN interface) go.
    let nics_only = r#"
links:
  - {id: a, type: phy, ethernet_mac_address: "52:54:00:aa:bb:01"}
  - {id: b, type: phy, ethernet_mac_address: "52:54:00:aa:bb:02"}
networks:
  - {id: n1, type: ipv4, link: a, ip_address: 10.20.5.51}
"#;
    let plan = maas.plan(nics_only).unwrap();
    assert!(
        matches!(&plan.actions[..], [NetAction::DeleteInterface { name, .. }] if name == "bond0"),
        "{plan:?}"
    );
    maas.converge(nics_only, usize::MAX);
    assert!(maas.interfaces.iter().all(|i| i.name.starts_with("eth")));
    assert!(
        maas.by_name("eth0")
            .links
            .iter()
            .any(|l| l.ip_address == Some("10.20.5.51".parse().unwrap()))
    );
}

#[test]
fn errors_name_the_link_or_network() {
    let maas = Fake::new();
    let err = |data: &str| maas.plan(data).unwrap_err().to_string();
    let e = err("networks: [{id: n1, type: ipv4, link: x, ip_address: 10.20.0.5}]");
    assert!(e.contains("network n1") && e.contains("\"x\""), "{e}");
    let e = err("links: [{id: a, type: phy, ethernet_mac_address: 'ff:ff:ff:ff:ff:ff'}]");
    assert!(
        e.contains("link a") && e.contains("ff:ff:ff:ff:ff:ff"),
        "{e}"
    );
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{id: n2, type: ipv4, link: a, ip_address: 192.168.1.1}]",
    );
    assert!(
        e.contains("network n2") && e.contains("no MAAS subnet contains 192.168.1.1"),
        "{e}"
    );
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{id: n3, type: ipv4, link: a, ip_address: nope}]",
    );
    assert!(e.contains("network n3") && e.contains("not an IP"), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{id: n4, type: ipv4, link: a, ip_address: 10.40.0.7}]",
    );
    assert!(e.contains("network n4") && e.contains("VLAN 100"), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}, {id: v, type: vlan, vlan_link: a, vlan_id: 300}]",
    );
    assert!(e.contains("link v") && e.contains("no VLAN 300"), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}, {id: b, type: bond, bond_links: [a], bond_mode: lacp}]",
    );
    assert!(e.contains("link b") && e.contains("lacp"), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}, {id: b, type: bond, bond_links: [a, c]}]",
    );
    assert!(e.contains("link b") && e.contains("\"c\""), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}, {id: b, type: bond, bond_links: [a]}]\nnetworks: [{id: n5, type: ipv4_dhcp, link: a}]",
    );
    assert!(
        e.contains("network n5") && e.contains("member of bond b"),
        "{e}"
    );
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{id: n6, type: ipv4, link: a, ip_address: 10.20.0.5, routes: [{network: 0.0.0.0, netmask: 0.0.0.0, gateway: 10.20.0.254}]}]",
    );
    assert!(e.contains("network n6") && e.contains("10.20.0.1"), "{e}");
    let e = err(
        "links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}, {id: b, type: bond, bond_links: [a, c]}, {id: c, ethernet_mac_address: '52:54:00:aa:bb:03'}]",
    );
    assert!(
        e.contains("link b") && e.contains("different MAAS VLANs"),
        "{e}"
    );
    assert!(matches!(parse("links: 5"), Err(NetworkDataError::Parse(_))));
    assert!(parse("links: [{id: a, mtu: lots}]").is_err());
}

#[test]
fn default_routes_are_recognised() {
    use crate::host::network::RenderedRoute;
    let route = |network: &str, netmask: &str| RenderedRoute {
        network: network.into(),
        netmask: netmask.into(),
        gateway: "g".into(),
    };
    assert!(route("0.0.0.0", "0.0.0.0").is_default());
    assert!(route("0.0.0.0/0", "").is_default());
    assert!(route("::", "::").is_default());
    assert!(route("::/0", "").is_default());
    assert!(!route("10.0.0.0", "255.0.0.0").is_default());
    assert!(!route("0.0.0.0", "255.0.0.0").is_default());
}

#[path = "plan_dual_tests.rs"]
mod dual_stack;
