//! The client against the MAAS simulator: every operation, the CAPI lifecycle and
//! concurrent allocation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use maas_api_client::{
    AllocateRequest, BootResourceKind, DeployRequest, DnsResourceFilter, DnsResourceSpec,
    DomainSpec, LinkSubnetRequest, MaasError, MachineFilter, MachineStatus, PowerState,
    ReleaseRequest, StopMode, TagSpec,
};
use maas_sim::SimConfig;
use support::{
    allocate, allocated_to, client, first_id, instant, start, static_link, wait_for_status,
};

#[tokio::test]
async fn full_lifecycle() {
    let sim = start(instant(5)).await;
    let client = client(&sim);
    let agent = "capmaas-test-install";

    let ready = client
        .list_machines(&MachineFilter::new().status(MachineStatus::Ready))
        .await
        .unwrap();
    assert_eq!(ready.len(), 5);
    let target = ready[2].clone();
    assert!(allocated_to(&client, agent).await.is_empty());

    let allocated = client
        .allocate(&AllocateRequest {
            system_id: Some(target.system_id.clone()),
            agent_name: Some(agent.to_owned()),
            comment: Some("capmaas allocate".to_owned()),
            ..AllocateRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(allocated.system_id, target.system_id);
    assert_eq!(allocated.status, MachineStatus::Allocated);
    let mine = allocated_to(&client, agent).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].system_id, target.system_id);
    let id = target.system_id.as_str();

    let annotations = BTreeMap::from([
        ("capmaas.host".to_owned(), "ns1.host-a".to_owned()),
        ("cluster".to_owned(), "c1".to_owned()),
    ]);
    let annotated = client
        .set_workload_annotations(id, &annotations)
        .await
        .unwrap();
    assert_eq!(annotated.annotations(), &annotations);
    let trimmed = client
        .remove_workload_annotations(id, &["cluster"])
        .await
        .unwrap();
    assert_eq!(trimmed.annotations().len(), 1);
    assert!(matches!(
        client
            .set_workload_annotations(id, &BTreeMap::from([("a/b".to_owned(), "x".to_owned())]))
            .await,
        Err(MaasError::InvalidArgument(_))
    ));

    let renamed = client.update_hostname(id, "cp-0").await.unwrap();
    assert_eq!(renamed.hostname, "cp-0");

    // Static address on the boot interface: unlink the existing link, link static.
    let interfaces = client.list_interfaces(id).await.unwrap();
    let boot = interfaces.first().expect("an interface");
    let subnets = client.list_subnets().await.unwrap();
    let subnet = &subnets[0];
    for link in &boot.links {
        client.unlink_subnet(id, boot.id, link.id).await.unwrap();
    }
    let ip: IpAddr = match subnet.cidr {
        ipnet::IpNet::V4(net) => IpAddr::V4(net.hosts().nth(200).unwrap()),
        ipnet::IpNet::V6(_) => panic!("sim subnets are IPv4"),
    };
    let linked = client
        .link_subnet(id, boot.id, &LinkSubnetRequest::static_ip(subnet.id, ip))
        .await
        .unwrap();
    let link = static_link(&linked);
    assert_eq!(link.ip_address, Some(ip));
    assert_eq!(
        client
            .get_interface(id, boot.id)
            .await
            .unwrap()
            .ip_addresses()
            .collect::<Vec<_>>(),
        vec![ip]
    );

    let user_data = b"#cloud-config\nruncmd: [echo hi]\n".to_vec();
    let deploying = client
        .deploy(
            id,
            &DeployRequest {
                distro_series: Some("jammy".to_owned()),
                user_data: Some(user_data),
                comment: Some("capmaas deploy".to_owned()),
                ..DeployRequest::default()
            },
        )
        .await
        .unwrap();
    assert!(matches!(
        deploying.status,
        MachineStatus::Deploying | MachineStatus::Deployed
    ));
    let deployed = wait_for_status(&client, id, MachineStatus::Deployed).await;
    assert_eq!(deployed.distro_series, "jammy");
    assert!(deployed.ip_addresses.contains(&ip));

    client
        .power_off(id, StopMode::Hard, Some("remediation"))
        .await
        .unwrap();
    assert_eq!(
        client.get_machine(id).await.unwrap().power_state,
        PowerState::Off
    );
    assert_eq!(client.query_power_state(id).await.unwrap(), PowerState::Off);
    client.power_on(id, None).await.unwrap();
    assert_eq!(
        client.get_machine(id).await.unwrap().power_state,
        PowerState::On
    );

    client
        .release(
            id,
            &ReleaseRequest {
                erase: true,
                quick_erase: true,
                comment: Some("capmaas release".to_owned()),
                ..ReleaseRequest::default()
            },
        )
        .await
        .unwrap();
    let released = wait_for_status(&client, id, MachineStatus::Ready).await;
    assert!(released.annotations().is_empty());
    assert!(released.owner.is_none());
    assert!(allocated_to(&client, agent).await.is_empty());
}

#[tokio::test]
async fn abort_broken_and_fixed() {
    let sim = start(SimConfig {
        machines: 2,
        ..SimConfig::default()
    })
    .await;
    let client = client(&sim);
    let id = first_id(&client).await;
    allocate(&client, &id).await;
    let deploying = client.deploy(&id, &DeployRequest::default()).await.unwrap();
    assert_eq!(deploying.status, MachineStatus::Deploying);
    let aborted = client.abort(&id, Some("stop")).await.unwrap();
    assert_eq!(aborted.status, MachineStatus::Allocated);
    let broken = client.mark_broken(&id, Some("bad disk")).await.unwrap();
    assert_eq!(broken.status, MachineStatus::Broken);
    assert_eq!(broken.error_description, "bad disk");
    let fixed = client.mark_fixed(&id, None).await.unwrap();
    assert_eq!(fixed.status, MachineStatus::Ready);
}

#[tokio::test]
async fn inventory_dns_and_tags() {
    let sim = start(instant(3)).await;
    let client = client(&sim);

    let version = client.version().await.unwrap();
    assert!(!version.version.is_empty());
    let zones = client.list_zones().await.unwrap();
    assert!(zones.iter().any(|z| z.name == "default"));
    let pools = client.list_resource_pools().await.unwrap();
    assert!(pools.iter().any(|p| p.name == "default"));
    assert!(
        !client
            .list_boot_resources(BootResourceKind::All)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        client
            .list_boot_resources(BootResourceKind::Uploaded)
            .await
            .unwrap()
            .iter()
            .all(|b| b.kind == "Uploaded")
    );
    let subnets = client.list_subnets().await.unwrap();
    assert_eq!(
        client.get_subnet(subnets[0].id).await.unwrap().cidr,
        subnets[0].cidr
    );

    // Tags.
    let tag = client
        .create_tag(&TagSpec {
            name: "gpu-test".to_owned(),
            comment: Some("test tag".to_owned()),
            ..TagSpec::default()
        })
        .await
        .unwrap();
    assert_eq!(tag.name, "gpu-test");
    let tags = client.list_tags().await.unwrap();
    assert!(tags.iter().any(|t| t.name == "gpu-test"));
    let machines = client.list_machines(&MachineFilter::new()).await.unwrap();
    let ids: Vec<&str> = machines
        .iter()
        .take(2)
        .map(|m| m.system_id.as_str())
        .collect();
    let added = client.add_tag_to_machines("gpu-test", &ids).await.unwrap();
    assert_eq!(added.added, 2);
    let gpu_tagged = MachineFilter::new().tag("gpu-test");
    let tagged = client.list_machines(&gpu_tagged).await.unwrap();
    assert_eq!(tagged.len(), 2);
    let removed = client
        .remove_tag_from_machines("gpu-test", &ids[..1])
        .await
        .unwrap();
    assert_eq!(removed.removed, 1);
    let tagged = client.list_machines(&gpu_tagged).await.unwrap();
    assert_eq!(tagged.len(), 1);

    // Domains and DNS resources.
    let domain = client
        .create_domain(&DomainSpec {
            name: "k8s.test".to_owned(),
            authoritative: Some(true),
            ttl: Some(60),
        })
        .await
        .unwrap();
    assert_eq!(domain.name, "k8s.test");
    let domains = client.list_domains().await.unwrap();
    assert!(domains.iter().any(|d| d.name == "k8s.test"));
    let a: IpAddr = "10.0.0.240".parse().unwrap();
    let b: IpAddr = "10.0.0.241".parse().unwrap();
    let created = client
        .create_dns_resource(&DnsResourceSpec {
            fqdn: "api-c1.k8s.test".to_owned(),
            ip_addresses: vec![a],
            address_ttl: Some(30),
        })
        .await
        .unwrap();
    assert_eq!(created.fqdn, "api-c1.k8s.test");
    assert_eq!(created.ips(), vec![a]);
    let listed = client
        .list_dns_resources(&DnsResourceFilter::fqdn("api-c1.k8s.test"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let updated = client
        .update_dns_resource(
            created.id,
            &DnsResourceSpec {
                fqdn: "api-c1.k8s.test".to_owned(),
                ip_addresses: vec![a, b],
                address_ttl: Some(30),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        updated.ips().into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([a, b])
    );
    assert_eq!(
        client
            .get_dns_resource(created.id)
            .await
            .unwrap()
            .ips()
            .len(),
        2
    );
    client.delete_dns_resource(created.id).await.unwrap();
    assert!(matches!(
        client.get_dns_resource(created.id).await,
        Err(MaasError::NotFound { .. })
    ));
    assert!(
        client
            .list_dns_resources(&DnsResourceFilter::fqdn("api-c1.k8s.test"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn concurrent_allocations_take_each_machine_once() {
    let sim = start(instant(20)).await;
    let client = client(&sim);
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .allocate(&AllocateRequest {
                        agent_name: Some(format!("agent-{i}")),
                        ..AllocateRequest::default()
                    })
                    .await
            })
        })
        .collect();
    let mut won = BTreeSet::new();
    let mut lost = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(machine) => assert!(won.insert(machine.system_id), "machine allocated twice"),
            Err(MaasError::NoMatchingMachine { .. }) => lost += 1,
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!(won.len(), 20);
    assert_eq!(lost, 30);
}
