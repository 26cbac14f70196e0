//! The MaasHost reconciler: reads the machine from the cache (filled by the inventory syncs,
//! the batched observation of machines in flight and the answers of our own calls), asks
//! [`next_step`] what to do, does it, and repeats until a step has to wait; then writes the
//! status once. A host whose machine MAAS is changing registers with [`super::observe`], which
//! wakes it when the machine changes: no host polls MAAS on its own.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::host::HostAllocation;
use capmaas_api::keys;
use capmaas_runtime::error_chain;
use capmaas_runtime::status::{apply_status, now};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use maas_api_client::{MaasError, Machine, MachineStatus};
use tracing::{debug, info, warn};

use super::annotations::{self as ann, RebootState};
use super::finalizer::{self, Change, Deletion};
use super::run::{Run, unix_now};
use super::status::{Unmanaged, unmanaged_status};
use super::step::{HostFacts, Step, Wait, next_step, starts_later};
use crate::binding::{self, Bound};
use crate::cache::Lookup;
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::maas::Timed;

/// Steps executed per reconcile at most (allocate, annotate, rename, deploy fit in one).
const MAX_STEPS: usize = 6;
/// Requeue while the inventory cache is not filled yet.
const CACHE_WAIT: Duration = Duration::from_secs(2);
/// Retry of a host whose machine someone else allocated first.
const HELD_BY_OTHER_RETRY: Duration = Duration::from_secs(300);
/// Requeue of a host whose machine is in flight: the observer wakes it on every change, this is
/// for what no change announces ([`super::step::POWER_ON_RETRY_AFTER`]).
pub const IN_FLIGHT_RECHECK: Duration = Duration::from_secs(30);

/// The allocation `host` records as made by `installation` (by this MaasHost object).
pub fn recorded_allocation<'a>(
    host: &'a MaasHost,
    installation: &str,
) -> Option<&'a HostAllocation> {
    host.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .filter(|a| a.agent_name.as_deref() == Some(installation))
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
        original_hostname: annotations.get(ann::ORIGINAL_HOSTNAME).cloned(),
        unclaimed_for: unclaimed_for(host, now_unix),
        release_unclaimed_after: None,
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

/// Reconciles one MaasHost: executes steps until one has to wait, then writes the status.
pub async fn reconcile(host: Arc<MaasHost>, gw: Arc<Gateway>) -> Result<Action> {
    let gw = gw.as_ref();
    let host = &gw.own_writes.freshest(host.as_ref().clone());
    let namespace = host.namespace().unwrap_or_default();
    if let Some(why) = unmanaged(host, gw, &namespace).await? {
        write_unmanaged(host, gw, &namespace, &why).await?;
        return Ok(match why {
            Unmanaged::NotRegistered => Action::await_change(),
            Unmanaged::BoundElsewhere(_) => Action::requeue(HELD_BY_OTHER_RETRY),
        });
    }
    let Some(Current {
        machine,
        unlisted_from,
    }) = current_machine(host, gw, &namespace).await?
    else {
        return Ok(Action::requeue(CACHE_WAIT));
    };
    let settings = &gw.settings;
    let facts = HostFacts {
        release_unclaimed_after: settings.release_unclaimed_after,
        ..host_facts(
            host,
            &settings.installation_id,
            settings.deploy_retries,
            unix_now(),
        )
    };
    let allocation = host.status.as_ref().and_then(|s| s.allocation.clone());
    let mut run = Run {
        gw,
        host,
        api: Api::namespaced(gw.base.client.clone(), &namespace),
        system_id: host.spec.system_id.clone(),
        facts,
        machine,
        allocation,
        unlisted_from,
        spec_error: None,
        announced: false,
        allocation_unwritten: false,
        allocated_note: None,
        written: None,
        replaced_versions: host.resource_version().into_iter().collect(),
    };
    let result = run_steps(&mut run).await;
    run.remember_writes();
    result
}

/// The reconcile of a managed host: steps until one waits, then the status.
async fn run_steps(run: &mut Run<'_>) -> Result<Action> {
    let (gw, host) = (run.gw, run.host);
    // The batched observation did not see the machine: only a direct read can tell whether it
    // is gone (404) or merely hidden from the list.
    // Likewise after a call whose answer was lost: MAAS may have carried it out.
    let deletion = Deletion::of(host);
    if deletion.deleting && !finalizer::present(host) {
        // Deleted before it held anything (or by a version without the finalizer): nothing
        // here can hold it for a release; the orphan sweep gives the server back.
        return Ok(Action::await_change());
    }
    let change = finalizer::before_steps(finalizer::present(host), deletion, &run.facts);
    if run.change_finalizer(change).await? || change == Change::Remove {
        return Ok(Action::await_change());
    }
    let unseen = gw.in_flight.take_unseen(&run.system_id);
    if run.machine.is_some() && (unseen || gw.cache.is_stale(&run.system_id)) {
        run.refresh().await?;
    }
    if let Some(later) = starts_later(
        &next_step(&run.facts, run.machine.as_deref()),
        gw.maas.backlog(),
    ) {
        return Ok(Action::requeue(later));
    }
    let steps = execute_steps(run).await;
    if steps.is_err()
        && let Err(e) = run.record_allocation().await
    {
        // The step's error is the one to report; the adoption finds the allocation anyway.
        warn!(error = %error_chain(&e), "cannot record the allocation after a failed step");
    }
    run.announce_allocation().await;
    let outcome = steps?;
    if outcome.in_flight && run.machine.is_some() {
        gw.in_flight
            .watch(&run.system_id, ObjectRef::from_obj(host));
    } else {
        gw.in_flight.forget(&run.system_id);
    }
    let present = finalizer::present(run.written.as_ref().unwrap_or(host));
    let change = finalizer::after_steps(present, deletion, &run.facts, outcome.why);
    if run.change_finalizer(change).await? {
        gw.in_flight.forget(&run.system_id);
        return Ok(Action::await_change());
    }
    let report_due = run.write_status(outcome.why).await?;
    let requeue = outcome.requeue_after(gw.base.sync_period);
    Ok(Action::requeue(
        report_due.map_or(requeue, |due| due.min(requeue)),
    ))
}

/// Executes steps until one has to wait (at most [`MAX_STEPS`]): how the reconcile ends.
async fn execute_steps(run: &mut Run<'_>) -> Result<Outcome> {
    let mut outcome = Outcome::quiet(Wait::Idle);
    for _ in 0..MAX_STEPS {
        let step = next_step(&run.facts, run.machine.as_deref());
        match step {
            Step::Wait { why, poll } => {
                // MAAS is changing the machine: the observer reads it with the others.
                outcome = Outcome {
                    why,
                    in_flight: poll.is_some(),
                    retry: None,
                };
                break;
            }
            step => match run.execute(step).await {
                Ok(true) => {}
                Ok(false) => {
                    // MAAS completes the operation on its own: report what we wait for.
                    outcome = Outcome {
                        why: in_flight_reason(run),
                        in_flight: true,
                        retry: None,
                    };
                    break;
                }
                Err(Error::NotOurs { system_id, reason }) => {
                    // Someone else took the machine first: report it, look again later.
                    info!(%system_id, %reason, "machine held by someone else");
                    outcome = Outcome {
                        why: Wait::HeldByOther,
                        in_flight: false,
                        retry: Some(HELD_BY_OTHER_RETRY),
                    };
                    break;
                }
                Err(Error::InvalidSpec(message)) => {
                    // Reported in the host status (`Provisioned=False`, reason InvalidSpec),
                    // then retried with the invalid-spec delay like any invalid spec.
                    run.gw.in_flight.forget(&run.system_id);
                    run.spec_error = Some(message.clone());
                    run.write_status(Wait::InvalidSpec).await?;
                    return Err(Error::InvalidSpec(message));
                }
                Err(e) => {
                    run.gw.cache.mark_stale(&run.system_id);
                    return Err(e);
                }
            },
        }
    }
    Ok(outcome)
}

/// How a reconcile ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// What the host waits for (the `Provisioned` reason).
    pub why: Wait,
    /// MAAS is changing the machine: observed by [`super::observe`], which wakes the host.
    pub in_flight: bool,
    /// Look again after this long regardless.
    pub retry: Option<Duration>,
}

impl Outcome {
    fn quiet(why: Wait) -> Self {
        Self {
            why,
            in_flight: false,
            retry: None,
        }
    }

    /// When to look again without a wake-up: a quiet host after `resync` (an inventory sync
    /// wakes it on any MAAS change anyway); a host in flight after [`IN_FLIGHT_RECHECK`], for
    /// what no change in MAAS announces (a power-on to repeat after a while).
    pub fn requeue_after(&self, resync: Duration) -> Duration {
        match (self.retry, self.in_flight) {
            (Some(retry), _) => retry,
            (None, true) => IN_FLIGHT_RECHECK.min(resync),
            (None, false) => resync,
        }
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
    if binding::known_holder(gw, &host.spec.system_id).as_deref() == Some(me.as_str()) {
        return Ok(None);
    }
    Ok(
        match binding::acquire(gw, &host.spec.system_id, namespace, &host.name_any()).await? {
            Bound::Ours => None,
            Bound::TakenBy(other) => Some(Unmanaged::BoundElsewhere(other)),
        },
    )
}

async fn write_unmanaged(
    host: &MaasHost,
    gw: &Gateway,
    namespace: &str,
    why: &Unmanaged,
) -> Result<()> {
    let previous = host.status.as_ref();
    let status = unmanaged_status(previous, why, host.metadata.generation, &now());
    if previous == Some(&status) {
        return Ok(());
    }
    if let Unmanaged::BoundElsewhere(holder) = why {
        let note = format!(
            "MAAS machine {} belongs to MaasHost {holder}; this host is left alone",
            host.spec.system_id
        );
        gw.base
            .events
            .warning(host, "BoundToAnotherHost", &note)
            .await;
    }
    let api: Api<MaasHost> = Api::namespaced(gw.base.client.clone(), namespace);
    apply_status(&api, &host.name_any(), &gw.base.field_manager, &status).await?;
    Ok(())
}

/// Why the host waits right after an operation MAAS completes asynchronously.
fn in_flight_reason(run: &Run<'_>) -> Wait {
    match next_step(&run.facts, run.machine.as_deref()) {
        Step::Wait { why, .. } => why,
        _ => match run.machine.as_ref().map(|m| m.status) {
            Some(MachineStatus::Deploying) => Wait::Deploying,
            Some(MachineStatus::Releasing | MachineStatus::DiskErasing) => Wait::Releasing,
            _ => Wait::PowerTransition,
        },
    }
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
                let machine = read_machine(gw, &host.spec.system_id).await?;
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
        machine: read_machine(gw, &host.spec.system_id).await?,
        unlisted_from: None,
    }))
}

/// A direct read of one machine: `None` only for a 404 (gone from MAAS); any other failure is
/// an error, never "gone".
async fn read_machine(gw: &Gateway, system_id: &str) -> Result<Option<Arc<Machine>>> {
    match gw.maas.get_machine(system_id).await {
        Ok(Timed { value, sent }) => {
            gw.cache.observe(value.clone(), sent);
            Ok(Some(Arc::new(value)))
        }
        Err(MaasError::NotFound { .. }) => {
            gw.cache.forget_machine(system_id);
            Ok(None)
        }
        Err(e) => Err(Error::maas("get machine")(e)),
    }
}

impl Run<'_> {
    /// Executes a step; returns whether the next step may follow at once (false after an
    /// operation MAAS completes asynchronously).
    async fn execute(&mut self, step: Step) -> Result<bool> {
        let sid = self.system_id.clone();
        let maas = self.gw.maas.clone();
        match step {
            Step::Wait { .. } => return Ok(false),
            Step::Allocate => {
                self.allocate_or_adopt().await?;
                return Ok(true);
            }
            Step::SetAnnotations => {
                let m = maas
                    .set_workload_annotations(&sid, &self.facts.annotations)
                    .await
                    .map_err(Error::maas("set workload annotations"))?;
                self.seen(m);
                return Ok(true);
            }
            Step::SetHostname(name) => {
                let m = maas
                    .update_hostname(&sid, &name)
                    .await
                    .map_err(Error::maas("set hostname"))?;
                self.seen(m);
                return Ok(true);
            }
            Step::RecordOriginalHostname(original) => {
                self.patch_annotation(ann::ORIGINAL_HOSTNAME, Some(original.clone()))
                    .await?;
                self.facts.original_hostname = Some(original);
                return Ok(true);
            }
            Step::ForgetOriginalHostname => {
                self.patch_annotation(ann::ORIGINAL_HOSTNAME, None).await?;
                self.facts.original_hostname = None;
                return Ok(true);
            }
            Step::Deploy => self.deploy().await?,
            Step::Release => self.release().await?,
            Step::RetryDeployment => {
                let failures = self.facts.deploy_failures.saturating_add(1);
                self.patch_annotation(ann::DEPLOY_FAILURES, Some(failures.to_string()))
                    .await?;
                self.facts.deploy_failures = failures;
                let note = format!(
                    "MAAS deployment failed; retry {failures} of {}",
                    self.facts.max_deploy_retries
                );
                self.gw
                    .base
                    .events
                    .warning(self.host, "DeploymentRetried", &note)
                    .await;
                self.release().await?;
            }
            Step::UnlinkStaticAddresses => {
                self.unlink_static_addresses().await?;
                return Ok(true);
            }
            Step::ForgetStaticAddresses => {
                self.forget_static_addresses().await?;
                return Ok(true);
            }
            Step::ResetFailures => {
                self.patch_annotation(ann::DEPLOY_FAILURES, None).await?;
                self.facts.deploy_failures = 0;
                return Ok(true);
            }
            Step::BeginReboot => {
                self.patch_annotation(ann::REBOOT_STATE, Some(ann::POWERED_OFF.to_owned()))
                    .await?;
                self.facts.reboot = RebootState::PoweringOff;
                self.gw
                    .base
                    .events
                    .normal(
                        self.host,
                        "RebootStarted",
                        "powering off for a reboot request",
                    )
                    .await;
                return Ok(true);
            }
            Step::PowerOff => {
                let answer = maas
                    .power_off(&sid, &self.comment("reboot"))
                    .await
                    .map_err(Error::maas("power off"))?;
                match answer.transpose() {
                    Some(machine) => self.seen(machine),
                    None => self.refresh().await?,
                }
            }
            Step::PowerOn => self.power_on().await?,
            Step::FinishReboot => {
                self.patch_annotation(ann::REBOOT_STATE, None).await?;
                self.facts.reboot = RebootState::Idle;
                self.gw
                    .base
                    .events
                    .normal(self.host, "RebootFinished", "powered on again")
                    .await;
                return Ok(true);
            }
        }
        Ok(false)
    }
}
