//! MaasRemediation and MaasRemediationTemplate: limits a person should look at twice.
//!
//! The schema bounds `retryLimit` and `timeoutSeconds`; within the bounds, values that are
//! likely mistakes are warnings, because only a person knows how long their servers take.

use capmaas_api::remediation::RemediationStrategy;
use capmaas_api::{MaasRemediation, MaasRemediationTemplate};

use super::{Operation, Request};
use crate::field::{FieldPath, Verdict};

/// A power cycle through MAAS plus a boot and a kubelet start rarely fit in less.
const SHORT_ATTEMPT_SECONDS: i32 = 300;
/// More reboots than this rarely heal what the first few did not; replacing the machine does.
const MANY_ATTEMPTS: i32 = 5;

/// MaasRemediation: the strategy may not change once the controller started acting on it.
pub(crate) fn maas_remediation(req: &Request<'_, MaasRemediation>) -> Verdict {
    let mut v = Verdict::ok();
    let Some(remediation) = req.object else {
        return v;
    };
    let path = FieldPath::root("spec").child("strategy");
    strategy(&remediation.spec.strategy, &path, &mut v);
    if let (Operation::Update, Some(old)) = (req.operation, req.old) {
        let started = old.status.as_ref().is_some_and(|s| s.phase.is_some());
        if started && old.spec.strategy != remediation.spec.strategy {
            v.forbidden(
                &path,
                "immutable once remediation has started (status.phase is set): the attempts \
                 already made were counted against the old limits",
            );
        }
    }
    v
}

/// MaasRemediationTemplate: the strategy it stamps out.
pub(crate) fn maas_remediation_template(req: &Request<'_, MaasRemediationTemplate>) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(template) = req.object {
        let path = FieldPath::root("spec")
            .child("template")
            .child("spec")
            .child("strategy");
        strategy(&template.spec.template.spec.strategy, &path, &mut v);
    }
    v
}

fn strategy(strategy: &RemediationStrategy, path: &FieldPath, v: &mut Verdict) {
    if strategy.timeout_seconds < SHORT_ATTEMPT_SECONDS {
        v.warn(
            &path.child("timeoutSeconds"),
            format!(
                "{}s for power off, power on, boot and kubelet start is short for bare metal; an \
                 attempt that times out counts as failed",
                strategy.timeout_seconds
            ),
        );
    }
    if strategy.retry_limit > MANY_ATTEMPTS {
        v.warn(
            &path.child("retryLimit"),
            format!(
                "{} reboots keep an unhealthy machine in the cluster for up to {} minutes before \
                 it is replaced",
                strategy.retry_limit,
                i64::from(strategy.retry_limit) * i64::from(strategy.timeout_seconds) / 60
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use capmaas_api::remediation::{MaasRemediationStatus, RemediationPhase};

    fn remediation(retry: i32, timeout: i32) -> MaasRemediation {
        MaasRemediation::new(
            "r",
            serde_json::from_value(serde_json::json!({"strategy": {"type": "Reboot", "retryLimit": retry, "timeoutSeconds": timeout}}))
                .unwrap(),
        )
    }

    #[test]
    fn suspicious_limits_are_warnings() {
        let r = remediation(10, 120);
        let req = Request::create("ns", "r", &r);
        let v = maas_remediation(&req);
        assert!(v.allowed());
        assert_eq!(v.warnings.len(), 2);
        assert!(v.warnings[0].starts_with("spec.strategy.timeoutSeconds: 120s"));
        assert!(v.warnings[1].starts_with("spec.strategy.retryLimit: 10 reboots"));
    }

    #[test]
    fn the_strategy_is_frozen_once_remediation_started() {
        let mut old = remediation(2, 600);
        let new = remediation(3, 600);
        let check = |old: &MaasRemediation| {
            maas_remediation(&Request {
                operation: Operation::Update,
                namespace: "ns",
                name: "r",
                object: Some(&new),
                old: Some(old),
            })
        };
        assert!(check(&old).allowed());
        old.status = Some(MaasRemediationStatus {
            phase: Some(RemediationPhase::Running),
            ..MaasRemediationStatus::default()
        });
        let v = check(&old);
        assert_eq!(v.errors[0].path.as_str(), "spec.strategy");
    }
}
