//! Bonds, VLAN interfaces, static addresses on them, the default gateway, MTU, interface
//! deletion and what release keeps: status codes and bodies as MAAS answers them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::many_single_char_names)]

mod common;

use common::net::{by_name, ifaces, setup};
use common::status_text;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn bond_vlan_static_gateway_and_release() {
    let (t, ids) = setup().await;
    let id = &ids[0];
    t.allocate(&[("system_id", id)]).await;
    let list = ifaces(&t, id).await;
    let (eth0, eth1) = (
        by_name(&list, "eth0")["id"].clone(),
        by_name(&list, "eth1")["id"].clone(),
    );
    let bonds = format!("nodes/{id}/interfaces/?op=create_bond");
    // Refusals of create_bond.
    t.expect_post(
        &bonds,
        &[("name", "bond0")],
        (400, r#"{"parents":["This field is required."]}"#),
    )
    .await;
    t.expect_post(
        &bonds,
        &[
            ("name", "bond0"),
            ("parents", &eth0.to_string()),
            ("bond_mode", "lacp"),
        ],
        (
            400,
            r#"{"bond_mode":["Select a valid choice. lacp is not one of the available choices."]}"#,
        ),
    )
    .await;
    let bond = t
        .post_json(
            &bonds,
            &[
                ("name", "bond0"),
                ("parents", &eth0.to_string()),
                ("parents", &eth1.to_string()),
                ("bond_mode", "802.3ad"),
                ("mtu", "9000"),
            ],
        )
        .await;
    assert_eq!(bond["type"], "bond");
    assert_eq!(bond["parents"], json!(["eth0", "eth1"]));
    assert_eq!(
        bond["mac_address"], "52:54:00:77:00:00",
        "the first parent's MAC"
    );
    assert_eq!(bond["params"]["bond_mode"], "802.3ad");
    assert_eq!(bond["effective_mtu"], 9000);
    assert_eq!(bond["links"][0]["mode"], "link_up");
    let list = ifaces(&t, id).await;
    assert_eq!(by_name(&list, "eth0")["children"], json!(["bond0"]));
    assert_eq!(
        by_name(&list, "eth0")["links"],
        json!([]),
        "members lose their links"
    );
    t.expect_post(
        &bonds,
        &[("name", "bond1"), ("parents", &eth0.to_string())],
        (400, r#"{"parents":["Interfaces already in-use: eth0."]}"#),
    )
    .await;
    t.expect_post(
        &format!("nodes/{id}/interfaces/{eth0}/?op=link_subnet"),
        &[("mode", "dhcp")],
        (
            400,
            r#"{"bond":["Cannot link interface(eth0) when interface is in a bond(bond0)."]}"#,
        ),
    )
    .await;

    // VLAN 100 of fabric-0, then a VLAN interface on the bond.
    let vlans = t.get_json("fabrics/0/vlans/").await;
    let vids: Vec<u64> = vlans
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["vid"].as_u64().unwrap())
        .collect();
    assert_eq!(vids, [0, 100]);
    let untagged = vlans[0]["id"].to_string();
    let tagged = vlans[1]["id"].to_string();
    let (s, _) = status_text(t.get("fabrics/9/vlans/", &[]).await).await;
    assert_eq!(s, 404);
    let vlan_op = format!("nodes/{id}/interfaces/?op=create_vlan");
    let bond_id = bond["id"].to_string();
    t.expect_post(
        &vlan_op,
        &[("vlan", &untagged), ("parent", &bond_id)],
        (
            400,
            r#"{"vlan":["A VLAN interface can only belong to a tagged VLAN."]}"#,
        ),
    )
    .await;
    t.expect_post(
        &vlan_op,
        &[("vlan", &tagged), ("parent", &eth1.to_string())],
        (
            400,
            r#"{"parent":["A VLAN interface can't have a parent that is already in a bond."]}"#,
        ),
    )
    .await;
    let vif = t
        .post_json(&vlan_op, &[("vlan", &tagged), ("parent", &bond_id)])
        .await;
    assert_eq!(
        (vif["name"].as_str(), vif["type"].as_str()),
        (Some("bond0.100"), Some("vlan"))
    );
    assert_eq!(vif["vlan"]["vid"], 100);
    let (s, body) = status_text(
        t.post(&vlan_op, &[("vlan", &tagged), ("parent", &bond_id)])
            .await,
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("already has an interface named 'bond0.100'"),
        "{body}"
    );

    // Static addresses on the VLAN interface: subnet of its VLAN only, inside it, not dynamic.
    let vif_path = format!("nodes/{id}/interfaces/{}/", vif["id"]);
    let link = format!("{vif_path}?op=link_subnet");
    for (subnet, ip, want) in [
        (
            "1",
            "10.20.0.9",
            r#"{"subnet":["Select a valid choice. That choice is not one of the available choices."]}"#,
        ),
        (
            "10.40.0.0/24",
            "10.41.0.9",
            r#"{"ip_address":["IP address is not in the given subnet '10.40.0.0/24:10.40.0.0/24(vid=100)'."]}"#,
        ),
        (
            "10.40.0.0/24",
            "10.40.0.210",
            r#"{"ip_address":["IP address is inside a dynamic range 10.40.0.200 to 10.40.0.250."]}"#,
        ),
    ] {
        let form = [("mode", "static"), ("subnet", subnet), ("ip_address", ip)];
        t.expect_post(&link, &form, (400, want)).await;
    }
    let v = t
        .post_json(
            &link,
            &[
                ("mode", "STATIC"),
                ("subnet", "10.40.0.0/24"),
                ("ip_address", "10.40.0.10"),
            ],
        )
        .await;
    let link_id = v["links"][0]["id"].to_string();
    assert_eq!(v["links"][0]["ip_address"], "10.40.0.10");
    assert_eq!(v["links"].as_array().unwrap().len(), 1, "link_up replaced");

    // Default gateway from that link; unknown link ids are refused.
    let gw = format!("{vif_path}?op=set_default_gateway");
    t.expect_post(
        &gw,
        &[("link_id", "999999")],
        (
            400,
            r#"{"link_id":["Select a valid choice. 999999 is not one of the available choices."]}"#,
        ),
    )
    .await;
    t.post_json(&gw, &[("link_id", &link_id)]).await;
    let m = t.machine_read(id, None).await;
    assert_eq!(
        m["default_gateways"]["ipv4"],
        json!({"gateway_ip": "10.40.0.1", "link_id": link_id.parse::<u64>().unwrap()})
    );
    t.expect_post(
        &format!("nodes/{id}/interfaces/{eth1}/?op=set_default_gateway"),
        &[],
        (
            400,
            r#"{"__all__":["This interface has no usable gateways."]}"#,
        ),
    )
    .await;

    // MTU update, then deploy: edits refused with 409; release keeps the bond and the static
    // address (MAAS frees only auto addresses).
    let eth0_path = format!("nodes/{id}/interfaces/{eth0}/");
    let v = t.json(Method::PUT, &eth0_path, &[("mtu", "9000")]).await;
    assert_eq!(v["params"]["mtu"], 9000);
    let (s, _) = status_text(t.call(Method::PUT, &eth0_path, &[("mtu", "100")]).await).await;
    assert_eq!(s, 400);
    t.machine_op(id, "deploy", &[]).await;
    t.expect_post(
        &bonds,
        &[("name", "bond9"), ("parents", &eth0.to_string())],
        (
            409,
            "Cannot create bond interface because the machine is not New, Ready, Allocated, or Broken.",
        ),
    )
    .await;
    let (s, _) = status_text(t.call(Method::DELETE, &vif_path, &[]).await).await;
    assert_eq!(s, 409);
    let m = t.machine_op(id, "release", &[]).await;
    assert_eq!(m["ip_addresses"], json!(["10.40.0.10"]));
    let list = ifaces(&t, id).await;
    assert_eq!(list.len(), 4);

    // Deleting the bond takes its VLAN interface and frees the members.
    let (s, _) = status_text(
        t.call(
            Method::DELETE,
            &format!("nodes/{id}/interfaces/{bond_id}/"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(s, 204);
    let list = ifaces(&t, id).await;
    let names: Vec<&str> = list.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["eth0", "eth1"]);
    assert_eq!(by_name(&list, "eth0")["links"][0]["mode"], "link_up");
    let m = t.machine_read(id, None).await;
    assert_eq!(m["default_gateways"]["ipv4"]["link_id"], Value::Null);
}

/// Dual stack: an IPv6 subnet on the untagged VLAN of fabric-0, next to `10.20.0.0/16`; eth0
/// takes a static address of each family and a default gateway of each; the machine reports
/// both addresses, and a DNS resource serves both (an A and an AAAA record in MAAS).
#[tokio::test]
async fn an_interface_holds_an_ipv4_and_an_ipv6_static_address() {
    let (t, ids) = setup().await;
    let id = &ids[0];
    t.sim
        .state()
        .add_subnet(&maas_sim::SubnetSpec {
            cidr: "fd00:20::/64".into(),
            gateway_ip: Some("fd00:20::1".into()),
            ..maas_sim::SubnetSpec::default()
        })
        .unwrap();
    t.allocate(&[("system_id", id)]).await;
    let eth0 = by_name(&ifaces(&t, id).await, "eth0")["id"].clone();
    let link = format!("nodes/{id}/interfaces/{eth0}/?op=link_subnet");
    for (subnet, ip) in [
        ("10.20.0.0/16", "10.20.200.10"),
        ("fd00:20::/64", "fd00:20::10"),
    ] {
        t.post_json(
            &link,
            &[("mode", "static"), ("subnet", subnet), ("ip_address", ip)],
        )
        .await;
    }
    t.expect_post(
        &link,
        &[
            ("mode", "static"),
            ("subnet", "fd00:20::/64"),
            ("ip_address", "fd00:21::10"),
        ],
        (
            400,
            r#"{"ip_address":["IP address is not in the given subnet 'fd00:20::/64:fd00:20::/64(vid=0)'."]}"#,
        ),
    )
    .await;
    let eth0_now = by_name(&ifaces(&t, id).await, "eth0").clone();
    let statics: Vec<(&str, &str)> = eth0_now["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["mode"] == "static")
        .map(|l| {
            (
                l["ip_address"].as_str().unwrap(),
                l["subnet"]["cidr"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statics,
        [
            ("10.20.200.10", "10.20.0.0/16"),
            ("fd00:20::10", "fd00:20::/64")
        ],
        "the auto link is replaced, the IPv6 link added: {eth0_now}"
    );
    let links: Vec<String> = eth0_now["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["mode"] == "static")
        .map(|l| l["id"].to_string())
        .collect();
    let gw = format!("nodes/{id}/interfaces/{eth0}/?op=set_default_gateway");
    for link_id in &links {
        t.post_json(&gw, &[("link_id", link_id)]).await;
    }
    let m = t.machine_read(id, None).await;
    assert_eq!(m["ip_addresses"], json!(["10.20.200.10", "fd00:20::10"]));
    assert_eq!(m["default_gateways"]["ipv4"]["gateway_ip"], "10.20.0.1");
    assert_eq!(m["default_gateways"]["ipv6"]["gateway_ip"], "fd00:20::1");

    let r = t
        .post_json(
            "dnsresources/?op=",
            &[
                ("fqdn", "c1.maas"),
                ("ip_addresses", "10.20.200.10 fd00:20::10"),
            ],
        )
        .await;
    let served: Vec<&str> = r["ip_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap())
        .collect();
    assert_eq!(served, ["10.20.200.10", "fd00:20::10"]);
}
