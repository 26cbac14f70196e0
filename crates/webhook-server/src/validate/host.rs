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

use super::{Operation, Request, deleting_for_move};
use crate::field::{FieldPath, Verdict};
use capmaas_api::names::dns_label_problem;

/// MaasHost: consumer hand-over, hostname syntax, and no deletion while consumed.
pub(crate) fn maas_host(req: &Request<'_, MaasHost>) -> Verdict {
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
                        "the host is consumed by {}; delete that {} first so the server is \
                             released in MAAS (a deleted host would leave it deployed with nobody \
                             to release it)",
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

fn describe(consumer: &ConsumerReference) -> String {
    format!("{} {} (uid {})", consumer.kind, consumer.name, consumer.uid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::validate::DELETE_FOR_MOVE;

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

    #[test]
    fn a_consumer_is_never_switched_without_a_release() {
        let (free, a, b) = (
            host(None),
            host(Some(("m1", "u1"))),
            host(Some(("m2", "u2"))),
        );
        assert!(maas_host(&request(Operation::Update, Some(&a), Some(&free))).allowed());
        assert!(maas_host(&request(Operation::Update, Some(&free), Some(&a))).allowed());
        assert!(maas_host(&request(Operation::Update, Some(&a), Some(&a))).allowed());
        let v = maas_host(&request(Operation::Update, Some(&b), Some(&a)));
        assert!(v.errors[0].to_string().starts_with(
            "spec.consumerRef: Forbidden: the host is consumed by MaasMachine m1 (uid u1); it must be released"
        ));
    }

    #[test]
    fn a_consumed_host_is_deleted_only_by_clusterctl_move() {
        let free = host(None);
        assert!(maas_host(&request(Operation::Delete, None, Some(&free))).allowed());
        let mut consumed = host(Some(("m1", "u1")));
        let v = maas_host(&request(Operation::Delete, None, Some(&consumed)));
        assert_eq!(v.errors[0].path.as_str(), "spec.consumerRef");
        consumed
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(DELETE_FOR_MOVE.into(), String::new());
        assert!(maas_host(&request(Operation::Delete, None, Some(&consumed))).allowed());
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
        let v = maas_host(&request(Operation::Create, Some(&h), None));
        assert_eq!(v.errors[0].path.as_str(), "spec.provisioning.hostname");
    }
}
