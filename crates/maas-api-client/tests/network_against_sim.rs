//! The network calls against the MAAS simulator: bonds, VLAN interfaces, MTU, static and
//! DHCP links, the default gateway, interface deletion, the VLANs of a fabric and IP ranges,
//! with MAAS's refusals as typed errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use maas_api_client::{
    BondMode, CreateBondRequest, CreateVlanInterfaceRequest, InterfaceUpdate, IpRangeSpec,
    IpRangeType, LinkMode, LinkSubnetRequest, MaasError,
};
use maas_sim::{NicSpec, SubnetSpec};
use support::{allocate, client, instant, link_static, start, static_link};

#[tokio::test]
async fn bond_vlan_links_and_gateway() {
    let sim = start(instant(2)).await;
    let state = sim.state();
    state
        .add_subnet(&SubnetSpec {
            cidr: "10.40.0.0/24".into(),
            gateway_ip: Some("10.40.0.1".into()),
            vid: 100,
            ..SubnetSpec::default()
        })
        .unwrap();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    for (n, id) in ids.iter().enumerate() {
        let nics = [0, 1].map(|k| NicSpec {
            mac_address: format!("52:54:00:88:0{n}:0{k}"),
            subnet: None,
        });
        state.set_nics(id, &nics).unwrap();
    }
    let client = client(&sim);
    let id = ids[0].as_str();
    allocate(&client, id).await;
    let nics = client.list_interfaces(id).await.unwrap();
    assert_eq!(nics.len(), 2);
    let fabric = nics[0].vlan.as_ref().unwrap().fabric_id;

    let bond = client
        .create_bond(
            id,
            &CreateBondRequest {
                name: "bond0".into(),
                parents: nics.iter().map(|i| i.id).collect(),
                mac_address: None,
                bond_mode: Some(BondMode::Lacp),
                mtu: Some(9000),
            },
        )
        .await
        .unwrap();
    assert!(bond.is("bond"));
    assert_eq!(bond.parents, ["eth0", "eth1"]);
    assert_eq!(bond.mac_address, nics[0].mac_address);
    assert_eq!(bond.params.bond_mode.as_deref(), Some("802.3ad"));
    assert_eq!(bond.mtu(), Some(9000));
    let again = client
        .create_bond(
            id,
            &CreateBondRequest {
                name: "bond1".into(),
                parents: vec![nics[0].id],
                ..CreateBondRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&again, MaasError::BadRequest { fields, .. } if fields["parents"] == ["Interfaces already in-use: eth0."]),
        "{again}"
    );
    let bond = client
        .update_interface(
            id,
            bond.id,
            &InterfaceUpdate {
                mtu: Some(1500),
                bond_mode: Some(BondMode::ActiveBackup),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (bond.mtu(), bond.params.bond_mode.as_deref()),
        (Some(1500), Some("active-backup"))
    );

    let vlans = client.list_vlans(fabric).await.unwrap();
    let tagged = vlans.iter().find(|v| v.vid == 100).unwrap();
    assert!(matches!(
        client.list_vlans(99).await.unwrap_err(),
        MaasError::NotFound { .. }
    ));
    let vif = client
        .create_vlan_interface(
            id,
            &CreateVlanInterfaceRequest {
                vlan: tagged.id,
                parent: bond.id,
                mtu: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(vif.name, "bond0.100");
    assert_eq!(vif.vlan.as_ref().map(|v| v.vid), Some(100));
    assert_eq!(vif.parents, ["bond0"]);

    let subnets = client.list_subnets().await.unwrap();
    let tagged_subnet = subnets
        .iter()
        .find(|s| s.vlan.as_ref().map(|v| v.vid) == Some(100))
        .unwrap();
    let linked = link_static(&client, id, vif.id, tagged_subnet.id, "10.40.0.10")
        .await
        .unwrap();
    let link = static_link(&linked);
    // The same address for the other machine: MAAS's "already in use" is typed.
    let other = client.list_interfaces(&ids[1]).await.unwrap();
    allocate(&client, &ids[1]).await;
    let taken = link_static(&client, &ids[1], other[0].id, subnets[0].id, "10.20.3.3").await;
    assert!(taken.is_ok());
    let err = link_static(&client, id, vif.id, tagged_subnet.id, "10.40.0.10")
        .await
        .unwrap_err();
    assert!(
        matches!(err, MaasError::AddressUnavailable { status: 404, .. }),
        "{err}"
    );
    let err = link_static(&client, &ids[1], other[1].id, subnets[0].id, "10.20.3.3")
        .await
        .unwrap_err();
    assert_eq!(err.category(), "address_unavailable");
    let err = link_static(&client, &ids[1], other[1].id, subnets[0].id, "10.99.0.1")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MaasError::BadRequest { fields, .. } if fields.contains_key("ip_address")),
        "{err}"
    );
    let dhcp = client
        .link_subnet(&ids[1], other[1].id, &LinkSubnetRequest::dhcp(None))
        .await
        .unwrap();
    assert!(dhcp.links.iter().any(|l| l.mode == LinkMode::Dhcp));

    client
        .set_default_gateway(id, vif.id, Some(link.id))
        .await
        .unwrap();
    let machine = client.get_machine(id).await.unwrap();
    assert_eq!(machine.default_gateways.ipv4.link_id, Some(link.id));
    assert_eq!(
        machine.default_gateways.ipv4.gateway_ip,
        Some("10.40.0.1".parse().unwrap())
    );
    assert!(machine.interface_set.iter().any(|i| i.name == "bond0.100"));

    // Deleting the bond takes the VLAN interface with it; a second delete is NotFound.
    client.delete_interface(id, bond.id).await.unwrap();
    let left = client.list_interfaces(id).await.unwrap();
    assert_eq!(left.len(), 2);
    assert!(matches!(
        client.delete_interface(id, bond.id).await.unwrap_err(),
        MaasError::NotFound { .. }
    ));
}

#[tokio::test]
async fn ip_ranges_lifecycle() {
    let sim = start(instant(1)).await;
    let client = client(&sim);
    let subnets = client.list_subnets().await.unwrap();
    let spec = IpRangeSpec::reserved(
        "10.20.9.10".parse().unwrap(),
        "10.20.9.20".parse().unwrap(),
        Some(subnets[0].id),
        "capmaas MaasIPPool ns/pool",
    );
    let range = client.create_iprange(&spec).await.unwrap();
    assert_eq!(range.kind, IpRangeType::Reserved);
    assert_eq!(range.comment, "capmaas MaasIPPool ns/pool");
    assert_eq!(range.subnet.as_ref().map(|s| s.id), Some(subnets[0].id));
    let err = client.create_iprange(&spec).await.unwrap_err();
    assert!(
        matches!(&err, MaasError::BadRequest { fields, .. } if fields["start_ip"] == ["Requested reserved range conflicts with an existing range."]),
        "{err}"
    );
    let moved = client
        .update_iprange(
            range.id,
            &IpRangeSpec {
                end_ip: "10.20.9.40".parse().unwrap(),
                ..spec.clone()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        moved.end_ip,
        "10.20.9.40".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(client.list_ipranges().await.unwrap().len(), 1);
    client.delete_iprange(range.id).await.unwrap();
    assert!(client.list_ipranges().await.unwrap().is_empty());
    assert!(matches!(
        client.delete_iprange(range.id).await.unwrap_err(),
        MaasError::NotFound { .. }
    ));
}
