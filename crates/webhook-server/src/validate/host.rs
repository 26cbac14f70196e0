//! MaasHost: a consumed host changes hands only through a release, and is never deleted from
//! under its consumer.
//!
//! machine-controller claims a host by writing `consumerRef` with a resourceVersion
//! precondition, so two claims never both succeed; this rule covers every other writer (a
//! person with `kubectl edit`, a GitOps tool, a buggy script): a consumerRef can be set when
//! there is none and cleared, but never switched from one consumer to another, which would leave
//! the first machine running on a server it no longer owns.

use capmaas_api::MaasHost;
use capmaas_api::common::ConsumerReference;

use capmaas_api::keys::LABEL_HOST_INVENTORY;
use kube::ResourceExt;

use super::{Lookups, Operation, Request, deleting_for_move};
use crate::field::{FieldPath, Verdict};
use capmaas_api::names::dns_label_problem;

/// MaasHost: consumer hand-over, tenancy of a consumer of another namespace, hostname syntax,
/// and no deletion while consumed.
pub(crate) fn maas_host(req: &Request<'_, MaasHost>, lookups: &dyn Lookups) -> Verdict {
    let mut v = Verdict::ok();
    let spec = FieldPath::root("spec");
    match (req.operation, req.object, req.old) {
        (Operation::Delete, _, Some(old)) => {
            if let Some(consumer) = &old.spec.consumer_ref
                && !deleting_for_move(&old.metadata)
            {
                v.forbidden(
                    &spec.child("consumerRef"),
                    format!(
                        "the host is consumed by {}; delete that {} first, which lets go of the \
                             server (deleting the host releases its server in MAAS under a \
                             running machine)",
                        describe(consumer),
                        consumer.kind
                    ),
                );
            }
        }
        (_, Some(host), old) => {
            if let Some(hostname) = host
                .spec
                .provisioning
                .as_ref()
                .and_then(|p| p.hostname.as_deref())
                && let Some(problem) = dns_label_problem(hostname)
            {
                v.invalid(
                    &spec.child("provisioning").child("hostname"),
                    hostname,
                    problem,
                );
            }
            let previous = old.and_then(|o| o.spec.consumer_ref.as_ref());
            if let Some(next) = &host.spec.consumer_ref
                && previous.is_none_or(|p| p.uid != next.uid || p.namespace != next.namespace)
            {
                tenancy(req.namespace, host, next, lookups, &spec, &mut v);
            }
            if let (Some(previous), Some(next)) = (previous, host.spec.consumer_ref.as_ref())
                && previous.uid != next.uid
            {
                v.forbidden(
                    &spec.child("consumerRef"),
                    format!(
                        "the host is consumed by {}; it must be released (consumerRef \
                             cleared) before {} can claim it",
                        describe(previous),
                        describe(next)
                    ),
                );
            }
        }
        _ => {}
    }
    v
}

/// A consumer of another namespace claims only through an inventory that admits its namespace
/// (the inventory's word, not the claimer's: a tenant cannot claim around the policy by
/// writing the consumerRef itself). Checked when the consumer is set, so closing an inventory
/// later leaves running claims alone.
fn tenancy(
    host_namespace: &str,
    host: &MaasHost,
    consumer: &ConsumerReference,
    lookups: &dyn Lookups,
    spec: &FieldPath,
    v: &mut Verdict,
) {
    let Some(consumer_ns) = consumer
        .namespace
        .as_deref()
        .filter(|ns| *ns != host_namespace)
    else {
        return;
    };
    let path = spec.child("consumerRef").child("namespace");
    let Some(inventory_name) = host.labels().get(LABEL_HOST_INVENTORY) else {
        v.forbidden(
            &path,
            format!(
                "host {host_namespace}/{} was not imported by a MaasInventory, so only \
                 machines of its own namespace may claim it, not namespace {consumer_ns}",
                host.name_any()
            ),
        );
        return;
    };
    let inventory = lookups.inventories().into_iter().find(|i| {
        i.metadata.namespace.as_deref() == Some(host_namespace)
            && i.metadata.name.as_deref() == Some(inventory_name.as_str())
    });
    if !inventory.as_ref().is_some_and(|i| i.admits(consumer_ns)) {
        v.forbidden(
            &path,
            format!(
                "MaasInventory {host_namespace}/{inventory_name}, which imported this host, does \
                 not admit claims from namespace {consumer_ns} (its spec.claimNamespaces)"
            ),
        );
    }
}

fn describe(consumer: &ConsumerReference) -> String {
    format!("{} {} (uid {})", consumer.kind, consumer.name, consumer.uid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::validate::{DELETE_FOR_MOVE, StaticLookups};

    fn host(consumer: Option<(&str, &str)>) -> MaasHost {
        let mut h = MaasHost::new(
            "h",
            serde_json::from_value(serde_json::json!({"systemID": "abc"})).unwrap(),
        );
        h.spec.consumer_ref = consumer.map(|(name, uid)| ConsumerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
            kind: "MaasMachine".into(),
            name: name.into(),
            uid: uid.into(),
            namespace: None,
        });
        h
    }

    fn request<'a>(
        op: Operation,
        new: Option<&'a MaasHost>,
        old: Option<&'a MaasHost>,
    ) -> Request<'a, MaasHost> {
        Request {
            operation: op,
            namespace: "ns",
            name: "h",
            object: new,
            old,
        }
    }

    fn check(req: &Request<'_, MaasHost>) -> Verdict {
        maas_host(req, &StaticLookups::default())
    }

    #[test]
    fn a_consumer_of_another_namespace_needs_an_inventory_that_admits_it() {
        let inventory = |claim: Option<capmaas_api::inventory::ClaimNamespaces>| {
            let mut inv: capmaas_api::MaasInventory = serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "MaasInventory",
                "metadata": {"name": "shared", "namespace": "ns"},
                "spec": {"resourcePool": "p"}
            }))
            .unwrap();
            inv.spec.claim_namespaces = claim;
            std::sync::Arc::new(inv)
        };
        let across = |h: &mut MaasHost, ns: &str| {
            h.spec.consumer_ref.as_mut().unwrap().namespace = Some(ns.into());
        };
        let (free, mut claimed) = (host(None), host(Some(("m1", "u1"))));
        across(&mut claimed, "team-a");
        let update = request(Operation::Update, Some(&claimed), Some(&free));
        let hand_made = check(&update);
        assert_eq!(
            hand_made.errors[0].path.as_str(),
            "spec.consumerRef.namespace"
        );
        claimed
            .labels_mut()
            .insert(LABEL_HOST_INVENTORY.into(), "shared".into());
        let update = request(Operation::Update, Some(&claimed), Some(&free));
        let closed = StaticLookups {
            inventories: vec![inventory(None)],
            ..StaticLookups::default()
        };
        let v = maas_host(&update, &closed);
        assert!(
            v.errors[0].to_string().contains(
                "MaasInventory ns/shared, which imported this host, does not admit claims from \
                 namespace team-a"
            ),
            "{:?}",
            v.errors
        );
        let open = StaticLookups {
            inventories: vec![inventory(Some(
                capmaas_api::inventory::ClaimNamespaces::all(),
            ))],
            ..StaticLookups::default()
        };
        assert!(maas_host(&update, &open).allowed());
        // A running claim stays valid when the inventory closes later.
        let unchanged = request(Operation::Update, Some(&claimed), Some(&claimed));
        assert!(maas_host(&unchanged, &closed).allowed());
    }

    #[test]
    fn a_consumer_is_never_switched_without_a_release() {
        let (free, a, b) = (
            host(None),
            host(Some(("m1", "u1"))),
            host(Some(("m2", "u2"))),
        );
        assert!(check(&request(Operation::Update, Some(&a), Some(&free))).allowed());
        assert!(check(&request(Operation::Update, Some(&free), Some(&a))).allowed());
        assert!(check(&request(Operation::Update, Some(&a), Some(&a))).allowed());
        let v = check(&request(Operation::Update, Some(&b), Some(&a)));
        assert!(v.errors[0].to_string().starts_with(
            "spec.consumerRef: Forbidden: the host is consumed by MaasMachine m1 (uid u1); it must be released"
        ));
    }

    #[test]
    fn a_consumed_host_is_deleted_only_by_clusterctl_move() {
        let free = host(None);
        assert!(check(&request(Operation::Delete, None, Some(&free))).allowed());
        let mut consumed = host(Some(("m1", "u1")));
        let v = check(&request(Operation::Delete, None, Some(&consumed)));
        assert_eq!(v.errors[0].path.as_str(), "spec.consumerRef");
        consumed
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(DELETE_FOR_MOVE.into(), String::new());
        assert!(check(&request(Operation::Delete, None, Some(&consumed))).allowed());
    }

    #[test]
    fn the_provisioning_hostname_is_a_dns_label() {
        let mut h = host(Some(("m1", "u1")));
        h.spec.provisioning = Some(
            serde_json::from_value(
                serde_json::json!({"image": "ubuntu/jammy", "hostname": "Node_1"}),
            )
            .unwrap(),
        );
        let v = check(&request(Operation::Create, Some(&h), None));
        assert_eq!(v.errors[0].path.as_str(), "spec.provisioning.hostname");
    }
}
