//! What a composition reconcile decides from: the VM host MaasHost, its VMs' MaasHosts (from
//! the host cache) and, for the VMs not settled yet only, what MAAS shows of them (one read
//! each: by system id when recorded, else by hostname). A settled VM host costs no MAAS call.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use capmaas_api::MaasHost;
use capmaas_api::keys;
use capmaas_api::lxd::VmRequest;
use kube::ResourceExt;
use maas_api_client::{MaasError, Machine, MachineFilter};

use super::decide::{Lookup, Record, VmFacts, VmHostObject, needs_lookup};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::inventory::decide::ObjectVersion;

/// One VM host MaasHost and everything known of its VMs.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The VMs, by hostname.
    pub vms: Vec<VmFacts>,
    /// The machines MAAS showed, by hostname (the labels of a VM's MaasHost come from them).
    pub machines: BTreeMap<String, Machine>,
    /// The `spec.vms` entries, by hostname.
    pub requests: BTreeMap<String, VmRequest>,
}

/// The `spec.vms` entries and `status.composedVMs` records of `host`, by hostname.
fn entries_and_records(
    host: &MaasHost,
) -> (
    BTreeMap<String, VmRequest>,
    BTreeMap<String, Option<String>>,
) {
    let requests = host
        .spec
        .vms
        .iter()
        .flatten()
        .map(|v| (v.hostname.clone(), v.clone()))
        .collect();
    let records = host
        .status
        .as_ref()
        .and_then(|s| s.composed_vms.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (r.hostname.clone(), r.system_id.clone()))
        .collect();
    (requests, records)
}

/// The MaasHosts of the VMs composed on `host`, by hostname, from the host cache.
pub fn vm_hosts_of(gw: &Gateway, host: &MaasHost) -> HashMap<String, VmHostObject> {
    let namespace = host.namespace().unwrap_or_default();
    let name = host.name_any();
    gw.hosts
        .state()
        .into_iter()
        .filter(|h| h.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|h| h.labels().get(keys::LABEL_COMPOSED_ON) == Some(&name))
        .filter_map(|h| {
            let hostname = h.labels().get(keys::LABEL_VM_HOSTNAME)?.clone();
            Some((
                hostname,
                VmHostObject {
                    name: h.name_any(),
                    consumed: h.spec.consumer_ref.is_some(),
                    version: ObjectVersion {
                        uid: h.metadata.uid.clone(),
                        resource_version: h.metadata.resource_version.clone(),
                    },
                },
            ))
        })
        .collect()
}

/// Observes `host`; `created` names the VM MaasHosts this reconcile already applied (the
/// cache may not show them yet).
pub async fn observe(
    gw: &Gateway,
    host: &MaasHost,
    created: &BTreeMap<String, String>,
) -> Result<Observed> {
    let (requests, records) = entries_and_records(host);
    let mut hosts = vm_hosts_of(gw, host);
    for (hostname, name) in created {
        hosts
            .entry(hostname.clone())
            .or_insert_with(|| VmHostObject {
                name: name.clone(),
                consumed: false,
                version: ObjectVersion::default(),
            });
    }
    let hostnames: BTreeSet<&String> = requests.keys().chain(records.keys()).collect();
    let mut vms = Vec::new();
    let mut machines = BTreeMap::new();
    for hostname in hostnames {
        let wanted = requests.contains_key(hostname);
        let record = records
            .get(hostname)
            .cloned()
            .map_or(Record::Absent, Record::of);
        let vm_host = hosts.remove(hostname);
        let machine = if needs_lookup(wanted, &record, vm_host.is_some()) {
            let found = look_up(gw, hostname, record.system_id()).await?;
            let lookup = Lookup::of(found.as_ref());
            if let Some(m) = found {
                machines.insert(hostname.clone(), m);
            }
            lookup
        } else {
            Lookup::NotLooked
        };
        vms.push(VmFacts {
            hostname: hostname.clone(),
            wanted,
            record,
            machine,
            host: vm_host,
        });
    }
    Ok(Observed {
        vms,
        machines,
        requests,
    })
}

/// The machine of VM `hostname`: read by `system_id` when recorded, else listed by hostname.
pub async fn look_up(
    gw: &Gateway,
    hostname: &str,
    system_id: Option<&str>,
) -> Result<Option<Machine>> {
    if let Some(system_id) = system_id {
        return match gw.maas.get_machine(system_id).await {
            Ok(found) => Ok(Some(found.value)),
            Err(MaasError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::maas("read composed VM")(e)),
        };
    }
    let listed = gw
        .maas
        .list_machines(&MachineFilter::new().hostname(hostname))
        .await
        .map_err(Error::maas("find composed VM"))?;
    Ok(listed.value.into_iter().find(|m| m.hostname == hostname))
}
