//! Deleting: clear the claim once the host is released, leaving a node-reuse reservation
//! when the machine's template asks for it and the cluster is not being deleted.

use capmaas_api::keys;
use capmaas_runtime::controller::Flow;
use kube::ResourceExt;

use crate::context::Ctx;
use crate::decide::Step;
use crate::error::Result;
use crate::host_ops::{self, Mutation};
use crate::state::{State, host_namespace, namespace, write_status};
use crate::status::{claimed_by, step_conditions};

/// Clears `consumerRef` (setting the reservation, if any) on the released host.
pub(crate) async fn release_host(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let Some(host) = state.host.as_ref() else {
        return Ok(Flow::Continue);
    };
    let (host_ns, name) = (host_namespace(host)?, host.name_any());
    let ns = namespace(&state.mm)?;
    let cluster_deleting = state
        .cluster
        .as_ref()
        .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
    let mut reservation = None;
    if let (false, Some(machine)) = (cluster_deleting, state.machine.as_ref())
        && let Some(target) = crate::reuse::resolve(&ctx.base.client, &state.mm, machine).await?
        && let Some(ttl) = crate::reuse::reuse_ttl(&ctx.base.client, &ns, &target).await?
    {
        reservation = Some(crate::reuse::reservation(
            target.owner,
            jiff::Timestamp::now(),
            ttl,
        ));
    }
    write_status(
        ctx,
        state,
        step_conditions(&Step::ReleaseHost, state.host.as_ref()),
        false,
    )
    .await?;
    let mm = state.mm.clone();
    host_ops::update_host(ctx, &host_ns, &name, "releasing the claim", |h| {
        if !claimed_by(h, &mm) {
            return Mutation::Keep;
        }
        h.spec.consumer_ref = None;
        h.spec.reservation.clone_from(&reservation);
        // A remediation's reboot request does not outlive the claim it was made under.
        h.annotations_mut()
            .retain(|k, _| !keys::is_reboot_annotation(k));
        match reservation
            .as_ref()
            .and_then(|r| crate::reuse::reuse_label_value(&r.owner))
        {
            Some(value) => h
                .labels_mut()
                .insert(keys::LABEL_NODE_REUSE.to_owned(), value),
            None => h.labels_mut().remove(keys::LABEL_NODE_REUSE),
        };
        Mutation::Write
    })
    .await?;
    if let Some(uid) = mm.uid() {
        ctx.claims.unmark(&ns, &name, &uid);
    }
    let note = match &reservation {
        Some(r) => format!(
            "released host {name}; reserved for {} {} until {}",
            r.owner.kind, r.owner.name, r.expires_at.0
        ),
        None => format!("released host {name}"),
    };
    ctx.base
        .events
        .normal(&mm, "SuccessfulRelease", &note)
        .await;
    state.host = None;
    Ok(Flow::Continue)
}
