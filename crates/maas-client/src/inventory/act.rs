//! The MaasInventory reconciler: one filtered MAAS list per inventory per sync interval,
//! hosts created/relabelled/deleted per [`plan_inventory_sync`] (a few API calls in flight),
//! changed hosts woken, and the inventory status written when its content changes
//! ([`super::status`]): an idle sync makes no API write at all.

use capmaas_runtime::error::failed;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::conditions as cond;
use capmaas_api::{MaasHost, MaasInventory, MaasInventoryStatus};
use capmaas_runtime::status::{apply_status, now};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::decide::{
    HostAction, ObjectVersion, imported_elsewhere_message, inventory_counts, plan_inventory_sync,
};
use super::schedule::{LastSync, next_sync_in};
use super::state::{Observed, observe};
use super::status::{failed_status, synced_status};
use crate::binding::{self, Bindings, Bound};
use crate::context::Gateway;
use crate::error::{Error, Result};

/// API calls on hosts and their bindings in flight during one sync. One at a time, an import
/// of thousands of machines takes minutes (two or three calls per machine, each waiting for
/// the API server); a few in flight use the API server's parallelism without flooding it (the
/// Kubernetes client has no rate limit of its own, and the host controller writes the new
/// hosts' status meanwhile).
const HOST_CALLS_IN_FLIGHT: usize = 8;

/// The interval between two syncs of `inventory`.
pub fn sync_interval(inventory: &MaasInventory, flag: Option<Duration>) -> Duration {
    flag.unwrap_or_else(|| {
        Duration::from_secs(
            u64::try_from(inventory.spec.sync_interval_seconds.max(1)).unwrap_or(30),
        )
    })
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
    let key = format!("{namespace}/{name}");
    let interval = sync_interval(inventory, gw.settings.inventory_sync_interval);
    if inventory.meta().deletion_timestamp.is_some() {
        gw.cache.forget_inventory(&key);
        gw.inventory_syncs.forget(&key);
        return Ok(Action::await_change());
    }
    let generation = inventory.metadata.generation;
    let uid = inventory.metadata.uid.clone();
    if let Some(wait) = next_sync_in(
        gw.inventory_syncs.last(&key).as_ref(),
        uid.as_deref(),
        generation,
        interval,
        Instant::now(),
    ) {
        // Woken early (our own status write, a label edit, a watch restart): the last sync
        // of this term is recent enough, as long as the cache still holds its machines.
        if gw.cache.is_synced(&key) {
            return Ok(Action::requeue(wait));
        }
    }
    let spec = &inventory.spec;
    let Observed {
        listed,
        undecoded,
        skipped,
        skipped_count,
        hosts,
        changed,
        sent,
    } = observe(inventory, gw, &key).await?;
    let actions = plan_inventory_sync(
        &listed,
        &undecoded,
        &hosts,
        &changed,
        spec.host_labels.as_ref(),
    );
    let api: Api<MaasHost> = Api::namespaced(gw.base.client.clone(), &namespace);
    // Made before they run (a stream mapping a closure over borrowed actions is not `Send`
    // enough for the controller's future).
    let calls: Vec<_> = actions
        .iter()
        .map(|action| execute(gw, &api, &namespace, action))
        .collect();
    let done: Vec<Result<Done>> = futures::stream::iter(calls)
        .buffer_unordered(HOST_CALLS_IN_FLIGHT)
        .collect()
        .await;
    let mut created = 0usize;
    let mut kept_changed = 0usize;
    let mut elsewhere = Vec::new();
    let mut failed = None;
    for outcome in done {
        match outcome {
            Ok(Done::Created) => created += 1,
            Ok(Done::Elsewhere { system_id, holder }) => elsewhere.push((system_id, holder)),
            Ok(Done::Kept) => kept_changed += 1,
            Ok(Done::Other) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if created > 0 {
        info!(namespace, inventory = %name, created, "imported hosts");
    }
    if let Some(e) = failed {
        return Err(e);
    }
    debug!(namespace, inventory = %name, machines = listed.len(), actions = actions.len(), kept_changed, "inventory synced");
    if let Some(message) = &skipped {
        warn!(namespace, inventory = %name, skipped = skipped_count, "{message}");
    }
    // The actions ran concurrently: named in a fixed order, or the message (and with it the
    // status) would change from one sync to the next by order alone.
    elsewhere.sort();
    let not_imported = imported_elsewhere_message(&elsewhere);
    let report = [skipped, not_imported]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    // Once per change of the report, not every interval: the condition keeps it.
    if !report.is_empty() && synced_message(inventory) != Some(report.as_str()) {
        let reason = if skipped_count == 0 {
            MACHINES_IMPORTED_ELSEWHERE
        } else {
            MACHINES_SKIPPED
        };
        gw.base.events.warning(inventory, reason, &report).await;
    }
    let transport = &gw.settings.transport;
    warn_of_plain_http(inventory, gw).await;
    let counts = inventory_counts(&listed, &undecoded, &hosts);
    if let Some(status) = synced_status(
        inventory.status.as_ref(),
        &counts,
        report,
        transport,
        generation,
        &now(),
    ) {
        write_status(inventory, gw, &status).await?;
    }
    gw.inventory_syncs.record(
        &key,
        LastSync {
            at: sent,
            uid,
            generation,
        },
    );
    Ok(Action::requeue(interval))
}

/// What one host action did, for the sync's log and report.
enum Done {
    /// A host was created.
    Created,
    /// The machine was not imported: another host holds it.
    Elsewhere { system_id: String, holder: String },
    /// A delete was refused: the host changed since the decision.
    Kept,
    /// Anything else.
    Other,
}

/// Carries out one action of the plan.
async fn execute(
    gw: &Gateway,
    api: &Api<MaasHost>,
    namespace: &str,
    action: &HostAction,
) -> Result<Done> {
    let manager = &gw.base.field_manager;
    match action {
        HostAction::Create {
            name: host,
            system_id,
            labels,
        } => {
            // Imported once in the whole cluster: the binding first, then the host.
            if let Some(holder) = imported_elsewhere(gw, system_id, namespace, host).await? {
                return Ok(Done::Elsewhere {
                    system_id: system_id.clone(),
                    holder,
                });
            }
            apply_host(api, manager, host, system_id, labels).await?;
            Ok(Done::Created)
        }
        HostAction::Relabel {
            name: host,
            system_id,
            labels,
        } => {
            apply_host(api, manager, host, system_id, labels).await?;
            gw.refresh_host(namespace, host);
            Ok(Done::Other)
        }
        HostAction::Refresh { name: host } | HostAction::Verify { name: host } => {
            gw.refresh_host(namespace, host);
            Ok(Done::Other)
        }
        HostAction::Delete {
            name: host,
            version,
        } => match delete_unchanged(api, host, version)
            .await
            .map_err(failed("delete host"))?
        {
            DeleteOutcome::Deleted => {
                info!(
                    namespace,
                    host, "deleted host whose machine left the inventory"
                );
                Ok(Done::Other)
            }
            DeleteOutcome::Changed => {
                debug!(
                    namespace,
                    host, "host changed since the sync's decision (claimed?): not deleted"
                );
                Ok(Done::Kept)
            }
            DeleteOutcome::Gone => Ok(Done::Other),
        },
    }
}

/// Warning Event reason: machines MAAS listed that do not decode were skipped.
pub const MACHINES_SKIPPED: &str = "MachinesSkipped";
/// Warning Event reason: machines of the listing already belong to a MaasHost elsewhere.
pub const MACHINES_IMPORTED_ELSEWHERE: &str = "MachinesImportedElsewhere";
/// Warning Event reason: the gateway reaches MAAS over plain http (once per inventory).
pub const INSECURE_MAAS_ENDPOINT: &str = "InsecureMAASEndpoint";

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
    let bound = match Bindings::of(gw).known_holder(system_id) {
        Some(holder) if holder != me => return Ok(Some(holder)),
        // Ours as far as the reflector knows: the API server confirms.
        Some(_) => Bindings::of(gw).acquire(system_id, namespace, host).await?,
        // None known, as for every machine of a first import: create it straight away.
        None => {
            Bindings::of(gw)
                .acquire_new(system_id, namespace, host)
                .await?
        }
    };
    Ok(match bound {
        Bound::Ours => None,
        Bound::TakenBy(holder) => Some(holder),
    })
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
    .map_err(failed("apply host"))?;
    Ok(())
}

/// The plain-http Warning, when this inventory's status does not say it yet.
async fn warn_of_plain_http(inventory: &MaasInventory, gw: &Gateway) {
    if let Some(warning) = gw.settings.transport.warning(inventory.status.as_ref()) {
        gw.base
            .events
            .warning(inventory, INSECURE_MAAS_ENDPOINT, &warning)
            .await;
    }
}

async fn write_failure(inventory: &MaasInventory, gw: &Gateway, error: &Error) -> Result<()> {
    warn_of_plain_http(inventory, gw).await;
    match failed_status(
        inventory.status.as_ref(),
        capmaas_runtime::error_chain(error),
        &gw.settings.transport,
        inventory.metadata.generation,
        &now(),
    ) {
        Some(status) => write_status(inventory, gw, &status).await,
        None => Ok(()),
    }
}

async fn write_status(
    inventory: &MaasInventory,
    gw: &Gateway,
    status: &MaasInventoryStatus,
) -> Result<()> {
    let api: Api<MaasInventory> = Api::namespaced(
        gw.base.client.clone(),
        &inventory.namespace().unwrap_or_default(),
    );
    apply_status(&api, &inventory.name_any(), &gw.base.field_manager, status).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_api::conditions::reasons;
    use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};

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
}
