//! What a MaasHost reconcile starts from ([`observe`]): whether the host is ours to manage,
//! the facts [`next_step`](super::decide::next_step) decides on, and the latest view of its
//! machine, from the cache (filled by the inventory syncs, the batched observation of machines in
//! flight and the answers of our own calls) or from one direct read when the cache cannot tell.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::host::HostAllocation;
use capmaas_api::keys;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use maas_api_client::Machine;
use tracing::debug;

use super::allocations;
use super::annotations as ann;
use super::annotations::unix_now;
use super::decide::{HostFacts, identity_lookup_needed};
use super::identity;
use super::machines::Machines;
use super::status::Unmanaged;
use crate::binding::{self, Bindings, Bound};
use crate::cache::Lookup;
use crate::context::Gateway;
use crate::error::{Error, Result};

/// What a reconcile finds.
pub(super) enum Observed {
    /// The host is left alone ([`Unmanaged`] says why).
    Unmanaged(Unmanaged),
    /// The host's inventory has not been listed yet: nothing is known of its machine.
    NotSynced,
    /// A managed host.
    Managed(Box<State>),
}

/// A managed host before its first step.
pub(super) struct State {
    pub(super) facts: HostFacts,
    /// The latest MAAS view; `None` only when MAAS answered 404 for the system id.
    pub(super) machine: Option<Arc<Machine>>,
    /// The host's inventory, when its latest list did not show the (existing) machine.
    pub(super) unlisted_from: Option<String>,
}

/// Reads what a reconcile of `host` needs: the binding first (a host whose machine another
/// host holds learns nothing more), then the machine.
pub(super) async fn observe(host: &MaasHost, gw: &Gateway) -> Result<Observed> {
    let namespace = host.namespace().unwrap_or_default();
    if let Some(why) = unmanaged(host, gw, &namespace).await? {
        return Ok(Observed::Unmanaged(why));
    }
    let Some(Current {
        machine,
        unlisted_from,
    }) = current_machine(host, gw, &namespace).await?
    else {
        return Ok(Observed::NotSynced);
    };
    let settings = &gw.settings;
    let mut facts = HostFacts {
        release_unclaimed_after: settings.release_unclaimed_after,
        annotate: settings.workload_annotations,
        maas_busy: !gw.maas.backlog().is_zero(),
        ..host_facts(
            host,
            &settings.installation_id,
            settings.deploy_retries,
            unix_now(),
        )
    };
    if let Some(m) = machine.as_deref() {
        facts.vm_host_guests = super::vm_host::guests(&gw.cache, m, host.status.as_ref());
    }
    if let Some(m) = machine
        .as_deref()
        .filter(|m| identity_lookup_needed(&facts, m))
    {
        let likely = facts.recorded_release.clone().or_else(|| {
            host.spec
                .provisioning
                .as_ref()
                .map(|p| p.release_policy.clone().unwrap_or_default())
        });
        let found = allocations::identify(
            gw,
            &m.system_id,
            &namespace,
            &host.name_any(),
            likely.as_ref(),
        )
        .await
        .map_err(Error::maas("look up allocation"))?;
        if let Some(found) = found {
            facts.identified = true;
            facts.recorded_release = found.release.or(facts.recorded_release);
        }
    }
    Ok(Observed::Managed(Box::new(State {
        facts,
        machine,
        unlisted_from,
    })))
}

/// The allocation `host` records as made by `installation` (by this MaasHost object), in this
/// version's identity or the previous version's bare installation id.
pub fn recorded_allocation<'a>(
    host: &'a MaasHost,
    installation: &str,
) -> Option<&'a HostAllocation> {
    host.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .filter(|a| {
            a.agent_name
                .as_deref()
                .is_some_and(|record| identity::made_by(record, installation))
        })
}

/// How long `host` has reported `Unclaimed`: since its `Provisioned` condition last moved,
/// while that condition gives that reason.
pub fn unclaimed_for(host: &MaasHost, now_unix: i64) -> Option<Duration> {
    let conditions = host.status.as_ref()?.conditions.as_deref()?;
    let condition =
        capmaas_runtime::get_condition(conditions, capmaas_api::conditions::PROVISIONED)?;
    (condition.reason == super::status::REASON_UNCLAIMED).then(|| {
        let since = condition.last_transition_time.0.as_second();
        Duration::from_secs(u64::try_from(now_unix.saturating_sub(since)).unwrap_or(0))
    })
}

/// The facts [`next_step`] needs, read from the host.
pub fn host_facts(
    host: &MaasHost,
    installation: &str,
    max_retries: u32,
    now_unix: i64,
) -> HostFacts {
    let spec = &host.spec;
    let annotations = host.annotations();
    // A host being deleted is claimed by nobody and asks for nothing: its server goes back.
    let deleting = host.metadata.deletion_timestamp.is_some();
    let consumer = spec.consumer_ref.as_ref().filter(|_| !deleting);
    let recorded = recorded_allocation(host, installation);
    let consumer_uid = consumer.map(|c| c.uid.as_str());
    let provisioning = spec.provisioning.as_ref().filter(|_| !deleting);
    HostFacts {
        consumed: consumer.is_some(),
        provisioning: provisioning.is_some(),
        allocation_recorded: recorded.is_some_and(|a| a.consumer_uid.as_deref() == consumer_uid),
        allocation_known: recorded.is_some(),
        allocated_for_other_consumer: recorded
            .is_some_and(|a| a.consumer_uid.is_some() && a.consumer_uid.as_deref() != consumer_uid),
        reboot_requested: annotations.keys().any(|k| keys::is_reboot_annotation(k)),
        reboot: ann::reboot_state(
            annotations.get(ann::REBOOT_STATE).map(String::as_str),
            now_unix,
        ),
        deploy_failures: ann::deploy_failures(
            annotations.get(ann::DEPLOY_FAILURES).map(String::as_str),
        ),
        max_deploy_retries: max_retries,
        hostname: provisioning.and_then(|p| p.hostname.clone()),
        keep_powered_on: provisioning.is_some_and(|p| p.keep_powered_on != Some(false)),
        // Filled from the gateway's cache by the observation.
        vm_host_guests: Vec::new(),
        original_hostname: annotations.get(ann::ORIGINAL_HOSTNAME).cloned(),
        unclaimed_for: unclaimed_for(host, now_unix),
        release_unclaimed_after: None,
        annotate: false,
        maas_busy: false,
        finalizer: super::finalizer::present(host),
        identified: false,
        recorded_release: recorded
            .and_then(|a| a.agent_name.as_deref())
            .and_then(identity::recorded_policy),
        annotations: ann::desired_machine_annotations(
            installation,
            &host.namespace().unwrap_or_default(),
            &host.name_any(),
            consumer.map(|c| ann::Consumer {
                kind: &c.kind,
                namespace: c.namespace.as_deref(),
                name: &c.name,
                uid: &c.uid,
            }),
            provisioning.and_then(|p| p.release_policy.as_ref()),
        ),
        static_addresses: annotations
            .get(ann::STATIC_ADDRESSES)
            .map(|v| ann::static_addresses(v)),
    }
}

/// Whether a host is registered: imported by an inventory, or marked hand-made.
pub fn registered(host: &MaasHost) -> bool {
    host.labels().contains_key(keys::LABEL_HOST_INVENTORY)
        || host
            .annotations()
            .get(keys::ANNOTATION_HOST_HAND_MADE)
            .is_some_and(|v| v == "true")
}

/// Why the host must be left alone, if it must: not registered, or its machine bound to
/// another host. The binding is read from the reflector, and from the API server (taking it
/// when free) only when the reflector does not show it ours.
async fn unmanaged(host: &MaasHost, gw: &Gateway, namespace: &str) -> Result<Option<Unmanaged>> {
    if !registered(host) {
        return Ok(Some(Unmanaged::NotRegistered));
    }
    let me = binding::holder_identity(namespace, &host.name_any());
    if Bindings::of(gw)
        .known_holder(&host.spec.system_id)
        .as_deref()
        == Some(me.as_str())
    {
        return Ok(None);
    }
    Ok(
        match Bindings::of(gw)
            .acquire(&host.spec.system_id, namespace, &host.name_any())
            .await?
        {
            Bound::Ours => None,
            Bound::TakenBy(other) => Some(Unmanaged::BoundElsewhere(other)),
        },
    )
}

/// What a reconcile knows of the host's machine before it starts.
struct Current {
    /// The latest MAAS view; `None` only when MAAS answered 404 for the system id.
    machine: Option<Arc<Machine>>,
    /// The host's inventory, when its latest list did not show the (existing) machine.
    unlisted_from: Option<String>,
}

/// The machine from the cache, or from a direct read when the host's inventory did not list
/// it or there is no live inventory; `Ok(None)` while the host's inventory is not synced yet.
///
/// A machine missing from a filtered list is not gone: it may have been re-tagged, moved to
/// another pool or zone, or the list may have been wrong. It is gone only when MAAS answers
/// 404 for its system id; otherwise the host stays managed by system id (and reports that it
/// left its inventory's filter).
async fn current_machine(
    host: &MaasHost,
    gw: &Gateway,
    namespace: &str,
) -> Result<Option<Current>> {
    let inventory = host.labels().get(keys::LABEL_HOST_INVENTORY);
    let live = inventory.filter(|i| {
        gw.inventories
            .get(&ObjectRef::new(i.as_str()).within(namespace))
            .is_some()
    });
    if let Some(inventory) = live {
        let key = format!("{namespace}/{inventory}");
        match gw.cache.lookup(&key, &host.spec.system_id) {
            Lookup::Present(m) => {
                return Ok(Some(Current {
                    machine: Some(m),
                    unlisted_from: None,
                }));
            }
            Lookup::Unknown => return Ok(None),
            Lookup::Unlisted => {
                let machine = Machines::of(gw).read(&host.spec.system_id).await?;
                if machine.is_some() {
                    debug!(system_id = %host.spec.system_id, %inventory, "machine left the inventory's filter; managed by system id");
                }
                return Ok(Some(Current {
                    unlisted_from: machine.as_ref().map(|_| inventory.clone()),
                    machine,
                }));
            }
        }
    }
    // Not imported by a live inventory: ask MAAS directly, unless the machine is in flight and
    // the observer keeps its view fresh.
    if let Some(machine) = gw
        .cache
        .get(&host.spec.system_id)
        .filter(|_| gw.in_flight.is_watched(&host.spec.system_id))
    {
        return Ok(Some(Current {
            machine: Some(machine),
            unlisted_from: None,
        }));
    }
    Ok(Some(Current {
        machine: Machines::of(gw).read(&host.spec.system_id).await?,
        unlisted_from: None,
    }))
}
