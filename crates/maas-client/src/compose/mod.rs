//! The composition controller: LXD VMs composed on VM hosts for `MaasHost.spec.vms`.
//!
//! machine-controller writes one `spec.vms` entry per LXD MaasMachine on the MaasHost of the
//! VM host it chose; this controller composes the VM in MAAS, records it in
//! `status.composedVMs` and creates the VM's MaasHost (named by the system id, labelled
//! [`capmaas_api::keys::LABEL_COMPOSED_ON`] and [`capmaas_api::keys::LABEL_VM_HOSTNAME`]),
//! which machine-controller then claims and deploys through the ordinary host flow. When an
//! entry leaves `spec.vms`, a VM never allocated is deleted in MAAS, its MaasHost deleted and
//! the record dropped; an allocated one is left to its release (MAAS deletes a composed
//! machine when it is released).
//!
//! `state` observes (the VM host, its VMs' MaasHosts from the cache, and MAAS only for the
//! entries not settled yet), `decide` takes the next step of each VM (pure), `act` carries the
//! steps out in order, each idempotent, so that a restart between any two of them ends with
//! one VM and one MaasHost. It is a controller of its own on the MaasHosts, woken by the host
//! watch ([`wake`]), so a composition never delays the VM host's own reconcile.

pub mod act;
pub mod decide;
pub mod refusals;
pub mod state;

use capmaas_api::MaasHost;
use capmaas_api::keys;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

/// The VM host MaasHost to reconcile when `host` changed: the host itself when it asks for
/// VMs or records some, the VM host it was composed on when it is a composed VM's host.
pub fn wake(host: &MaasHost) -> Option<ObjectRef<MaasHost>> {
    let namespace = host.namespace().unwrap_or_default();
    let wants = host.spec.vms.as_ref().is_some_and(|v| !v.is_empty())
        || host
            .status
            .as_ref()
            .and_then(|s| s.composed_vms.as_ref())
            .is_some_and(|v| !v.is_empty());
    if wants {
        return Some(ObjectRef::from_obj(host));
    }
    host.labels()
        .get(keys::LABEL_COMPOSED_ON)
        .map(|on| ObjectRef::new(on).within(&namespace))
}

/// The field manager of the composition's writes (the VM's MaasHost, the VM host's
/// `status.composedVMs` and `VMsComposed`): not the inventory's nor the host controller's, so
/// their applies, which do not carry these fields, never remove them.
pub fn field_manager(base: &str) -> String {
    format!("{base}-compose")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composed_hosts_wake_their_vm_host() {
        let spec = serde_json::from_value(serde_json::json!({"systemID": "vm1"})).unwrap();
        let mut vm = MaasHost::new("vm1", spec);
        vm.metadata.namespace = Some("ns".into());
        assert_eq!(wake(&vm), None);
        vm.labels_mut()
            .insert(keys::LABEL_COMPOSED_ON.into(), "lxd".into());
        assert_eq!(wake(&vm), Some(ObjectRef::new("lxd").within("ns")));
        assert_eq!(field_manager("maas-client"), "maas-client-compose");
    }
}
