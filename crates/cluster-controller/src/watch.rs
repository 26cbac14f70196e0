//! Which changes of other objects wake which MaasCluster: pure mappers over the cache, and the
//! predicate that keeps a Cluster's status rewrites (CAPI updates it as every machine comes up)
//! from waking its MaasCluster.

use capmaas_api::capi::Cluster;
use capmaas_api::keys::{LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE};
use capmaas_api::{MaasCluster, MaasMachine};
use capmaas_runtime::controller::predicate_hash;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::decide::owner_cluster_name;

/// Predicate of the Clusters: what a MaasCluster decides on is in the spec (pause, endpoint,
/// infrastructure reference: the generation), the annotations and the deletion.
pub fn cluster_change(cluster: &Cluster) -> Option<u64> {
    Some(predicate_hash((
        cluster.metadata.uid.as_deref(),
        cluster.metadata.generation,
        cluster.metadata.annotations.as_ref(),
        cluster.metadata.deletion_timestamp.is_some(),
    )))
}

/// A Cluster wakes the MaasCluster its `infrastructureRef` names (pause changes, endpoint).
pub fn map_cluster(cluster: &Cluster) -> Option<ObjectRef<MaasCluster>> {
    let ns = cluster.namespace()?;
    Some(ObjectRef::new(cluster.maas_cluster_name()?).within(&ns))
}

/// A control-plane MaasMachine (addresses for the DNS record), or any MaasMachine being deleted
/// (deletion of the cluster waits for them), wakes its cluster's MaasCluster.
pub fn map_machine(
    store: &Store<MaasCluster>,
    machine: &MaasMachine,
) -> Vec<ObjectRef<MaasCluster>> {
    let labels = machine.labels();
    let relevant =
        labels.contains_key(LABEL_CONTROL_PLANE) || machine.metadata.deletion_timestamp.is_some();
    let (Some(cluster), Some(ns)) = (labels.get(LABEL_CLUSTER_NAME), machine.namespace()) else {
        return Vec::new();
    };
    if !relevant {
        return Vec::new();
    }
    store
        .state_filter(|mc| {
            mc.namespace().as_deref() == Some(ns.as_str())
                && (owner_cluster_name(mc) == Some(cluster.as_str())
                    || mc.labels().get(LABEL_CLUSTER_NAME) == Some(cluster))
        })
        .iter()
        .map(|mc| ObjectRef::from_obj(mc.as_ref()))
        .collect()
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
