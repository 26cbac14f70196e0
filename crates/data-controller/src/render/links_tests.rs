//! networkData links: ethernets, bonds, VLANs and their errors.

use serde_json::json;

use super::super::tests::{ETHERNETS, Fixture, err, err_with, ok, with_links};
use super::*;

#[test]
fn ethernet_links() {
    let doc = ok(r"
links:
  ethernets:
    - {id: a, macAddress: {fromHostInterface: eno1}}
    - {id: b, type: bridge, mtu: 9000, macAddress: {string: 'AA-BB-CC-DD-EE-FF'}}
");
    assert_eq!(
        doc["links"],
        json!([
            {"id": "a", "type": "phy", "ethernet_mac_address": "52:54:00:aa:bb:01", "mtu": 1500},
            {"id": "b", "type": "bridge", "ethernet_mac_address": "aa:bb:cc:dd:ee:ff", "mtu": 9000},
        ])
    );
}

#[test]
fn every_ethernet_type_has_its_openstack_name() {
    for (kind, name) in [
        (EthernetType::Phy, "phy"),
        (EthernetType::Bridge, "bridge"),
        (EthernetType::Dvs, "dvs"),
        (EthernetType::HwVeb, "hw_veb"),
        (EthernetType::Hyperv, "hyperv"),
        (EthernetType::Ovs, "ovs"),
        (EthernetType::Tap, "tap"),
        (EthernetType::Vhostuser, "vhostuser"),
        (EthernetType::Vif, "vif"),
    ] {
        assert_eq!(ethernet_type(kind), name);
        // The API's serde name is the same string.
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(name));
    }
}

#[test]
fn bonds_take_the_first_member_mac_unless_set() {
    let bonds = r"  bonds:
    - {id: bond0, mtu: 9000, bondMode: 802.3ad, bondLinks: [eno3, eno2]}
    - {id: bond1, bondMode: balance-rr, bondLinks: [eno1], macAddress: {string: '02:00:00:00:00:01'}}
";
    let doc = ok(&format!("{ETHERNETS}{bonds}"));
    assert_eq!(
        doc["links"][3],
        json!({"id": "bond0", "type": "bond", "ethernet_mac_address": "52:54:00:aa:bb:03",
               "mtu": 9000, "bond_mode": "802.3ad", "bond_links": ["eno3", "eno2"]})
    );
    assert_eq!(doc["links"][4]["ethernet_mac_address"], "02:00:00:00:00:01");
    assert_eq!(doc["links"][4]["bond_mode"], "balance-rr");
}

#[test]
fn bond_modes_have_metal3_names() {
    for (mode, name) in [
        ("balance-rr", "balance-rr"),
        ("active-backup", "active-backup"),
        ("balance-xor", "balance-xor"),
        ("broadcast", "broadcast"),
        ("802.3ad", "802.3ad"),
        ("balance-tlb", "balance-tlb"),
        ("balance-alb", "balance-alb"),
    ] {
        let doc = ok(&format!(
            "links: {{ethernets: [{{id: e, macAddress: {{fromHostInterface: eno1}}}}], bonds: [{{id: b, bondMode: '{mode}', bondLinks: [e]}}]}}"
        ));
        assert_eq!(doc["links"][1]["bond_mode"], name);
    }
}

#[test]
fn vlans_take_the_parent_mac_unless_set() {
    let doc = ok(&with_links(
        r"
  vlans:
    - {id: bond0.100, vlanID: 100, vlanLink: bond0}
    - {id: eno1.5, mtu: 1400, vlanID: 5, vlanLink: eno1, macAddress: {fromHostInterface: eno3}}
    - {id: eno1.0, vlanID: 0, vlanLink: eno1, macAddress: {string: '02:00:00:00:00:02'}}
",
    ));
    assert_eq!(
        doc["links"][4],
        json!({"id": "bond0.100", "type": "vlan", "mtu": 1500, "vlan_id": 100,
               "vlan_link": "bond0", "vlan_mac_address": "52:54:00:aa:bb:02"})
    );
    assert_eq!(doc["links"][5]["vlan_mac_address"], "52:54:00:aa:bb:03");
    assert_eq!(doc["links"][5]["mtu"], 1400);
    assert_eq!(doc["links"][6]["vlan_mac_address"], "02:00:00:00:00:02");
    assert!(
        doc["links"][4].get("ethernet_mac_address").is_none(),
        "VLANs carry vlan_mac_address only"
    );
}

#[test]
fn link_errors() {
    assert_eq!(
        err(
            "links: {ethernets: [{id: a, macAddress: {fromHostInterface: eno1}}, {id: b, macAddress: {fromHostInterface: eno9}}]}"
        ),
        r#"spec.networkData.links.ethernets[1].macAddress.fromHostInterface: the host has no interface "eno9""#
    );
    assert_eq!(
        err("links: {ethernets: [{id: a, macAddress: {string: '52:54:00:aa:bb'}}]}"),
        r#"spec.networkData.links.ethernets[0].macAddress.string: "52:54:00:aa:bb" is not a MAC address"#
    );
    assert_eq!(
        err("links: {ethernets: [{id: a, macAddress: {}}]}"),
        "spec.networkData.links.ethernets[0].macAddress: exactly one of string, fromHostInterface or fromBootMAC must be set"
    );
    assert_eq!(
        err(
            "links: {ethernets: [{id: a, macAddress: {string: '02:00:00:00:00:01', fromHostInterface: eno1}}]}"
        ),
        "spec.networkData.links.ethernets[0].macAddress: exactly one of string, fromHostInterface or fromBootMAC must be set"
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: eno1, vlanID: 3, vlanLink: bond0}]\n"
        )),
        r#"spec.networkData.links.vlans[0].id: id "eno1" is already used by spec.networkData.links.ethernets[0]"#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 3, vlanLink: eno1, macAddress: {fromHostInterface: eth0}}]\n"
        )),
        r#"spec.networkData.links.vlans[0].macAddress.fromHostInterface: the host has no interface "eth0""#
    );
}

#[test]
fn boot_mac_is_the_hosts_boot_interface() {
    let doc = ok(r"
links:
  ethernets:
    - {id: pxe, macAddress: {fromBootMAC: true}}
    - {id: data, macAddress: {fromHostInterface: eno2}}
  bonds:
    - {id: bond0, bondMode: active-backup, bondLinks: [data], macAddress: {fromBootMAC: true}}
  vlans:
    - {id: v5, vlanID: 5, vlanLink: bond0, macAddress: {fromBootMAC: true}}
");
    // The fixture boots from eno1, reported as 52:54:00:AA:BB:01: normalised.
    assert_eq!(doc["links"][0]["ethernet_mac_address"], "52:54:00:aa:bb:01");
    assert_eq!(doc["links"][1]["ethernet_mac_address"], "52:54:00:aa:bb:02");
    assert_eq!(doc["links"][2]["ethernet_mac_address"], "52:54:00:aa:bb:01");
    assert_eq!(doc["links"][3]["vlan_mac_address"], "52:54:00:aa:bb:01");
}

#[test]
fn boot_mac_errors() {
    let pxe = "links: {ethernets: [{id: a, macAddress: {fromHostInterface: eno1}}, {id: pxe, macAddress: {fromBootMAC: true}}]}";
    let mut no_boot = Fixture::example();
    no_boot.boot_interface = None;
    assert_eq!(
        err_with(pxe, &no_boot),
        "spec.networkData.links.ethernets[1].macAddress.fromBootMAC: the host has no boot interface recorded (MaasHost status.bootInterface)"
    );
    let mut unknown_host = Fixture::example();
    unknown_host.host = None;
    assert_eq!(
        err_with(pxe, &unknown_host),
        "spec.networkData.links.ethernets[0].macAddress.fromHostInterface: the MaasHost is not known yet"
    );
    let boot_only = "links: {ethernets: [{id: pxe, macAddress: {fromBootMAC: true}}]}";
    assert_eq!(
        err_with(boot_only, &unknown_host),
        "spec.networkData.links.ethernets[0].macAddress.fromBootMAC: the MaasHost is not known yet"
    );
    let mut bad_mac = Fixture::example();
    if let Some(boot) = bad_mac.boot_interface.as_mut() {
        boot.mac = "52:54:00".into();
    }
    assert_eq!(
        err_with(boot_only, &bad_mac),
        r#"spec.networkData.links.ethernets[0].macAddress.fromBootMAC: "52:54:00" is not a MAC address"#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 3, vlanLink: eno1, macAddress: {fromBootMAC: true, fromHostInterface: eno1}}]\n"
        )),
        "spec.networkData.links.vlans[0].macAddress: exactly one of string, fromHostInterface or fromBootMAC must be set"
    );
    // `fromBootMAC: false` is no source.
    assert_eq!(
        err("links: {ethernets: [{id: a, macAddress: {fromBootMAC: false}}]}"),
        "spec.networkData.links.ethernets[0].macAddress: exactly one of string, fromHostInterface or fromBootMAC must be set"
    );
}

#[test]
fn bond_errors() {
    let eth = "links:\n  ethernets: [{id: e1, macAddress: {fromHostInterface: eno1}}, {id: e2, macAddress: {fromHostInterface: eno2}}]\n";
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: [e1, e7]}}]"
        )),
        r#"spec.networkData.links.bonds[0].bondLinks[1]: no ethernet link with id "e7""#
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: [e1]}}, {{id: c, bondMode: broadcast, bondLinks: [b]}}]"
        )),
        r#"spec.networkData.links.bonds[1].bondLinks[0]: no ethernet link with id "b""#
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: [e1, e2]}}, {{id: c, bondMode: broadcast, bondLinks: [e2]}}]"
        )),
        r#"spec.networkData.links.bonds[1].bondLinks[0]: link "e2" is already a member of the bond at spec.networkData.links.bonds[0].bondLinks[1]"#
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: [e1, e1]}}]"
        )),
        r#"spec.networkData.links.bonds[0].bondLinks[1]: link "e1" is already a member of the bond at spec.networkData.links.bonds[0].bondLinks[0]"#
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: []}}]"
        )),
        "spec.networkData.links.bonds[0].bondLinks: a bond needs at least one member link"
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: e2, bondMode: broadcast, bondLinks: [e1]}}]"
        )),
        r#"spec.networkData.links.bonds[0].id: id "e2" is already used by spec.networkData.links.ethernets[1]"#
    );
    assert_eq!(
        err(&format!(
            "{eth}  bonds: [{{id: b, bondMode: broadcast, bondLinks: [e1], macAddress: {{string: nope}}}}]"
        )),
        r#"spec.networkData.links.bonds[0].macAddress.string: "nope" is not a MAC address"#
    );
}

#[test]
fn vlan_errors() {
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 3, vlanLink: eno3}]\n"
        )),
        r#"spec.networkData.links.vlans[0].vlanLink: link "eno3" is a member of bond "bond0": put VLANs and addresses on the bond"#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 3, vlanLink: eno9}]\n"
        )),
        r#"spec.networkData.links.vlans[0].vlanLink: no ethernet or bond link with id "eno9""#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 3, vlanLink: eno1}, {id: w, vlanID: 4, vlanLink: v}]\n"
        )),
        r#"spec.networkData.links.vlans[1].vlanLink: no ethernet or bond link with id "v""#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 4095, vlanLink: eno1}]\n"
        )),
        "spec.networkData.links.vlans[0].vlanID: VLAN id 4095 is outside 0-4094"
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: -1, vlanLink: eno1}]\n"
        )),
        "spec.networkData.links.vlans[0].vlanID: VLAN id -1 is outside 0-4094"
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 7, vlanLink: bond0}, {id: w, vlanID: 7, vlanLink: bond0}]\n"
        )),
        r#"spec.networkData.links.vlans[1].vlanID: VLAN 7 on "bond0" is already defined by spec.networkData.links.vlans[0]"#
    );
    assert_eq!(
        err(&with_links(
            "  vlans: [{id: v, vlanID: 7, vlanLink: bond0}, {id: v, vlanID: 8, vlanLink: bond0}]\n"
        )),
        r#"spec.networkData.links.vlans[1].id: id "v" is already used by spec.networkData.links.vlans[0]"#
    );
}
