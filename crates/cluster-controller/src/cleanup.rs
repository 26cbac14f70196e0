//! Deleting a MaasCluster: machines first, then the DNS record, then the finalizer.

use capmaas_runtime::error::{Failed, failed};
use std::time::Duration;

use capmaas_api::keys::FINALIZER_MAAS_CLUSTER;
use capmaas_api::keys::LABEL_CLUSTER_NAME;
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasMachine};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::now;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use crate::context::Ctx;
use crate::decide::{DeletionStep, deletion_condition, deletion_step, owned_by};
use crate::error::Result;
use crate::prober::ClusterRef;
use crate::status::status_with;
use crate::writes::write_status;

/// Backstop while deletion waits for machines (their deletion also wakes us through the watch).
const DELETE_WAIT_MACHINES: Duration = Duration::from_secs(30);
/// Backstop while deletion waits for the gateway to remove the DNS record.
const DELETE_WAIT_RECORD: Duration = Duration::from_secs(10);

/// One step of deletion per pass (see [`crate::decide::deletion_step`]).
pub(crate) async fn cleanup(
    api: &Api<MaasCluster>,
    mc: &MaasCluster,
    key: &ClusterRef,
    cluster: Option<&str>,
    ctx: &Ctx,
) -> Result<Action> {
    ctx.prober.stop(key);
    let ns = mc.namespace().ok_or(Failed::missing("namespace"))?;
    let uid = mc.uid().ok_or(Failed::missing("uid"))?;
    let machines = match cluster {
        Some(c) => {
            Api::<MaasMachine>::namespaced(ctx.base.client.clone(), &ns)
                .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={c}")))
                .await
                .map_err(failed("list MaasMachines"))?
                .items
        }
        None => Vec::new(),
    };
    let records: Api<MaasDNSRecord> = Api::namespaced(ctx.base.client.clone(), &ns);
    let owned: Vec<MaasDNSRecord> = records
        .list(&ListParams::default())
        .await
        .map_err(failed("list MaasDNSRecords"))?
        .items
        .into_iter()
        .filter(|r| owned_by(r, &uid))
        .collect();
    let step = deletion_step(&machines, &owned);
    if let Some(condition) = deletion_condition(&step, mc.metadata.generation) {
        let status = status_with(mc.status.as_ref(), condition.clone(), &now());
        let changed = mc.status.as_ref() != Some(&status);
        write_status(api, mc, &status, ctx).await?;
        if changed {
            let reason = match step {
                DeletionStep::WaitForMachines(_) => "DeletionBlocked",
                _ => "DeletingDNSRecord",
            };
            ctx.base.events.normal(mc, reason, &condition.message).await;
        }
    }
    match step {
        DeletionStep::WaitForMachines(names) => {
            debug!(machines = ?names, "deletion waits for MaasMachines");
            Ok(Action::requeue(DELETE_WAIT_MACHINES))
        }
        DeletionStep::DeleteDnsRecords(names) => {
            for name in names {
                match records.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => info!(record = name, "MaasDNSRecord deleted"),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(failed("delete MaasDNSRecord")(e).into()),
                }
            }
            Ok(Action::requeue(DELETE_WAIT_RECORD))
        }
        DeletionStep::WaitForDnsRecords(_) => Ok(Action::requeue(DELETE_WAIT_RECORD)),
        DeletionStep::RemoveFinalizer => {
            finalizer::remove(api, mc, FINALIZER_MAAS_CLUSTER, &ctx.base.field_manager)
                .await
                .map_err(failed("updating the finalizer"))?;
            info!("MaasCluster cleaned up; finalizer removed");
            Ok(Action::await_change())
        }
    }
}
