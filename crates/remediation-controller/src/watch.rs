//! Which changes of other objects wake which MaasRemediation: pure mappers over the cache.
//!
//! A MaasHost carrying our reboot request wakes the remediation that made it (the power state
//! the gateway reports); a Machine wakes the remediation of its name (pause, skip,
//! `nodeRef`); a Cluster wakes the remediations labelled with its name (pause).

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::{MaasHost, MaasRemediation, keys};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::keys::uid_of_reboot_key;

/// A host wakes every remediation whose reboot request it carries.
pub fn map_host(
    remediations: &Store<MaasRemediation>,
    host: &MaasHost,
) -> Vec<ObjectRef<MaasRemediation>> {
    let namespace = host.namespace();
    let uids: Vec<&str> = host
        .annotations()
        .keys()
        .filter_map(|k| uid_of_reboot_key(k))
        .collect();
    if uids.is_empty() {
        return Vec::new();
    }
    remediations
        .state_filter(|r| {
            r.namespace() == namespace && r.uid().is_some_and(|uid| uids.contains(&uid.as_str()))
        })
        .iter()
        .map(|r| ObjectRef::from_obj(r.as_ref()))
        .collect()
}

/// A Machine wakes the remediation of its name (CAPI names it after the Machine).
pub fn map_machine(machine: &Machine) -> Option<ObjectRef<MaasRemediation>> {
    Some(ObjectRef::new(&machine.name_any()).within(&machine.namespace()?))
}

/// A Cluster wakes every remediation of its namespace labelled with its name.
pub fn map_cluster(
    remediations: &Store<MaasRemediation>,
    cluster: &Cluster,
) -> Vec<ObjectRef<MaasRemediation>> {
    let namespace = cluster.namespace();
    let name = cluster.name_any();
    remediations
        .state_filter(|r| {
            r.namespace() == namespace && r.labels().get(keys::LABEL_CLUSTER_NAME) == Some(&name)
        })
        .iter()
        .map(|r| ObjectRef::from_obj(r.as_ref()))
        .collect()
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
