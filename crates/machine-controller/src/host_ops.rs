//! Writes to MaasHosts: every one a read-modify-replace under the object's resourceVersion, so
//! a concurrent writer (another machine, the gateway) makes it fail with 409 and we look again.

use capmaas_api::capi::Machine;
use capmaas_api::common::{ConsumerReference, SecretKeyReference};
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::trace_context;
use kube::api::PostParams;
use kube::{Api, ResourceExt};

use crate::choose::{self, HostRequest};
use crate::context::Ctx;
use crate::decide::bootstrap_secret;
use crate::error::{Result, is_conflict};
use crate::status::{claimed_by, consumer_ref, provisioning_request};

/// The user data to send with the claim, when the deployment can be requested at once: the
/// bootstrap data is there and no data template has to be rendered for the host first.
pub fn deploy_with_claim(
    mm: &MaasMachine,
    machine: Option<&Machine>,
) -> Option<SecretKeyReference> {
    if mm.spec.data_template.is_some() {
        return None;
    }
    bootstrap_secret(mm, machine?)
}

/// Attempts for one host write when the host keeps changing under us (status updates by the
/// gateway also move its resourceVersion).
const WRITE_ATTEMPTS: usize = 5;

/// What a mutation decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Write the mutated host.
    Write,
    /// Leave the host as read.
    Keep,
}

/// Reads `namespace/name` fresh, lets `mutate` change it, and replaces it under its
/// resourceVersion; on 409 reads again and retries. `Ok(None)` when the host does not exist.
pub async fn update_host<F>(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
    what: &str,
    mut mutate: F,
) -> Result<Option<MaasHost>>
where
    F: FnMut(&mut MaasHost) -> Mutation,
{
    let api: Api<MaasHost> = Api::namespaced(ctx.base.client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PostParams::default()
    };
    for _ in 0..WRITE_ATTEMPTS {
        let Some(mut host) = api
            .get_opt(name)
            .await
            .map_err(failed(format!("reading host {name}")))?
        else {
            return Ok(None);
        };
        if mutate(&mut host) == Mutation::Keep {
            return Ok(Some(host));
        }
        // The gateway's work on this request joins the current trace (same write, no extra).
        trace_context::stamp(&mut host.metadata);
        match api.replace(name, &params, &host).await {
            Ok(written) => {
                ctx.host_writes.remember(&written, &written.spec);
                return Ok(Some(written));
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(failed(format!("{what} on host {name}"))(e).into()),
        }
    }
    Err(Failed::conflict(format!("{what} on host {name}")).into())
}

/// Outcome of a claim attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The host is ours now (or already was).
    Won(Box<MaasHost>),
    /// Someone else holds it, or it no longer fits.
    Lost,
}

/// Claims `host` for `mm`: sets `consumerRef` (and drops a reservation the request may take)
/// under the resourceVersion of a fresh read that still shows the host free and fitting.
///
/// With `deploy` (the machine's user data, when nothing else has to be prepared for the
/// deployment, see [`deploy_with_claim`]), the deployment request goes in the same write:
/// one host write and one gateway wake-up fewer per machine.
pub async fn claim(
    ctx: &Ctx,
    mm: &MaasMachine,
    namespace: &str,
    host: &str,
    request: &HostRequest,
    deploy: Option<&SecretKeyReference>,
) -> Result<Claim> {
    let consumer = consumer_ref(mm, namespace).ok_or(Failed::missing("name or uid"))?;
    let now = jiff::Timestamp::now();
    let written = update_host(ctx, namespace, host, "claiming", |h| {
        if claimed_by(h, mm) || choose::exclusion(request, h, now).is_some() {
            return Mutation::Keep;
        }
        mark_claimed(h, mm, &consumer, deploy);
        Mutation::Write
    })
    .await?;
    Ok(match written {
        Some(h) if claimed_by(&h, mm) => Claim::Won(Box::new(h)),
        _ => Claim::Lost,
    })
}

/// What a claim changes on a host: `consumer` holds it, a reservation it may take is used up,
/// and with `deploy` the deployment request goes along ([`claim`]).
pub fn mark_claimed(
    h: &mut MaasHost,
    mm: &MaasMachine,
    consumer: &ConsumerReference,
    deploy: Option<&SecretKeyReference>,
) {
    h.spec.consumer_ref = Some(consumer.clone());
    h.spec.reservation = None;
    h.labels_mut().remove(keys::LABEL_NODE_REUSE);
    if let Some(user_data) = deploy {
        h.spec.provisioning = Some(provisioning_request(mm, user_data.clone(), h, None));
    }
}

/// Claims `host` again for `mm`, whose `spec.systemID` names the host's machine: only while
/// nobody holds the host (whatever its state: it is deployed for this very machine), under the
/// resourceVersion of a fresh read.
pub async fn reclaim(ctx: &Ctx, mm: &MaasMachine, namespace: &str, host: &str) -> Result<Claim> {
    let consumer = consumer_ref(mm, namespace).ok_or(Failed::missing("name or uid"))?;
    let system_id = mm.spec.system_id.clone();
    let written = update_host(ctx, namespace, host, "claiming again", |h| {
        if claimed_by(h, mm)
            || h.spec.consumer_ref.is_some()
            || system_id.as_deref() != Some(h.spec.system_id.as_str())
        {
            return Mutation::Keep;
        }
        h.spec.consumer_ref = Some(consumer.clone());
        Mutation::Write
    })
    .await?;
    Ok(match written {
        Some(h) if claimed_by(&h, mm) => Claim::Won(Box::new(h)),
        _ => Claim::Lost,
    })
}
