//! Objects for unit tests.
#![allow(clippy::unwrap_used)]

use capmaas_api::common::MachineAddress;
use capmaas_api::keys::{LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE};
use capmaas_api::{
    MaasCluster, MaasDNSRecord, MaasDNSRecordStatus, MaasMachine, MaasMachineStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A MaasMachine of `cluster` with the given `(type, address)` pairs in status.
pub(crate) fn machine(name: &str, cluster: &str, cp: bool, addrs: &[(&str, &str)]) -> MaasMachine {
    let mut m: MaasMachine = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasMachine",
        "metadata": {"name": name, "namespace": "ns", "labels": {LABEL_CLUSTER_NAME: cluster}},
        "spec": {"minCPU": 1, "minMemory": 1024, "image": "ubuntu/jammy"}
    }))
    .unwrap();
    if cp {
        m.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_CONTROL_PLANE.into(), String::new());
    }
    let addresses = addrs
        .iter()
        .map(|(t, a)| {
            serde_json::from_value::<MachineAddress>(serde_json::json!({"type": t, "address": a}))
                .unwrap()
        })
        .collect();
    m.status = Some(MaasMachineStatus {
        addresses: Some(addresses),
        ..Default::default()
    });
    m
}

/// A MaasCluster `name` in `ns` owned by Cluster `cluster`.
pub(crate) fn maas_cluster(name: &str, cluster: &str, spec: &serde_json::Value) -> MaasCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasCluster",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "mc-uid",
            "generation": 1,
            "ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "name": cluster,
                "uid": "cluster-uid"
            }]
        },
        "spec": spec
    }))
    .unwrap()
}

/// `t` seconds after the epoch.
pub(crate) fn t(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}

/// A MaasDNSRecord `prod` with these spec addresses, status and generation.
pub(crate) fn record(
    spec_addresses: &[&str],
    status: Option<MaasDNSRecordStatus>,
    generation: i64,
) -> MaasDNSRecord {
    let mut r = MaasDNSRecord::new(
        "prod",
        capmaas_api::MaasDNSRecordSpec {
            name: "prod".into(),
            domain: "maas".into(),
            addresses: Some(spec_addresses.iter().map(|s| (*s).to_owned()).collect()),
            ttl: None,
            adopt_existing: None,
        },
    );
    r.metadata.generation = Some(generation);
    r.status = status;
    r
}

/// MaasCluster `prod-maas` owned by Cluster `prod`, with `spec`.
pub(crate) fn prod_maas_cluster(spec: &serde_json::Value) -> MaasCluster {
    maas_cluster("prod-maas", "prod", spec)
}

/// Cluster `prod` with `spec`.
pub(crate) fn prod_cluster(spec: capmaas_api::capi::ClusterSpec) -> capmaas_api::capi::Cluster {
    capmaas_api::capi::Cluster::new("prod", spec)
}

/// The endpoint plan of the MaasCluster `mc` of Cluster `prod` (default spec), with CAPMAAS's
/// `status.network.dnsName` when given.
pub(crate) fn plan_prod(
    mc: &MaasCluster,
    status_dns_name: Option<&str>,
) -> crate::decide::EndpointPlan {
    crate::decide::plan_endpoint(
        "prod",
        &mc.spec,
        status_dns_name,
        &prod_cluster(capmaas_api::capi::ClusterSpec::default()),
    )
    .unwrap()
}
