use super::*;
use crate::fixtures::{maas_cluster, machine};
use capmaas_api::capi::{ClusterSpec, ContractObjectReference};
use capmaas_runtime::controller::filled_store;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn store_with(objects: Vec<MaasCluster>) -> Store<MaasCluster> {
    filled_store(objects)
}

#[test]
fn control_plane_and_deleting_machines_wake_their_cluster() {
    let mut other_ns = maas_cluster(
        "prod-maas",
        "prod",
        &serde_json::json!({"dnsDomain": "maas"}),
    );
    other_ns.metadata.namespace = Some("elsewhere".into());
    let store = store_with(vec![
        maas_cluster(
            "prod-maas",
            "prod",
            &serde_json::json!({"dnsDomain": "maas"}),
        ),
        maas_cluster("dev-maas", "dev", &serde_json::json!({"dnsDomain": "maas"})),
        other_ns,
    ]);
    let cp = machine("cp-0", "prod", true, &[]);
    assert_eq!(
        map_machine(&store, &cp),
        vec![ObjectRef::new("prod-maas").within("ns")]
    );
    let mut worker = machine("w-0", "prod", false, &[]);
    assert!(
        map_machine(&store, &worker).is_empty(),
        "a live worker does not matter"
    );
    worker.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(
        map_machine(&store, &worker).len(),
        1,
        "a deleting one may unblock deletion"
    );
    assert!(map_machine(&store, &machine("cp-x", "unknown", true, &[])).is_empty());
}

#[test]
fn cluster_wakes_the_maas_cluster_it_references() {
    let mut cluster = Cluster::new(
        "prod",
        ClusterSpec {
            infrastructure_ref: Some(ContractObjectReference {
                api_group: capmaas_api::GROUP.into(),
                kind: "MaasCluster".into(),
                name: "prod-maas".into(),
            }),
            ..ClusterSpec::default()
        },
    );
    assert_eq!(map_cluster(&cluster), None, "no namespace");
    cluster.metadata.namespace = Some("ns".into());
    assert_eq!(
        map_cluster(&cluster),
        Some(ObjectRef::new("prod-maas").within("ns"))
    );
}

#[test]
fn a_cluster_status_rewrite_wakes_nobody() {
    let mut cluster: Cluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {},
    }))
    .expect("a Cluster");
    let before = cluster_change(&cluster);
    cluster.metadata.resource_version = Some("12".into());
    assert_eq!(before, cluster_change(&cluster));
    cluster.metadata.generation = Some(2);
    assert_ne!(before, cluster_change(&cluster));
}
