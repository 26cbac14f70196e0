//! What one reconcile knows about a MaasMachine's world, how it is read, and the status write
//! every step shares. Below `act` and the step modules: it imports neither.

use capmaas_api::capi::{Cluster, Machine, is_capi_owner};
use capmaas_api::machine::MaasMachineStatus;
use capmaas_api::{MaasData, MaasDataClaim, MaasHost, MaasMachine, keys};
use capmaas_runtime::apply_status_at;
use capmaas_runtime::conditions::NewCondition;
use capmaas_runtime::error::{Failed, failed};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use crate::context::Ctx;
use crate::decide::Observed;
use crate::error::Result;
use crate::status::{claimed_by, host_facts_only, next_status, owned_status};

/// What one reconcile knows; updated from the API's answers after each write.
#[derive(Debug, Clone)]
pub struct State {
    /// The MaasMachine.
    pub mm: MaasMachine,
    /// Its owner Machine.
    pub machine: Option<Machine>,
    /// The Machine's Cluster.
    pub cluster: Option<Cluster>,
    /// The host claimed by the MaasMachine.
    pub host: Option<MaasHost>,
    /// The MaasDataClaim made for the MaasMachine (with `spec.dataTemplate`).
    pub data_claim: Option<MaasDataClaim>,
    /// The MaasData the claim records.
    pub data: Option<MaasData>,
    /// With `spec.systemID` set and no host claimed: the host of the namespace for that MAAS
    /// machine (from the cache), which the machine may claim again.
    pub system_host: Option<MaasHost>,
    /// An LXD machine: the VM host whose `spec.vms` holds its VM's entry ([`crate::vm`]).
    pub vm_host: Option<MaasHost>,
    /// The composed VM's MaasHost for that entry, once imported.
    pub vm: Option<MaasHost>,
    /// resourceVersions of the MaasMachine this reconcile saw replaced (by its writes or fresh
    /// reads), oldest first: all older than `mm` ([`capmaas_runtime::own_writes`]).
    pub superseded: Vec<String>,
}

/// The namespace of `mm` (always set on objects read from the API server).
pub fn namespace(mm: &MaasMachine) -> Result<String> {
    mm.namespace()
        .ok_or_else(|| Failed::missing("namespace").into())
}

/// The namespace of `host` (always set on objects read from the API server); another than its
/// machine's when an inventory admits claims from other namespaces.
pub fn host_namespace(host: &MaasHost) -> Result<String> {
    host.namespace()
        .ok_or_else(|| Failed::missing("namespace").into())
}

/// The MaasMachine API of `mm`'s namespace.
pub fn mm_api(ctx: &Ctx, mm: &MaasMachine) -> Result<Api<MaasMachine>> {
    Ok(Api::namespaced(ctx.base.client.clone(), &namespace(mm)?))
}

impl State {
    /// What [`decide`] sees of this state.
    pub fn observed(&self) -> Observed<'_> {
        Observed {
            maas_machine: &self.mm,
            machine: self.machine.as_ref(),
            cluster: self.cluster.as_ref(),
            host: self.host.as_ref(),
            data_claim: self.data_claim.as_ref(),
            data: self.data.as_ref(),
            system_host: self.system_host.as_ref(),
            vm_host: self.vm_host.as_ref(),
            vm: self.vm.as_ref(),
        }
    }

    /// [`State::observe`] from a fresh read of the MaasMachine; `None` when it is gone.
    pub async fn observe_fresh(ctx: &Ctx, mm: &MaasMachine) -> Result<Option<Self>> {
        let fresh = mm_api(ctx, mm)?
            .get_opt(&mm.name_any())
            .await
            .map_err(failed("reading the MaasMachine"))?;
        match fresh {
            Some(fresh) => Ok(Some(Self::observe(ctx, fresh).await?)),
            None => Ok(None),
        }
    }

    /// The owner Machine and its Cluster (from the caches), the claimed host (confirmed by a
    /// fresh read) and the data claim.
    pub async fn observe(ctx: &Ctx, mm: MaasMachine) -> Result<Self> {
        let ns = namespace(&mm)?;
        let machine = mm
            .owner_references()
            .iter()
            .find(|o| is_capi_owner(o, "Machine"))
            .and_then(|owner| ctx.machines.get(&ObjectRef::new(&owner.name).within(&ns)))
            .map(|m| m.as_ref().clone());
        let cluster_name = machine
            .as_ref()
            .map(|m| m.spec.cluster_name.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| mm.labels().get(keys::LABEL_CLUSTER_NAME).cloned());
        let cluster = cluster_name
            .and_then(|name| ctx.clusters.get(&ObjectRef::new(&name).within(&ns)))
            .map(|c| c.as_ref().clone());
        let host = find_host(ctx, &mm, &ns).await?;
        let (data_claim, data) = observe_data(ctx, &mm, &ns).await?;
        let (vm_host, vm) = find_vm(ctx, &mm).await?;
        let system_host = match (&host, &mm.spec.system_id) {
            (None, Some(system_id)) => {
                let claimable = ctx.claimable_namespaces(&ns);
                ctx.hosts
                    .find(|h| h.spec.system_id == *system_id && claimable.admits_host(h))
                    .map(|h| h.as_ref().clone())
            }
            _ => None,
        };
        Ok(Self {
            mm,
            machine,
            cluster,
            host,
            data_claim,
            data,
            system_host,
            vm_host,
            vm,
            superseded: Vec::new(),
        })
    }

    /// Takes `mm` (the API's answer to a write, or a fresh read) as the MaasMachine, noting the
    /// version it replaces.
    pub fn replace_mm(&mut self, mm: MaasMachine) {
        if let Some(old) = self.mm.resource_version()
            && mm.resource_version().as_ref() != Some(&old)
        {
            self.superseded.push(old);
        }
        self.mm = mm;
    }

    /// Takes a whole fresh observation, keeping the versions seen so far.
    pub fn replace_all(&mut self, fresh: State) {
        let mut superseded = std::mem::take(&mut self.superseded);
        if let (Some(old), Some(new)) = (self.mm.resource_version(), fresh.mm.resource_version())
            && old != new
        {
            superseded.push(old);
        }
        *self = State {
            superseded,
            ..fresh
        };
    }
}

/// The host claimed by `mm`: the one recorded in status, else one the cache shows with our
/// UID (a claim whose status write was lost).
///
/// From the cache when it shows the host claimed by `mm` and our last write of its spec
/// ([`capmaas_runtime::own_writes::OwnSpecWrites`], in `Ctx::host_writes`): every later change
/// comes with the watch, and every host write reads the host fresh anyway. Otherwise (a claim
/// not in the cache yet, a release of ours the cache does not show) confirmed by a fresh read,
/// as a decision on a lagging cache could claim a second host or release twice. A fresh read in
/// every reconcile made it the API server's most frequent request under load.
pub async fn find_host(ctx: &Ctx, mm: &MaasMachine, ns: &str) -> Result<Option<MaasHost>> {
    // (namespace, name): the host may sit in another namespace (an inventory admitting ours).
    let recorded = mm
        .status
        .as_ref()
        .and_then(|s| s.host_ref.as_ref())
        .map(|r| (r.namespace_or(ns).to_owned(), r.name.clone()));
    let recorded_in_cache = recorded
        .as_ref()
        .and_then(|(host_ns, name)| ctx.hosts.get(&ObjectRef::new(name).within(host_ns)));
    // UIDs are unique in the whole cluster: a host claimed by ours is ours in any namespace.
    let cached = recorded_in_cache
        .filter(|h| claimed_by(h, mm))
        .or_else(|| ctx.hosts.find(|h| claimed_by(h, mm)));
    if let Some(host) = cached
        .as_ref()
        .filter(|h| ctx.host_writes.cache_is_current(h.as_ref(), &h.spec))
    {
        return Ok(Some(host.as_ref().clone()));
    }
    let cached = cached.and_then(|h| Some((h.namespace()?, h.name_any())));
    for (host_ns, name) in recorded.into_iter().chain(cached) {
        let api: Api<MaasHost> = Api::namespaced(ctx.base.client.clone(), &host_ns);
        let host = api
            .get_opt(&name)
            .await
            .map_err(failed(format!("reading host {host_ns}/{name}")))?;
        if let Some(host) = host.filter(|h| claimed_by(h, mm)) {
            return Ok(Some(host));
        }
    }
    Ok(None)
}

/// The VM host holding `mm`'s VM request and the composed VM's MaasHost, for an LXD machine or
/// one being deleted. From the cache, except that a VM host this process wrote and the cache
/// does not show as written yet is read fresh: a request added a moment ago must be found, or
/// a second one would be added elsewhere.
pub async fn find_vm(ctx: &Ctx, mm: &MaasMachine) -> Result<(Option<MaasHost>, Option<MaasHost>)> {
    if !crate::vm::is_lxd(mm) && mm.metadata.deletion_timestamp.is_none() {
        return Ok((None, None));
    }
    // UIDs are unique in the whole cluster: an entry naming ours is ours in any namespace.
    let cached = ctx.hosts.state();
    let mut found = None;
    let vm_hosts = cached
        .iter()
        .filter(|h| h.spec.vms.is_some() || h.status.as_ref().is_some_and(|s| s.vm_host.is_some()));
    for host in vm_hosts {
        let host = if ctx.host_writes.cache_is_current(host.as_ref(), &host.spec) {
            Some(host.as_ref().clone())
        } else {
            read_host(ctx, host).await?
        };
        if let Some(host) = host.filter(|h| crate::vm::entry_of(h, mm).is_some()) {
            found = Some(host);
            break;
        }
    }
    let Some(vm_host) = found else {
        return Ok((None, None));
    };
    let hostname = crate::vm::entry_of(&vm_host, mm)
        .map(|e| e.hostname.clone())
        .unwrap_or_default();
    let composed = ctx
        .hosts
        .find(|h| crate::vm::is_vm_of(h, &vm_host, &hostname))
        .map(|h| h.as_ref().clone());
    Ok((Some(vm_host), composed))
}

async fn read_host(ctx: &Ctx, host: &MaasHost) -> Result<Option<MaasHost>> {
    let (ns, name) = (host_namespace(host)?, host.name_any());
    Api::<MaasHost>::namespaced(ctx.base.client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(|e| failed(format!("reading host {ns}/{name}"))(e).into())
}

/// Reads the MaasMachine fresh: the cached object may predate a write of ours or of another
/// replica, so a claim (or a VM request) is decided on a fresh read and written under its
/// resourceVersion. `false` when there is nothing to claim (deleting, or a host is claimed
/// already).
pub async fn still_claiming(ctx: &Ctx, state: &mut State, ns: &str) -> Result<bool> {
    state.replace_mm(
        mm_api(ctx, &state.mm)?
            .get(&state.mm.name_any())
            .await
            .map_err(failed("reading the MaasMachine"))?,
    );
    if state.mm.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    if let Some(host) = find_host(ctx, &state.mm, ns).await? {
        state.host = Some(host);
        return Ok(false);
    }
    Ok(true)
}

/// Applies the owned status after `conditions` (and the provisioning signals); returns whether
/// anything changed (nothing is written otherwise, nor for a change of the repeated host facts
/// alone before the machine is provisioned: [`host_facts_only`]).
///
/// The apply carries the resourceVersion the status was computed from
/// ([`apply_status_at`]): a status computed from an outdated object (another replica wrote
/// meanwhile) fails with 409, mapped to [`Error::Conflict`], instead of undoing that write, and
/// the reconcile decides again on a fresh read.
pub async fn write_status(
    ctx: &Ctx,
    state: &mut State,
    conditions: Vec<NewCondition>,
    provisioned: bool,
) -> Result<bool> {
    let now = capmaas_runtime::status::now();
    let next = next_status(
        &state.mm,
        state.host.as_ref(),
        conditions,
        provisioned,
        &now,
    );
    let current = owned_status(&state.mm);
    if next == current || host_facts_only(&current, &next) {
        return Ok(false);
    }
    let written = apply_owned(ctx, &state.mm, &next, "writing the status").await?;
    state.replace_mm(written);
    Ok(true)
}

/// Applies `status` as the owned status of `mm`, only if the MaasMachine is still at `mm`'s
/// resourceVersion: a write that raced another writer fails with [`Error::Conflict`] (`action`
/// names the write in errors) instead of undoing that writer's change.
pub async fn apply_owned(
    ctx: &Ctx,
    mm: &MaasMachine,
    status: &MaasMachineStatus,
    action: &'static str,
) -> Result<MaasMachine> {
    let rv = mm
        .resource_version()
        .ok_or(Failed::missing("resourceVersion"))?;
    let written = apply_status_at(
        &mm_api(ctx, mm)?,
        &mm.name_any(),
        &ctx.base.field_manager,
        status,
        &rv,
    )
    .await
    .map_err(failed(action))?;
    Ok(written)
}

/// Whether `claim` was made for this very MaasMachine (same UID as its controller owner).
fn made_for(claim: &MaasDataClaim, mm: &MaasMachine) -> bool {
    let uid = mm.uid();
    claim
        .owner_references()
        .iter()
        .any(|o| o.kind == MaasMachine::kind(&()) && Some(&o.uid) == uid.as_ref())
}

/// Reads the machine's claim and the MaasData it records (two reads; none without a template
/// and without a claim to let go).
async fn observe_data(
    ctx: &Ctx,
    mm: &MaasMachine,
    ns: &str,
) -> Result<(Option<MaasDataClaim>, Option<MaasData>)> {
    if mm.spec.data_template.is_none() && mm.metadata.deletion_timestamp.is_none() {
        return Ok((None, None));
    }
    let claim = Api::<MaasDataClaim>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(&mm.name_any())
        .await
        .map_err(failed("reading the MaasDataClaim"))?
        .filter(|c| made_for(c, mm));
    let recorded = claim
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.rendered_data.as_ref())
        .map(|r| r.name.clone());
    let data = match recorded {
        Some(name) => Api::<MaasData>::namespaced(ctx.base.client.clone(), ns)
            .get_opt(&name)
            .await
            .map_err(failed("reading the MaasData"))?,
        None => None,
    };
    Ok((claim, data))
}
