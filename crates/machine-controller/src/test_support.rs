//! Builders shared by the unit tests.

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::host::{MaasHostSpec, MaasHostStatus, ProvisioningState};
use capmaas_api::machine::MaasMachineSpec;
use capmaas_api::{MaasHost, MaasMachine, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use serde_json::json;

use crate::status::consumer_ref;

pub(crate) fn maas_machine(name: &str) -> MaasMachine {
    let mut mm = MaasMachine::new(
        name,
        MaasMachineSpec {
            failure_domain: None,
            system_id: None,
            provider_id: None,
            resource_pool: None,
            min_cpu: 2,
            min_memory: 4096,
            min_disk_size: None,
            tags: None,
            image: "ubuntu/jammy".into(),
            deploy_in_memory: false,
            keep_powered_on: None,
            hwe_kernel: None,
            host_selector: None,
            data_template: None,
            release_policy: None,
            user_data: None,
            parent: None,
            lxd: None,
        },
    );
    mm.metadata.namespace = Some("ns".into());
    mm.metadata.uid = Some(format!("uid-{name}"));
    mm.metadata.generation = Some(1);
    mm.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: "Machine".into(),
        name: name.into(),
        uid: format!("machine-uid-{name}"),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    mm.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_MACHINE.into()]);
    mm
}

pub(crate) fn machine(name: &str, bootstrap: Option<&str>) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "clusterName": "c",
            "bootstrap": {"dataSecretName": bootstrap},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": name}
        }
    }))
    .unwrap()
}

pub(crate) fn cluster(provisioned: bool, paused: bool) -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"paused": paused},
        "status": {"initialization": {"infrastructureProvisioned": provisioned}}
    }))
    .unwrap()
}

/// A host of MAAS machine `sys-{name}`, unclaimed and unrequested, without status.
pub(crate) fn unclaimed_host(name: &str) -> MaasHost {
    MaasHost::new(
        name,
        MaasHostSpec {
            system_id: format!("sys-{name}"),
            consumer_ref: None,
            provisioning: None,
            reservation: None,
            vms: None,
        },
    )
}

pub(crate) fn host(name: &str, state: Option<ProvisioningState>) -> MaasHost {
    let mut h = unclaimed_host(name);
    h.metadata.namespace = Some("ns".into());
    h.metadata.generation = Some(1);
    h.status = Some(MaasHostStatus {
        hostname: Some(name.into()),
        zone: Some("az1".into()),
        provisioning_state: state,
        observed_generation: Some(1),
        ..MaasHostStatus::default()
    });
    h
}

pub(crate) fn claimed(mut h: MaasHost, mm: &MaasMachine) -> MaasHost {
    let host_ns = h.metadata.namespace.clone().unwrap_or_default();
    h.spec.consumer_ref = consumer_ref(mm, &host_ns);
    h
}

pub(crate) fn deleting(mut mm: MaasMachine) -> MaasMachine {
    mm.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    mm
}
