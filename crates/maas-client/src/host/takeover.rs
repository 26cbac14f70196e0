//! Taking over an allocation made without our identity: a server CAPMAAS allocated and
//! deployed (CAPMAAS gives MAAS no `agent_name`), now claimed by the MaasMachine that CAPMAAS
//! recorded it on, after switching providers in place.
//!
//! Only an allocation that every one of these shows to be that MaasMachine's is taken:
//! - its consumer recorded the system id before asking for the host
//!   (`spec.provisioning.adoptAllocation`, written by machine-controller when the MaasMachine's
//!   `spec.systemID` names this host's machine);
//! - MAAS shows it owned by the MAAS user of our key;
//! - it is allocated, deploying or deployed (nothing else can be taken as it is);
//! - it carries no annotation of another installation or of another host.
//!
//! It is taken as it is: no allocate, deploy, release or power operation. Its identity from
//! then on is the workload annotations (MAAS cannot change an allocation's `agent_name`),
//! written at once whatever `--maas-workload-annotations` says, and the allocation recorded
//! in the host's status with `takenOver`.

use maas_api_client::{Machine, MachineStatus};
use tracing::info;

use super::annotations::{HOST, INSTALLATION};
use super::run::Run;
use crate::binding;
use crate::error::{Error, Result};

/// Why an allocation without our identity may not be taken over; `None` when it may.
pub(super) fn refusal(
    machine: &Machine,
    asked: bool,
    maas_user: &str,
    installation: &str,
    holder: &str,
) -> Option<String> {
    if !asked {
        return Some(format!(
            "not allocated with our agent_name ({}), and no MaasMachine records it in spec.systemID",
            machine.status_name
        ));
    }
    let owner = machine.owner.as_deref().unwrap_or_default();
    if owner.is_empty() {
        return Some(format!("not allocated ({})", machine.status_name));
    }
    if owner != maas_user {
        return Some(format!(
            "allocated by MAAS user {owner:?}, not by this installation's user {maas_user:?}"
        ));
    }
    if !matches!(
        machine.status,
        MachineStatus::Allocated | MachineStatus::Deploying | MachineStatus::Deployed
    ) {
        return Some(format!(
            "allocated without our agent_name and {}: only an allocated, deploying or deployed machine is taken over",
            machine.status_name
        ));
    }
    let annotations = machine.annotations();
    if let Some(other) = annotations
        .get(INSTALLATION)
        .filter(|i| i.as_str() != installation)
    {
        return Some(format!("annotated for installation {other}"));
    }
    if let Some(other) = annotations.get(HOST).filter(|h| h.as_str() != holder) {
        return Some(format!("allocated for MaasHost {other}"));
    }
    None
}

impl Run<'_> {
    /// Takes the machine over when [`refusal`] finds no reason not to, giving it our identity
    /// (the workload annotations); else the machine is someone else's ([`Error::NotOurs`]).
    /// `self.machine` is a fresh read.
    pub(super) async fn take_over(&mut self, namespace: &str, name: &str) -> Result<()> {
        let not_ours = |reason: String| Error::NotOurs {
            system_id: self.system_id.clone(),
            reason,
        };
        let Some(machine) = self.machine.clone() else {
            return Err(not_ours("gone from MAAS".to_owned()));
        };
        let asked = self
            .host
            .spec
            .provisioning
            .as_ref()
            .and_then(|p| p.adopt_allocation)
            == Some(true);
        let maas_user = if asked {
            self.gw
                .maas_user()
                .await
                .map_err(Error::maas("ask MAAS who the key's user is"))?
                .to_owned()
        } else {
            String::new()
        };
        let holder = binding::holder_identity(namespace, name);
        if let Some(reason) = refusal(
            &machine,
            asked,
            &maas_user,
            &self.gw.settings.installation_id,
            &holder,
        ) {
            return Err(not_ours(reason));
        }
        let annotated = self
            .gw
            .maas
            .set_workload_annotations(&self.system_id, &self.facts.annotations)
            .await
            .map_err(Error::maas("set workload annotations"))?;
        self.seen(annotated);
        info!(system_id = %self.system_id, "took over an allocation made without our agent_name");
        let note = format!(
            "took over MAAS machine {} ({}), allocated by {maas_user} without an agent_name (CAPMAAS): no allocate, deploy, release or power operation",
            self.system_id, machine.status_name
        );
        self.gw
            .base
            .events
            .normal(self.host, "AllocationTakenOver", &note)
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(status: &str, owner: Option<&str>, annotations: &[(&str, &str)]) -> Machine {
        let annotations: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
            .collect();
        let code = match status {
            "Allocated" => 10,
            "Deploying" => 9,
            "Deployed" => 6,
            "Ready" => 4,
            "Failed deployment" => 11,
            _ => 0,
        };
        serde_json::from_value(serde_json::json!({
            "system_id": "abc123",
            "hostname": "node-1",
            "status": code,
            "status_name": status,
            "owner": owner,
            "owner_data": annotations,
            "workload_annotations": annotations,
        }))
        .unwrap()
    }

    const HOLDER: &str = "ns/host-1";

    fn check(m: &Machine, asked: bool) -> Option<String> {
        refusal(m, asked, "capi", "capmaas-t", HOLDER)
    }

    #[test]
    fn a_deployed_machine_of_our_user_recorded_by_its_maas_machine_is_taken() {
        for status in ["Allocated", "Deploying", "Deployed"] {
            assert_eq!(check(&machine(status, Some("capi"), &[]), true), None);
        }
        let ours = [(INSTALLATION, "capmaas-t"), (HOST, HOLDER)];
        assert_eq!(check(&machine("Deployed", Some("capi"), &ours), true), None);
    }

    #[test]
    fn nothing_is_taken_that_no_maas_machine_records() {
        let reason = check(&machine("Deployed", Some("capi"), &[]), false).unwrap();
        assert!(reason.contains("spec.systemID"), "{reason}");
    }

    #[test]
    fn another_users_allocation_is_never_taken() {
        let reason = check(&machine("Deployed", Some("bob"), &[]), true).unwrap();
        assert!(
            reason.contains("\"bob\"") && reason.contains("\"capi\""),
            "{reason}"
        );
    }

    #[test]
    fn a_free_or_failed_machine_is_not_taken_as_it_is() {
        assert!(check(&machine("Ready", None, &[]), true).is_some());
        let failed = check(&machine("Failed deployment", Some("capi"), &[]), true).unwrap();
        assert!(failed.contains("Failed deployment"), "{failed}");
    }

    #[test]
    fn an_allocation_annotated_for_another_installation_or_host_is_theirs() {
        let other_installation = machine("Deployed", Some("capi"), &[(INSTALLATION, "other")]);
        assert!(check(&other_installation, true).unwrap().contains("other"));
        let other_host = machine("Deployed", Some("capi"), &[(HOST, "ns/host-2")]);
        assert!(check(&other_host, true).unwrap().contains("ns/host-2"));
    }
}
