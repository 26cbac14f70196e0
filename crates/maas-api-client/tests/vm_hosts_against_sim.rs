//! The VM host calls against the simulator: list, update, compose with overcommit, composed
//! machines deleted on release, `register_vmhost` on deploy, and a MAAS without VM hosts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use maas_api_client::{
    AllocateRequest, ComposeRequest, DeployRequest, MaasError, MachineStatus, ReleaseRequest,
    VmHostUpdate,
};
use maas_sim::{SimConfig, VmHostSpec};
use support::{client, instant, start};

fn host(name: &str) -> VmHostSpec {
    VmHostSpec {
        name: name.to_owned(),
        cores: 4,
        memory: 8192,
        local_storage: 100_000_000_000,
        ..VmHostSpec::default()
    }
}

/// The compose request of the tests: `cores` cores, 4096 MiB, a 20 GB root disk in the
/// default storage pool, and `hostname` when given.
fn compose_request(hostname: Option<&str>, cores: u32) -> ComposeRequest {
    ComposeRequest {
        hostname: hostname.map(str::to_owned),
        cores: Some(cores),
        memory_mib: Some(4096),
        storage_gb: Some(20),
        storage_pool: Some("default".into()),
        ..ComposeRequest::default()
    }
}

#[tokio::test]
async fn compose_deploy_release_on_a_vm_host() {
    let sim = start(instant(1)).await;
    let client = client(&sim);
    let id = i64::try_from(sim.state().add_vm_host(host("lxd1")).unwrap()).unwrap();

    let hosts = client.vm_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].id, id);
    assert_eq!(hosts[0].kind, "lxd");
    assert_eq!(hosts[0].total.cores, 4);
    assert_eq!(hosts[0].storage_pools[0].name, "default");

    let system_id = client
        .compose(id, &compose_request(Some("vm-1"), 3))
        .await
        .unwrap();
    let machine = client.get_machine(&system_id).await.unwrap();
    assert_eq!(machine.vm_host_id(), Some(id));
    assert_eq!(machine.pod.as_ref().unwrap().name, "lxd1");
    assert_eq!(machine.status, MachineStatus::Ready);
    assert_eq!(machine.cpu_count, 3);
    let after = client.vm_host(id).await.unwrap();
    assert_eq!(after.used.cores, 3);
    assert_eq!(after.cores_left(), 1);

    let refused = client
        .compose(
            id,
            &ComposeRequest {
                cores: Some(2),
                ..ComposeRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, MaasError::ComposeRefused { .. }),
        "{refused:?}"
    );
    let updated = client
        .update_vm_host(
            id,
            &VmHostUpdate {
                cpu_over_commit_ratio: Some(2.0),
                tags: Some(vec!["capmaas".into()]),
                ..VmHostUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.cores_left(), 5);
    assert_eq!(updated.tags, vec!["capmaas".to_owned()]);

    client
        .allocate(&AllocateRequest {
            system_id: Some(system_id.clone()),
            ..AllocateRequest::default()
        })
        .await
        .unwrap();
    client
        .deploy(&system_id, &DeployRequest::default())
        .await
        .unwrap();
    client
        .release(&system_id, &ReleaseRequest::default())
        .await
        .unwrap();
    assert!(matches!(
        client.get_machine(&system_id).await,
        Err(MaasError::NotFound { .. })
    ));
    assert_eq!(client.vm_host(id).await.unwrap().used.cores, 0);
    assert!(matches!(
        client.vm_host(id + 1000).await,
        Err(MaasError::NotFound { .. })
    ));
    client.delete_vm_host(id, true).await.unwrap();
    assert!(client.vm_hosts().await.unwrap().is_empty());
}

#[tokio::test]
async fn delete_machine_deletes_a_composed_vm() {
    let sim = start(instant(1)).await;
    let client = client(&sim);
    let id = i64::try_from(sim.state().add_vm_host(host("lxd1")).unwrap()).unwrap();
    let system_id = client
        .compose(id, &compose_request(Some("vm-del"), 2))
        .await
        .unwrap();
    assert_eq!(client.vm_host(id).await.unwrap().used.cores, 2);
    client.delete_machine(&system_id).await.unwrap();
    assert!(matches!(
        client.get_machine(&system_id).await,
        Err(MaasError::NotFound { .. })
    ));
    assert_eq!(client.vm_host(id).await.unwrap().used.cores, 0);
    // Gone: a repeat is a NotFound, as for every other delete.
    let again = client.delete_machine(&system_id).await.unwrap_err();
    assert!(matches!(again, MaasError::NotFound { .. }), "{again:?}");
    assert_eq!(
        sim.state().applied_counts().get("machine.delete").copied(),
        Some(1)
    );
}

#[tokio::test]
async fn deploy_with_register_vmhost_makes_the_machine_a_vm_host() {
    let sim = start(instant(1)).await;
    let client = client(&sim);
    let system_id = sim.state().machines()[0].system_id.clone();
    client
        .deploy(
            &system_id,
            &DeployRequest {
                register_vmhost: true,
                ..DeployRequest::default()
            },
        )
        .await
        .unwrap();
    let hosts = client.vm_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].host_system_id(), Some(system_id.as_str()));
    let refused = client
        .deploy(
            &sim.state().machines()[0].system_id,
            &DeployRequest {
                register_vmhost: true,
                ..DeployRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, MaasError::Conflict { .. }), "{refused:?}");
}

#[tokio::test]
async fn a_maas_without_vm_hosts_is_reported_as_such() {
    let sim = start(SimConfig {
        vm_hosts: false,
        ..instant(1)
    })
    .await;
    let client = client(&sim);
    let unsupported = |e: &MaasError| matches!(e, MaasError::VmHostsUnsupported { .. });
    let e = client.vm_hosts().await.unwrap_err();
    assert!(unsupported(&e), "{e:?}");
    let e = client.vm_host(1).await.unwrap_err();
    assert!(unsupported(&e), "{e:?}");
    let e = client
        .compose(1, &ComposeRequest::default())
        .await
        .unwrap_err();
    assert!(unsupported(&e), "{e:?}");
    let system_id = sim.state().machines()[0].system_id.clone();
    let e = client
        .deploy(
            &system_id,
            &DeployRequest {
                register_vmhost: true,
                ..DeployRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(unsupported(&e), "{e:?}");
    // Without the flag the same deploy works.
    let m = client
        .deploy(&system_id, &DeployRequest::default())
        .await
        .unwrap();
    assert_eq!(m.vm_host_id(), None);
}
