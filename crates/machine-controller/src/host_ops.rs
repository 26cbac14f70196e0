//! Writes to MaasHosts: every one a read-modify-replace under the object's resourceVersion, so
//! a concurrent writer (another machine, the gateway) makes it fail with 409 and we look again.

use capmaas_api::capi::Machine;
use capmaas_api::common::ConsumerReference;
use capmaas_api::conditions::reasons;
use capmaas_api::host::HostProvisioning;
use capmaas_api::{MaasData, MaasHost, MaasMachine, keys};
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::trace_context;
use kube::api::PostParams;
use kube::{Api, ResourceExt};

use crate::choose::{self, HostRequest};
use crate::context::Ctx;
use crate::decide::bootstrap_secret;
use crate::error::{Result, is_conflict};
use crate::status::{claimed_by, consumer_ref, provisioning_request};

/// The deployment request (`spec.provisioning`) for `host`, when it can be made now: the
/// bootstrap data is there and, with a data template, the machine's data is rendered. The one
/// builder of the request, whichever write carries it: the claim (nothing is rendered yet
/// then, so only without a data template: one host write and one gateway wake-up fewer per
/// machine) or the `RequestDeployment` step.
///
/// `vm_hosts`: the cluster's hosts become LXD VM hosts ([`Ctx::registers_vm_hosts`], looked up
/// by the caller; never for a composed VM, [`registers_vm_host`]).
pub fn deployment_request(
    mm: &MaasMachine,
    machine: Option<&Machine>,
    host: &MaasHost,
    rendered: Option<&MaasData>,
    vm_hosts: bool,
) -> Option<HostProvisioning> {
    if mm.spec.data_template.is_some() && rendered.is_none() {
        return None;
    }
    let user_data = bootstrap_secret(mm, machine?)?;
    Some(provisioning_request(
        mm, user_data, host, rendered, vm_hosts,
    ))
}

/// Whether the deployment of `host` for a machine of `cluster` registers it as an LXD VM host:
/// the cluster's MaasCluster asks for it (`spec.lxdConfig.enabled`) and `host` is no composed
/// VM (a VM is never made a VM host).
pub fn registers_vm_host(
    ctx: &Ctx,
    cluster: Option<&capmaas_api::capi::Cluster>,
    host: &MaasHost,
) -> bool {
    !crate::vm::is_composed_vm(host) && ctx.registers_vm_hosts(cluster)
}

/// The Event of a deployment request, whichever write carried it.
pub async fn announce_deployment(ctx: &Ctx, mm: &MaasMachine, host: &str) {
    let note = format!(
        "deployment of host {host} with image {} requested",
        mm.spec.image
    );
    ctx.base
        .events
        .normal(mm, reasons::MACHINE_DEPLOY_STARTED, &note)
        .await;
}

/// Half a second to one and a half, so machines that lost the same race do not retry in
/// lock-step.
pub fn retry_delay() -> std::time::Duration {
    std::time::Duration::from_millis(500 + fastrand::u64(0..1000))
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

/// What a host must still be, on the fresh read, for a claim of it to be written.
#[derive(Debug, Clone, Copy)]
pub enum Fit<'a> {
    /// Free and fitting the machine's request: the bare-metal choice ([`choose::exclusion`]).
    Request(&'a HostRequest),
    /// The VM composed for the machine: labelled with VM host `composed_on` and `hostname`,
    /// free and `Available` ([`crate::vm::vm_claim_fits`]).
    Vm {
        /// Name of the VM host's MaasHost.
        composed_on: &'a str,
        /// The VM's hostname.
        hostname: &'a str,
    },
}

impl Fit<'_> {
    /// Whether `h` may be claimed at `now`.
    pub fn admits(&self, h: &MaasHost, now: jiff::Timestamp) -> bool {
        match self {
            Self::Request(request) => choose::exclusion(request, h, now).is_none(),
            Self::Vm {
                composed_on,
                hostname,
            } => crate::vm::vm_claim_fits(h, composed_on, hostname),
        }
    }
}

/// Claims `host` for `mm`: sets `consumerRef` (and drops a reservation the request may take)
/// under the resourceVersion of a fresh read that still shows the host free and fitting.
///
/// When the deployment can be requested at once ([`deployment_request`] with the CAPI
/// `machine`), the request goes in the same write.
pub async fn claim(
    ctx: &Ctx,
    mm: &MaasMachine,
    namespace: &str,
    host: &str,
    fit: Fit<'_>,
    machine: Option<&Machine>,
    vm_hosts: bool,
) -> Result<Claim> {
    let consumer = consumer_ref(mm, namespace).ok_or(Failed::missing("name or uid"))?;
    let now = jiff::Timestamp::now();
    let written = update_host(ctx, namespace, host, "claiming", |h| {
        if claimed_by(h, mm) || !fit.admits(h, now) {
            return Mutation::Keep;
        }
        mark_claimed(h, mm, &consumer, machine, vm_hosts);
        Mutation::Write
    })
    .await?;
    Ok(match written {
        Some(h) if claimed_by(&h, mm) => Claim::Won(Box::new(h)),
        _ => Claim::Lost,
    })
}

/// What a claim changes on a host: `consumer` holds it, a reservation it may take is used up,
/// the gateway's finalizer is put on ([`hold_for_release`]), and the deployment request goes
/// along when it can be made now ([`deployment_request`]).
pub fn mark_claimed(
    h: &mut MaasHost,
    mm: &MaasMachine,
    consumer: &ConsumerReference,
    machine: Option<&Machine>,
    vm_hosts: bool,
) {
    h.spec.consumer_ref = Some(consumer.clone());
    hold_for_release(h);
    h.spec.reservation = None;
    h.labels_mut().remove(keys::LABEL_NODE_REUSE);
    if let Some(request) = deployment_request(mm, machine, h, None, vm_hosts) {
        h.spec.provisioning = Some(request);
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
        hold_for_release(h);
        Mutation::Write
    })
    .await?;
    Ok(match written {
        Some(h) if claimed_by(&h, mm) => Claim::Won(Box::new(h)),
        _ => Claim::Lost,
    })
}

/// Puts the gateway's MaasHost finalizer on a host being claimed, in the claim's own write.
///
/// The gateway puts it on a claimed host before it asks MAAS anything and takes it off once the
/// server is given back (`maas-client`'s `host::finalizer`). Written with the claim, it costs no
/// write of its own: one API write less per provisioned machine. The gateway still adds it to a
/// claimed host that lacks it (claimed by an earlier version, or moved here). A host being
/// deleted takes no new finalizer (the API server refuses it).
fn hold_for_release(h: &mut MaasHost) {
    if h.metadata.deletion_timestamp.is_some() {
        return;
    }
    let finalizers = h.finalizers_mut();
    if !finalizers.iter().any(|f| f == keys::FINALIZER_MAAS_HOST) {
        finalizers.push(keys::FINALIZER_MAAS_HOST.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{maas_machine, machine, unclaimed_host};

    #[test]
    fn a_claim_puts_the_gateways_finalizer_on_in_the_same_write_once() {
        let mm = maas_machine("mm-0");
        let consumer = consumer_ref(&mm, "default").unwrap();
        let mut host = unclaimed_host("host-0");
        host.finalizers_mut().push("someone.else/keep".into());
        mark_claimed(
            &mut host,
            &mm,
            &consumer,
            Some(&machine("m-0", Some("boot"))),
            false,
        );
        assert_eq!(host.spec.consumer_ref.as_ref(), Some(&consumer));
        assert_eq!(
            host.finalizers(),
            ["someone.else/keep", keys::FINALIZER_MAAS_HOST]
        );
        mark_claimed(&mut host, &mm, &consumer, None, false);
        assert_eq!(host.finalizers().len(), 2, "added once");
    }

    #[test]
    fn a_host_being_deleted_takes_no_new_finalizer() {
        let mut host = unclaimed_host("host-0");
        host.metadata.deletion_timestamp = Some(capmaas_runtime::status::now());
        hold_for_release(&mut host);
        assert!(host.finalizers().is_empty());
    }
}
