//! The MaasInventory reconciler: one filtered MAAS list per inventory per sync interval,
//! hosts created/relabelled/deleted per [`plan_inventory_sync`], changed hosts woken, counts
//! written to the inventory status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::{MaasHost, MaasInventory, MaasInventoryStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use capmaas_runtime::status::{apply_status, now};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::MachineFilter;
use serde_json::json;
use tracing::{debug, info, warn};

use super::plan::{
    ExistingHost, HostAction, ObjectVersion, Undecoded, imported_elsewhere_message,
    inventory_counts, plan_inventory_sync, skipped_message,
};
use crate::binding::{self, Bound};
use crate::context::Gateway;
use crate::error::{Error, Result};

/// The interval between two syncs of `inventory`.
pub fn sync_interval(inventory: &MaasInventory, flag: Option<Duration>) -> Duration {
    flag.unwrap_or_else(|| {
        Duration::from_secs(
            u64::try_from(inventory.spec.sync_interval_seconds.max(1)).unwrap_or(30),
        )
    })
}

/// How long until the next sync is due, or `None` if it is due now. A sync is due when the
/// spec changed since the last one, or the interval has passed.
pub fn next_sync_in(
    status: Option<&MaasInventoryStatus>,
    generation: Option<i64>,
    interval: Duration,
    now: jiff::Timestamp,
) -> Option<Duration> {
    let status = status?;
    if status.observed_generation != generation {
        return None;
    }
    let last = status.last_sync_time.as_ref()?.0;
    let elapsed = now.duration_since(last);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    interval.checked_sub(elapsed).filter(|d| !d.is_zero())
}

/// The host as the plan sees it, with the version a delete is conditioned on.
pub fn existing(host: &MaasHost) -> ExistingHost {
    let status = host.status.as_ref();
    ExistingHost {
        name: host.name_any(),
        system_id: host.spec.system_id.clone(),
        labels: host.labels().clone(),
        consumed: host.spec.consumer_ref.is_some(),
        missing: status.and_then(|s| s.missing).unwrap_or(false),
        reserved: host.spec.reservation.is_some(),
        allocated: status.is_some_and(|s| s.allocation.is_some()),
        version: ObjectVersion {
            uid: host.metadata.uid.clone(),
            resource_version: host.metadata.resource_version.clone(),
        },
    }
}

/// What a conditioned delete of a host did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The API server accepted the delete.
    Deleted,
    /// 409: the host changed since the decision (claimed, reserved, recreated); kept, and the
    /// next sync decides again.
    Changed,
    /// 404: already gone.
    Gone,
}

/// Deletes host `name` only if it is still the object `version` describes (uid and
/// resourceVersion preconditions): a claim written after the decision makes the API server
/// refuse the delete with a 409 ([`DeleteOutcome::Changed`]).
pub async fn delete_unchanged(
    api: &Api<MaasHost>,
    name: &str,
    version: &ObjectVersion,
) -> std::result::Result<DeleteOutcome, kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: version.uid.clone(),
            resource_version: version.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(DeleteOutcome::Deleted),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(DeleteOutcome::Changed),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(DeleteOutcome::Gone),
        Err(e) => Err(e),
    }
}

/// Reconciles one MaasInventory. A failed sync is also reported on the inventory
/// (`Synced=False`); the error itself goes to the kit's error policy (backoff, metrics).
pub async fn reconcile(inventory: Arc<MaasInventory>, gw: Arc<Gateway>) -> Result<Action> {
    let result = sync(&inventory, &gw).await;
    if let Err(e) = &result {
        // Best effort: the condition is for humans, the error drives the retry.
        let _ = write_failure(&inventory, &gw, e).await;
    }
    result
}

async fn sync(inventory: &MaasInventory, gw: &Gateway) -> Result<Action> {
    let namespace = inventory.namespace().unwrap_or_default();
    let name = inventory.name_any();
    let interval = sync_interval(inventory, gw.settings.inventory_sync_interval);
    if inventory.meta().deletion_timestamp.is_some() {
        gw.cache.forget_inventory(&format!("{namespace}/{name}"));
        return Ok(Action::await_change());
    }
    if let Some(wait) = next_sync_in(
        inventory.status.as_ref(),
        inventory.metadata.generation,
        interval,
        jiff::Timestamp::now(),
    ) {
        // Woken early (our own status write, a restart): the cache is still fresh enough,
        // unless it was lost with a restart.
        if gw.cache.is_synced(&format!("{namespace}/{name}")) {
            return Ok(Action::requeue(wait));
        }
    }
    let spec = &inventory.spec;
    let mut filter = MachineFilter::new().pool(spec.resource_pool.clone());
    for zone in spec.zones.iter().flatten() {
        filter = filter.zone(zone.clone());
    }
    for tag in spec.tags.iter().flatten() {
        filter = filter.tag(tag.clone());
    }
    let sent = Instant::now();
    // Lenient: a machine that does not decode is skipped and reported, the others sync.
    let listing = gw
        .maas
        .list_machines_lenient(&filter)
        .await
        .map_err(Error::maas("list machines"))?;
    let machines = listing.machines;
    let undecoded = Undecoded::from_skipped(&listing.skipped);
    let skipped = skipped_message(&listing.skipped);
    let hosts: Vec<ExistingHost> = gw
        .hosts_of(&namespace, &name)
        .iter()
        .map(|h| existing(h))
        .collect();
    // The cache holds what decoded: a host whose machine did not is unlisted there, so the host
    // controller reads that machine directly (and reports the decode error on the host).
    let changed: BTreeSet<String> = gw
        .cache
        .sync_inventory(&format!("{namespace}/{name}"), machines.clone(), sent)
        .into_iter()
        .collect();
    let actions = plan_inventory_sync(
        &name,
        &machines,
        &undecoded,
        &hosts,
        &changed,
        spec.host_labels.as_ref(),
    );
    let api: Api<MaasHost> = Api::namespaced(gw.kube.clone(), &namespace);
    let mut created = 0usize;
    let mut kept_changed = 0usize;
    let mut elsewhere = Vec::new();
    for action in &actions {
        match action {
            HostAction::Create {
                name: host,
                system_id,
                labels,
            } => {
                // Imported once in the whole cluster: the binding first, then the host.
                if let Some(holder) = imported_elsewhere(gw, system_id, &namespace, host).await? {
                    elsewhere.push((system_id.clone(), holder));
                    continue;
                }
                apply_host(&api, &gw.settings.field_manager, host, system_id, labels).await?;
                created += 1;
            }
            HostAction::Relabel { name: host, labels } => {
                let system_id = hosts
                    .iter()
                    .find(|h| &h.name == host)
                    .map_or_else(|| host.clone(), |h| h.system_id.clone());
                apply_host(&api, &gw.settings.field_manager, host, &system_id, labels).await?;
                gw.refresh_host(&namespace, host);
            }
            HostAction::Refresh { name: host } | HostAction::Verify { name: host } => {
                gw.refresh_host(&namespace, host);
            }
            HostAction::Delete {
                name: host,
                version,
            } => match delete_unchanged(&api, host, version)
                .await
                .map_err(Error::kube("delete host"))?
            {
                DeleteOutcome::Deleted => {
                    info!(
                        namespace,
                        host, "deleted host whose machine left the inventory"
                    );
                }
                DeleteOutcome::Changed => {
                    kept_changed += 1;
                    debug!(
                        namespace,
                        host, "host changed since the sync's decision (claimed?): not deleted"
                    );
                }
                DeleteOutcome::Gone => {}
            },
        }
    }
    if created > 0 {
        info!(namespace, inventory = %name, created, "imported hosts");
    }
    debug!(namespace, inventory = %name, machines = machines.len(), actions = actions.len(), kept_changed, "inventory synced");
    if let Some(message) = &skipped {
        warn!(namespace, inventory = %name, skipped = listing.skipped.len(), "{message}");
    }
    let not_imported = imported_elsewhere_message(&elsewhere);
    let report = [skipped, not_imported]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    // Once per change of the report, not every interval: the condition keeps it.
    if !report.is_empty() && synced_message(inventory) != Some(report.as_str()) {
        let reason = if listing.skipped.is_empty() {
            MACHINES_IMPORTED_ELSEWHERE
        } else {
            MACHINES_SKIPPED
        };
        gw.events.warning(inventory, reason, &report).await;
    }
    write_success(inventory, gw, &machines, &undecoded, &hosts, report).await?;
    Ok(Action::requeue(interval))
}

/// Warning Event reason: machines MAAS listed that do not decode were skipped.
pub const MACHINES_SKIPPED: &str = "MachinesSkipped";
/// Warning Event reason: machines of the listing already belong to a MaasHost elsewhere.
pub const MACHINES_IMPORTED_ELSEWHERE: &str = "MachinesImportedElsewhere";

/// The holder of `system_id` when another MaasHost already holds it, else `None` after taking
/// the binding for the host about to be created. The reflector answers for machines known to
/// be elsewhere (no API call per sync); the API server decides everything else.
async fn imported_elsewhere(
    gw: &Gateway,
    system_id: &str,
    namespace: &str,
    host: &str,
) -> Result<Option<String>> {
    let me = binding::holder_identity(namespace, host);
    if let Some(holder) = binding::known_holder(gw, system_id).filter(|h| *h != me) {
        return Ok(Some(holder));
    }
    Ok(
        match binding::acquire(gw, system_id, namespace, host).await? {
            Bound::Ours => None,
            Bound::TakenBy(holder) => Some(holder),
        },
    )
}

/// The `Synced` condition message of the last status write.
fn synced_message(inventory: &MaasInventory) -> Option<&str> {
    inventory
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == cond::SYNCED)
        .map(|c| c.message.as_str())
}

async fn apply_host(
    api: &Api<MaasHost>,
    manager: &str,
    name: &str,
    system_id: &str,
    labels: &BTreeMap<String, String>,
) -> Result<()> {
    let body = json!({
        "apiVersion": MaasHost::api_version(&()),
        "kind": MaasHost::kind(&()),
        "metadata": { "name": name, "labels": labels },
        "spec": { "systemID": system_id },
    });
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::kube("apply host"))?;
    Ok(())
}

async fn write_success(
    inventory: &MaasInventory,
    gw: &Gateway,
    machines: &[maas_api_client::Machine],
    undecoded: &Undecoded,
    hosts: &[ExistingHost],
    report: String,
) -> Result<()> {
    let counts = inventory_counts(machines, undecoded, hosts);
    let time = now();
    let mut conditions = inventory
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = inventory.metadata.generation;
    set_condition(
        &mut conditions,
        NewCondition::new(cond::SYNCED, ConditionStatus::True, reasons::RECONCILED)
            .message(report)
            .observed_generation(generation),
        &time,
    );
    let ready = summarize_ready(&conditions, &[cond::SYNCED], generation);
    set_condition(&mut conditions, ready, &time);
    let status = MaasInventoryStatus {
        host_count: Some(counts.hosts),
        available: Some(counts.available),
        consumed: Some(counts.consumed),
        provisioning: Some(counts.provisioning),
        deployed: Some(counts.deployed),
        missing: Some(counts.missing),
        failed: Some(counts.failed),
        last_sync_time: Some(time),
        observed_generation: generation,
        conditions: Some(conditions),
    };
    write_status(inventory, gw, &status).await
}

async fn write_failure(inventory: &MaasInventory, gw: &Gateway, error: &Error) -> Result<()> {
    let mut status = inventory.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.clone().unwrap_or_default();
    let time = now();
    let generation = inventory.metadata.generation;
    let changed = set_condition(
        &mut conditions,
        NewCondition::new(
            cond::SYNCED,
            ConditionStatus::False,
            reasons::MAAS_UNAVAILABLE,
        )
        .message(error.to_string())
        .observed_generation(generation),
        &time,
    );
    if !changed {
        return Ok(());
    }
    let ready = summarize_ready(&conditions, &[cond::SYNCED], generation);
    set_condition(&mut conditions, ready, &time);
    status.conditions = Some(conditions);
    write_status(inventory, gw, &status).await
}

async fn write_status(
    inventory: &MaasInventory,
    gw: &Gateway,
    status: &MaasInventoryStatus,
) -> Result<()> {
    let api: Api<MaasInventory> =
        Api::namespaced(gw.kube.clone(), &inventory.namespace().unwrap_or_default());
    apply_status(
        &api,
        &inventory.name_any(),
        &gw.settings.field_manager,
        status,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synced_message_is_read_from_the_last_status() {
        let spec = serde_json::from_value(json!({"resourcePool": "default"})).unwrap();
        let mut inventory = MaasInventory::new("inv", spec);
        assert_eq!(synced_message(&inventory), None);
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            NewCondition::new(cond::SYNCED, ConditionStatus::True, reasons::RECONCILED)
                .message("1 MAAS machine(s) skipped"),
            &now(),
        );
        inventory.status = Some(MaasInventoryStatus {
            conditions: Some(conditions),
            ..Default::default()
        });
        assert_eq!(
            synced_message(&inventory),
            Some("1 MAAS machine(s) skipped")
        );
    }

    #[test]
    fn sync_is_due_after_the_interval_or_a_spec_change() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let status = MaasInventoryStatus {
            last_sync_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0)),
            observed_generation: Some(2),
            ..Default::default()
        };
        let interval = Duration::from_secs(30);
        let later = |s: i64| t0.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        assert_eq!(
            next_sync_in(Some(&status), Some(2), interval, later(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            next_sync_in(Some(&status), Some(2), interval, later(30)),
            None
        );
        assert_eq!(
            next_sync_in(Some(&status), Some(3), interval, later(10)),
            None
        );
        assert_eq!(next_sync_in(None, Some(2), interval, later(10)), None);
    }
}
