//! Which changes wake which MaasMachineTemplate: pure mappers over the caches, and the filter
//! that lets through only the changes the template's shape ([`crate::capacity`]) reads.
//!
//! The MaasHost and MaasInventory watches are the MaasMachine controller's (one list and one
//! watch per kind for the whole binary); their events pass through a [`Changes`] filter, then a
//! host wakes the templates of the namespaces that may claim it, an inventory every template.
//! The gateway rewrites a host's status often (power, progress messages, refresh times) and
//! every claim and deployment changes it: none of that wakes a template.

use std::collections::HashMap;

use capmaas_api::host::ProvisioningState;
use capmaas_api::{MaasHost, MaasInventory, MaasMachineTemplate, keys};
use capmaas_runtime::controller::predicate_hash;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

/// Predicate of the templates: their spec (generation) and identity; the status is written by
/// this controller only.
pub fn template_change(template: &MaasMachineTemplate) -> Option<u64> {
    Some(predicate_hash((
        template.metadata.uid.as_deref(),
        template.metadata.generation,
    )))
}

/// What of a host a template's shape reads: its labels (`hostSelector`), the unhealthy mark,
/// deletion, the hardware, zone, pool and tags MAAS reports, and whether it is missing or
/// Broken. Not whether it is claimed, reserved or deployed.
pub fn host_shape(host: &MaasHost) -> u64 {
    let status = host.status.as_ref();
    let state = status.and_then(|s| s.provisioning_state);
    predicate_hash((
        host.metadata.labels.as_ref(),
        host.annotations()
            .contains_key(keys::ANNOTATION_HOST_UNHEALTHY),
        host.metadata.deletion_timestamp.is_some(),
        status.map(|s| {
            (
                s.cpu_count,
                s.memory_mib,
                s.storage_gib,
                s.architecture.as_deref(),
                s.zone.as_deref(),
                s.pool.as_deref(),
                s.tags.as_deref(),
                s.missing,
            )
        }),
        state == Some(ProvisioningState::Missing),
        state == Some(ProvisioningState::Broken),
    ))
}

/// What of an inventory decides which namespaces may claim its hosts: its spec.
pub fn inventory_scope(inventory: &MaasInventory) -> u64 {
    predicate_hash((
        inventory.metadata.uid.as_deref(),
        inventory.metadata.generation,
    ))
}

/// The last value seen of each object of kind `K` (one of the hashes above): a watch event
/// passes when the object appeared, went, or changed that value. Unlike
/// `WatchStreamExt::predicate_filter`, a deletion passes too.
#[derive(Debug)]
pub struct Changes<K: Resource<DynamicType = ()>> {
    seen: HashMap<ObjectRef<K>, u64>,
}

impl<K: Resource<DynamicType = ()>> Default for Changes<K> {
    fn default() -> Self {
        Self {
            seen: HashMap::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Changes<K> {
    /// Whether the event of `object` matters: `value` is its hash now, `present` whether the
    /// cache still holds it (`false`: deleted).
    pub fn changed(&mut self, object: &K, value: u64, present: bool) -> bool {
        let key = ObjectRef::from_obj(object);
        if present {
            self.seen.insert(key, value) != Some(value)
        } else {
            self.seen.remove(&key).is_some()
        }
    }
}

/// The templates a change of `host` may reshape: those of the host's namespace and of the
/// namespaces its inventory lets claim it.
pub fn templates_for_host(
    templates: &Store<MaasMachineTemplate>,
    inventories: &Store<MaasInventory>,
    host: &MaasHost,
) -> Vec<ObjectRef<MaasMachineTemplate>> {
    let Some(namespace) = host.namespace() else {
        return Vec::new();
    };
    let inventory = host
        .labels()
        .get(keys::LABEL_HOST_INVENTORY)
        .and_then(|name| inventories.get(&ObjectRef::new(name).within(&namespace)));
    let admission = inventory.as_ref().map(|inv| inv.admission());
    templates
        .state_filter(|t| {
            let ns = t.metadata.namespace.as_deref().unwrap_or_default();
            ns == namespace || admission.as_ref().is_some_and(|a| a.admits(ns))
        })
        .iter()
        .map(|t| ObjectRef::from_obj(t.as_ref()))
        .collect()
}

/// Every template: an inventory's change may open or close its hosts to any namespace.
pub fn every_template(
    templates: &Store<MaasMachineTemplate>,
) -> Vec<ObjectRef<MaasMachineTemplate>> {
    templates
        .state()
        .iter()
        .map(|t| ObjectRef::from_obj(t.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_api::host::MaasHostStatus;
    use capmaas_runtime::controller::filled_store;
    use serde_json::json;

    use crate::test_support::unclaimed_host;

    fn host(ns: &str, cpu: i32) -> MaasHost {
        let mut h = unclaimed_host("h1");
        h.metadata.namespace = Some(ns.into());
        h.status = Some(MaasHostStatus {
            cpu_count: Some(cpu),
            memory_mib: Some(8192),
            provisioning_state: Some(ProvisioningState::Available),
            ..MaasHostStatus::default()
        });
        h
    }

    fn template(ns: &str, name: &str) -> MaasMachineTemplate {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"minCPU": 1, "minMemory": 1024, "image": "ubuntu/jammy"}}}
        }))
        .unwrap()
    }

    #[test]
    fn only_what_the_shape_reads_passes_and_deletions_pass_too() {
        let mut changes = Changes::<MaasHost>::default();
        let h = host("a", 4);
        assert!(changes.changed(&h, host_shape(&h), true), "a new host");
        assert!(!changes.changed(&h, host_shape(&h), true), "the same again");
        let mut busy = h.clone();
        busy.spec.consumer_ref = Some(capmaas_api::common::ConsumerReference {
            api_version: "v".into(),
            kind: "MaasMachine".into(),
            name: "m".into(),
            uid: "u".into(),
            namespace: None,
        });
        if let Some(s) = busy.status.as_mut() {
            s.provisioning_state = Some(ProvisioningState::Deployed);
            s.status_message = Some("Deploying".into());
            s.power_state = Some(capmaas_api::host::PowerState::On);
        }
        assert!(
            !changes.changed(&busy, host_shape(&busy), true),
            "claims, deployments and progress do not reshape"
        );
        let bigger = host("a", 8);
        assert!(changes.changed(&bigger, host_shape(&bigger), true));
        let mut broken = bigger.clone();
        if let Some(s) = broken.status.as_mut() {
            s.provisioning_state = Some(ProvisioningState::Broken);
        }
        assert!(changes.changed(&broken, host_shape(&broken), true));
        assert!(
            changes.changed(&broken, host_shape(&broken), false),
            "deleted"
        );
        assert!(
            !changes.changed(&broken, host_shape(&broken), false),
            "once"
        );
    }

    #[test]
    fn a_host_wakes_the_templates_of_the_namespaces_that_may_claim_it() {
        let templates = filled_store([
            template("a", "t1"),
            template("a", "t2"),
            template("b", "t3"),
            template("c", "t4"),
        ]);
        let inventory: MaasInventory = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasInventory",
            "metadata": {"name": "pool", "namespace": "a"},
            "spec": {"resourcePool": "default", "claimNamespaces": {"names": ["b"]}}
        }))
        .unwrap();
        let inventories = filled_store([inventory]);
        let plain = host("a", 4);
        let mut names: Vec<String> = templates_for_host(&templates, &inventories, &plain)
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["t1", "t2"]);
        let mut imported = plain.clone();
        imported
            .labels_mut()
            .insert(keys::LABEL_HOST_INVENTORY.into(), "pool".into());
        let mut names: Vec<String> = templates_for_host(&templates, &inventories, &imported)
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["t1", "t2", "t3"]);
        assert_eq!(every_template(&templates).len(), 4);
    }

    #[test]
    fn templates_wake_on_their_spec_only() {
        let mut t = template("a", "t1");
        t.metadata.generation = Some(1);
        let before = template_change(&t);
        t.status = Some(capmaas_api::machine::MaasMachineTemplateStatus::default());
        assert_eq!(template_change(&t), before);
        t.metadata.generation = Some(2);
        assert_ne!(template_change(&t), before);
    }
}
