//! Names this controller writes or reads beyond `capmaas_api::keys`.

use capmaas_api::keys::reboot_annotation;

/// MaasHost annotation maas-client keeps while it carries out a reboot request; we only read it
/// (its values: `capmaas_api::reboot`).
pub const REBOOT_STATE: &str = capmaas_api::reboot::ANNOTATION_REBOOT_STATE;

/// Machine annotation by which an operator excludes a Machine from remediation (CAPI name).
pub const ANNOTATION_SKIP_REMEDIATION: &str = "cluster.x-k8s.io/skip-remediation";

/// MaasRemediation annotation: name of the Node the backups were taken from, so the Node can
/// be found again if the Machine's `status.nodeRef` is cleared while it is away.
pub const ANNOTATION_NODE_NAME_BACKUP: &str = "remediation.maas.cluster.x-k8s.io/node-name";

/// Node annotation put in the same patch as the out-of-service taint, value the MaasRemediation
/// UID: only a taint we put there is taken away again (an operator's stays).
pub const ANNOTATION_FENCED_BY: &str = "remediation.maas.cluster.x-k8s.io/fenced-by";

/// Taint that lets Kubernetes force-delete the pods of a node that is shut down.
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// Value of [`TAINT_OUT_OF_SERVICE`].
pub const TAINT_OUT_OF_SERVICE_VALUE: &str = "nodeshutdown";
/// Effect of [`TAINT_OUT_OF_SERVICE`].
pub const TAINT_OUT_OF_SERVICE_EFFECT: &str = "NoExecute";

/// CAPI Machine v1beta2 condition the MachineSet and KubeadmControlPlane read (with
/// `HealthCheckSucceeded=False`) to delete and replace a Machine
/// (`util/collections/machine_filters.go IsUnhealthyAndOwnerRemediated`, CAPI v1.14).
pub const CONDITION_OWNER_REMEDIATED: &str = "OwnerRemediated";
/// Reason the MachineHealthCheck itself uses for [`CONDITION_OWNER_REMEDIATED`] `False`
/// (`MachineOwnerRemediatedWaitingForRemediationReason`).
pub const REASON_WAITING_FOR_REMEDIATION: &str = "WaitingForRemediation";

/// The reboot request key of the MaasRemediation with `uid` on a MaasHost:
/// `reboot.maas.cluster.x-k8s.io/maasremediation-<uid>`. The UID (36 characters) keeps the
/// name part within the 63 characters Kubernetes allows, and a re-created remediation of the
/// same name never mistakes an old request for its own.
pub fn reboot_key(uid: &str) -> String {
    reboot_annotation(&format!("maasremediation-{uid}"))
}

/// The UID in a reboot request key made by [`reboot_key`], if it is one.
pub fn uid_of_reboot_key(key: &str) -> Option<&str> {
    key.strip_prefix(capmaas_api::keys::ANNOTATION_REBOOT_PREFIX)?
        .strip_prefix("maasremediation-")
        .filter(|uid| !uid.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reboot_keys_round_trip_and_fit_a_name() {
        let uid = "0f8e4c1a-1b2c-4d5e-8f90-123456789abc";
        let key = reboot_key(uid);
        assert_eq!(
            key,
            format!("reboot.maas.cluster.x-k8s.io/maasremediation-{uid}")
        );
        assert!(
            key.split_once('/')
                .is_some_and(|(_, name)| name.len() <= 63)
        );
        assert_eq!(uid_of_reboot_key(&key), Some(uid));
        assert_eq!(
            uid_of_reboot_key("reboot.maas.cluster.x-k8s.io/other"),
            None
        );
        assert_eq!(
            uid_of_reboot_key("reboot.maas.cluster.x-k8s.io/maasremediation-"),
            None
        );
        assert_eq!(uid_of_reboot_key("maas.cluster.x-k8s.io/unhealthy"), None);
    }
}
