//! `reconcile`: observe the MaasCluster's world, [`decide`] the pass, and do its I/O.

use capmaas_runtime::error::{Failed, failed};
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasCluster;
use capmaas_api::capi::{Cluster, ContractObjectReference};
use capmaas_api::keys::FINALIZER_MAAS_CLUSTER;
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::now;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use crate::apply::{Owner, apply};
use crate::cleanup::cleanup;
use crate::context::Ctx;
use crate::decide::{Observed, Step, decide, owner_cluster_name};
use crate::error::Result;
use crate::hosted::control_plane_ref;
use crate::status::{paused_condition, status_with};
use crate::writes::write_status;

/// Backstop while the owner Cluster named by the owner reference is not found.
const OWNER_MISSING_RETRY: Duration = Duration::from_secs(30);

/// Reconciles one MaasCluster (the function the kit runs).
pub async fn reconcile(mc: Arc<MaasCluster>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = mc.namespace().ok_or(Failed::missing("namespace"))?;
    let api: Api<MaasCluster> = Api::namespaced(ctx.base.client.clone(), &ns);
    let key = ObjectRef::from_obj(mc.as_ref());
    let cluster_name = owner_cluster_name(&mc).map(str::to_owned);
    let (cluster, control_plane_ref) = match &cluster_name {
        Some(name) => read_cluster(&ctx, &ns, name).await?,
        None => (None, None),
    };
    let step = decide(&Observed {
        maas_cluster: &mc,
        cluster: cluster.as_ref(),
    });
    debug!(?step, "step");
    match step {
        Step::AwaitChange(why) => {
            debug!(why, "nothing to do");
            Ok(Action::await_change())
        }
        Step::WaitForCluster => {
            info!(cluster = ?cluster_name, "owner Cluster not found yet");
            Ok(Action::requeue(OWNER_MISSING_RETRY))
        }
        Step::Pause(why) => {
            ctx.prober.stop(&key);
            let status = status_with(
                mc.status.as_ref(),
                paused_condition(Some(&why)).observed_generation(mc.metadata.generation),
                &now(),
            );
            write_status(&api, &mc, &status, &ctx).await?;
            debug!(reason = %why, "paused");
            Ok(Action::await_change())
        }
        Step::Cleanup => cleanup(&api, &mc, &key, cluster_name.as_deref(), &ctx).await,
        Step::MovedAway => {
            ctx.prober.stop(&key);
            finalizer::remove(&api, &mc, FINALIZER_MAAS_CLUSTER, &ctx.base.field_manager)
                .await
                .map_err(failed("updating the finalizer"))?;
            info!("MaasCluster moved by clusterctl; finalizer removed, MAAS left as it is");
            Ok(Action::await_change())
        }
        Step::AddFinalizer | Step::Apply => {
            let (Some(name), Some(cluster)) = (cluster_name, cluster) else {
                return Ok(Action::await_change());
            };
            let mc = if step == Step::AddFinalizer {
                finalizer::add(&api, &mc, FINALIZER_MAAS_CLUSTER, &ctx.base.field_manager)
                    .await
                    .map_err(failed("updating the finalizer"))?
            } else {
                mc.as_ref().clone()
            };
            let owner = Owner {
                name: &name,
                cluster: &cluster,
                control_plane_ref: control_plane_ref.as_ref(),
            };
            apply(&api, &mc, &key, &owner, &ctx).await
        }
    }
}

/// The owner Cluster, uncached, with its `spec.controlPlaneRef` when that names a kind.
async fn read_cluster(
    ctx: &Ctx,
    ns: &str,
    name: &str,
) -> Result<(Option<Cluster>, Option<ContractObjectReference>)> {
    let api: Api<Cluster> = Api::namespaced(ctx.base.client.clone(), ns);
    let cluster = api.get_opt(name).await.map_err(failed("get Cluster"))?;
    let control_plane_ref = cluster.as_ref().and_then(control_plane_ref);
    Ok((cluster, control_plane_ref))
}
