//! [`SimHandle`]: direct inspection and mutation of the simulator for tests (no HTTP).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize, Serializer};

use crate::faults::{FaultConfig, LostAnswer};
use crate::history::StatusChange;
use crate::model::{Machine, PowerState, ReleaseRecord, VmHost};
use crate::shared::Shared;
use crate::status::NodeStatus;
use crate::vmhost_events::VmHostEvent;
use crate::world::World;

/// A snapshot of one machine, for assertions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineView {
    /// MAAS system id.
    pub system_id: String,
    /// Hostname.
    pub hostname: String,
    /// Status.
    pub status: NodeStatus,
    /// Status number as MAAS sends it.
    pub status_number: u8,
    /// Status label as MAAS sends it.
    pub status_name: String,
    /// Latest status message.
    pub status_message: Option<String>,
    /// Error description (failed deployment text, mark_broken comment).
    pub error_description: String,
    /// Owner username.
    pub owner: Option<String>,
    /// `agent_name` given at allocation.
    pub agent_name: String,
    /// Workload annotations / owner data.
    pub owner_data: BTreeMap<String, String>,
    /// Power state.
    pub power_state: PowerState,
    /// Number of power-ons (deployments included).
    pub power_on_count: u64,
    /// Zone name.
    pub zone: String,
    /// Pool name.
    pub pool: String,
    /// Tags.
    pub tags: BTreeSet<String>,
    /// Cores.
    pub cpu_count: u32,
    /// MiB.
    pub memory: u64,
    /// `amd64/generic`...
    pub architecture: String,
    /// OS of the deployment.
    pub osystem: String,
    /// Series or custom image of the deployment.
    pub distro_series: String,
    /// Kernel of the deployment.
    pub hwe_kernel: Option<String>,
    /// Decoded user data of the deployment (base64 in JSON).
    #[serde(serialize_with = "as_base64")]
    pub user_data: Option<Vec<u8>>,
    /// Ephemeral deployment.
    pub ephemeral_deploy: bool,
    /// Locked against changes.
    pub locked: bool,
    /// Addresses on the machine's links.
    pub ip_addresses: Vec<String>,
    /// MAC addresses of the NICs.
    pub mac_addresses: Vec<String>,
    /// Comment of the last operation.
    pub last_comment: String,
    /// Every release MAAS accepted for this machine, oldest first, with its erase flags and
    /// how it ended.
    pub releases: Vec<ReleaseRecord>,
}

/// A VM host to create directly (control API, tests): MAAS would learn these from the LXD
/// server. Every field but `name` has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmHostSpec {
    /// Name (unique).
    pub name: String,
    /// `lxd` (default) or `virsh`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Power address (default `10.20.0.250:8443`).
    pub power_address: String,
    /// Zone name (must exist).
    pub zone: String,
    /// Resource pool name (must exist).
    pub pool: String,
    /// Cores.
    pub cores: u32,
    /// Memory in MiB.
    pub memory: u64,
    /// Local storage in bytes.
    pub local_storage: u64,
    /// CPU overcommit ratio.
    pub cpu_over_commit_ratio: f64,
    /// Memory overcommit ratio.
    pub memory_over_commit_ratio: f64,
    /// Tags (created when missing).
    pub tags: Vec<String>,
    /// The MAAS machine it runs on, if any.
    pub host_system_id: Option<String>,
}

impl Default for VmHostSpec {
    fn default() -> Self {
        Self {
            name: String::new(),
            kind: "lxd".to_owned(),
            power_address: "10.20.0.250:8443".to_owned(),
            zone: "default".to_owned(),
            pool: "default".to_owned(),
            cores: 16,
            memory: 65_536,
            local_storage: 1_000_000_000_000,
            cpu_over_commit_ratio: 1.0,
            memory_over_commit_ratio: 1.0,
            tags: Vec::new(),
            host_system_id: None,
        }
    }
}

/// A snapshot of one VM host, for assertions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VmHostView {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// `lxd` or `virsh`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Zone name.
    pub zone: String,
    /// Pool name.
    pub pool: String,
    /// The machine it runs on.
    pub host_system_id: Option<String>,
    /// Total cores, memory (MiB), local storage (bytes).
    pub cores: u32,
    /// MiB.
    pub memory: u64,
    /// Bytes.
    pub local_storage: u64,
    /// Used by composed machines: cores.
    pub used_cores: u64,
    /// Used by composed machines: MiB.
    pub used_memory: u64,
    /// Used by composed machines: bytes.
    pub used_local_storage: u64,
    /// CPU overcommit ratio.
    pub cpu_over_commit_ratio: f64,
    /// Memory overcommit ratio.
    pub memory_over_commit_ratio: f64,
    /// System ids of the machines composed on it.
    pub machines: Vec<String>,
}

impl VmHostView {
    fn of(world: &World, h: &VmHost) -> Self {
        let used = world.vm_host_used(h.id);
        Self {
            id: h.id,
            name: h.name.clone(),
            kind: h.kind.clone(),
            zone: h.zone.clone(),
            pool: h.pool.clone(),
            host_system_id: h.host_system_id.clone(),
            cores: h.cores,
            memory: h.memory,
            local_storage: h.local_storage,
            used_cores: used.cores,
            used_memory: used.memory,
            used_local_storage: used.local_storage,
            cpu_over_commit_ratio: h.cpu_over_commit_ratio,
            memory_over_commit_ratio: h.memory_over_commit_ratio,
            machines: world
                .vm_host_machines(h.id)
                .map(|m| m.system_id.clone())
                .collect(),
        }
    }
}

#[allow(clippy::ref_option)] // serde's `serialize_with` passes `&Option<T>`.
fn as_base64<S: Serializer>(value: &Option<Vec<u8>>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(bytes) => {
            serializer.serialize_some(&base64::engine::general_purpose::STANDARD.encode(bytes))
        }
        None => serializer.serialize_none(),
    }
}

impl MachineView {
    pub(crate) fn of(m: &Machine) -> Self {
        Self {
            system_id: m.system_id.clone(),
            hostname: m.hostname.clone(),
            status: m.status,
            status_number: m.status.number(),
            status_name: m.status.name().to_owned(),
            status_message: m.status_message.clone(),
            error_description: m.error_description.clone(),
            owner: m.owner.clone(),
            agent_name: m.agent_name.clone(),
            owner_data: m.owner_data.clone(),
            power_state: m.power_state,
            power_on_count: m.power_on_count,
            zone: m.zone.clone(),
            pool: m.pool.clone(),
            tags: m.tags.clone(),
            cpu_count: m.cpu_count,
            memory: m.memory,
            architecture: m.architecture.clone(),
            osystem: m.osystem.clone(),
            distro_series: m.distro_series.clone(),
            hwe_kernel: m.hwe_kernel.clone(),
            user_data: m.user_data.clone(),
            ephemeral_deploy: m.ephemeral_deploy,
            locked: m.locked,
            ip_addresses: m.ip_addresses().iter().map(ToString::to_string).collect(),
            mac_addresses: m.interfaces.iter().map(|i| i.mac_address.clone()).collect(),
            last_comment: m.last_comment.clone(),
            releases: m.releases.clone(),
        }
    }
}

/// Error of a [`SimHandle`] mutation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// No machine has this system id.
    #[error("no machine with system id {0}")]
    NoSuchMachine(String),
    /// The fault configuration is invalid.
    #[error("invalid faults: {0}")]
    InvalidFaults(String),
    /// A VM host to create is invalid.
    #[error("invalid VM host: {0}")]
    InvalidVmHost(String),
}

impl HandleError {
    /// Low-cardinality label.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NoSuchMachine(_) => "not_found",
            Self::InvalidFaults(_) | Self::InvalidVmHost(_) => "invalid",
        }
    }
}

/// Direct access to a running simulator's state.
#[derive(Clone)]
pub struct SimHandle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimHandle").finish_non_exhaustive()
    }
}

impl SimHandle {
    fn with_world<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut world = self.shared.lock();
        world.advance();
        let out = f(&mut world);
        // A test's direct change (a broken machine) belongs in the history too.
        world.note_statuses();
        out
    }

    fn with_machine(
        &self,
        system_id: &str,
        f: impl FnOnce(&mut Machine),
    ) -> Result<(), HandleError> {
        self.with_world(|w| {
            let m = w.machines.iter_mut().find(|m| m.system_id == system_id);
            let m = m.ok_or_else(|| HandleError::NoSuchMachine(system_id.to_owned()))?;
            f(m);
            w.dirty = true;
            Ok(())
        })
    }

    /// Adds machine `system_id` to one of the per-machine fault lists; unknown machines are
    /// refused so a typo cannot leave a test waiting for a fault that never fires.
    fn add_machine_fault(
        &self,
        system_id: &str,
        list: impl FnOnce(&mut FaultConfig) -> &mut Vec<String>,
    ) -> Result<(), HandleError> {
        self.with_world(|w| {
            w.machine_index(system_id)
                .ok_or_else(|| HandleError::NoSuchMachine(system_id.to_owned()))?;
            list(&mut w.faults).push(system_id.to_owned());
            Ok(())
        })
    }

    /// Every machine, ordered by id.
    pub fn machines(&self) -> Vec<MachineView> {
        self.with_world(|w| w.machines.iter().map(MachineView::of).collect())
    }

    /// One machine.
    pub fn machine(&self, system_id: &str) -> Option<MachineView> {
        self.with_world(|w| {
            w.machines
                .iter()
                .find(|m| m.system_id == system_id)
                .map(MachineView::of)
        })
    }

    /// Every machine's status changes, oldest first, by system id (the status it started with
    /// is not a change; at most the latest 64 are kept per machine).
    pub fn status_history(&self) -> BTreeMap<String, Vec<StatusChange>> {
        self.with_world(|w| {
            let clock = w.clock;
            w.machines
                .iter()
                .map(|m| {
                    let changes = m
                        .history
                        .changes()
                        .map(|c| StatusChange {
                            status: c.status,
                            at: clock.instant(c.at_ms),
                        })
                        .collect();
                    (m.system_id.clone(), changes)
                })
                .collect()
        })
    }

    /// Number of machines per status.
    pub fn status_counts(&self) -> BTreeMap<NodeStatus, usize> {
        self.with_world(|w| {
            let mut out = BTreeMap::new();
            for m in &w.machines {
                *out.entry(m.status).or_default() += 1;
            }
            out
        })
    }

    /// The active faults.
    pub fn faults(&self) -> FaultConfig {
        self.with_world(|w| w.faults.clone())
    }

    /// Replaces the active faults (an `outage_seconds` starts an outage now).
    pub fn set_faults(&self, faults: FaultConfig) -> Result<(), HandleError> {
        faults.validate().map_err(HandleError::InvalidFaults)?;
        self.with_world(|w| apply_faults(w, faults));
        Ok(())
    }

    /// Every MAAS API call answers 503 for `duration`.
    pub fn start_outage(&self, duration: Duration) {
        self.with_world(|w| {
            let until = w.now_ms() + u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            w.outage_until_ms = Some(until);
        });
    }

    /// Calls per operation key (`machines.allocate`, `machine.deploy`, `machines.read`...).
    pub fn call_counts(&self) -> BTreeMap<String, u64> {
        self.with_world(|w| crate::shared::counts(w))
    }

    /// Calls that took effect, per operation key: answered successfully *and* changed the
    /// simulated MAAS (reads and no-ops such as releasing a Ready machine are not counted),
    /// whether or not the answer then reached the client (see [`LostAnswer`]).
    pub fn applied_counts(&self) -> BTreeMap<String, u64> {
        self.with_world(|w| w.effects.applied.clone())
    }

    /// Answers lost after the operation took effect, per operation key.
    pub fn lost_answer_counts(&self) -> BTreeMap<String, u64> {
        self.with_world(|w| w.effects.lost.clone())
    }

    /// Errors injected before the operation, per operation key: per-operation error rates
    /// ([`FaultConfig::ops`]) and the 503s of an outage.
    pub fn injected_error_counts(&self) -> BTreeMap<String, u64> {
        self.with_world(|w| w.effects.injected.clone())
    }

    /// Calls held and dropped without taking effect ([`FaultConfig::timeouts`]), per operation
    /// key.
    pub fn timeout_counts(&self) -> BTreeMap<String, u64> {
        self.with_world(|w| w.effects.timed_out.clone())
    }

    /// Adds a lost-answer fault to the active faults (the other faults stay).
    pub fn add_lost_answer(&self, lost: LostAnswer) -> Result<(), HandleError> {
        FaultConfig {
            lost_answers: vec![lost.clone()],
            ..FaultConfig::default()
        }
        .validate()
        .map_err(HandleError::InvalidFaults)?;
        self.with_world(|w| w.faults.lost_answers.push(lost));
        Ok(())
    }

    /// Zeroes the call counts, the applied, lost-answer, injected-error and timeout counts.
    pub fn reset_counts(&self) {
        self.with_world(|w| {
            w.counts.clear();
            w.effects.clear();
        });
    }

    /// Hardware failure: the machine becomes Broken with `power_state: error`.
    pub fn break_machine(&self, system_id: &str) -> Result<(), HandleError> {
        self.with_machine(system_id, |m| {
            m.status_before_broken = Some(m.status);
            m.status = NodeStatus::Broken;
            m.pending = None;
            m.pending_power = None;
            m.power_state = PowerState::Error;
            m.status_message = Some("Marked broken".to_owned());
            "Simulated hardware failure".clone_into(&mut m.error_description);
        })
    }

    /// Forces the power state (e.g. `Off` for a machine that lost power).
    pub fn set_power(&self, system_id: &str, power: PowerState) -> Result<(), HandleError> {
        self.with_machine(system_id, |m| {
            m.pending_power = None;
            m.power_state = power;
        })
    }

    /// Adds a tag (created when missing) to a machine.
    pub fn add_tag(&self, system_id: &str, tag: &str) -> Result<(), HandleError> {
        self.with_world(|w| w.ensure_tag(tag));
        self.with_machine(system_id, |m| {
            m.tags.insert(tag.to_owned());
        })
    }

    /// Removes a tag from a machine (the tag itself stays defined), as `tags/{name}/?op=update_nodes`
    /// with `remove=` does: the machine leaves every listing filtered on that tag.
    pub fn remove_tag(&self, system_id: &str, tag: &str) -> Result<(), HandleError> {
        self.with_machine(system_id, |m| {
            m.tags.remove(tag);
        })
    }

    /// Removes a machine from MAAS (it answers 404 afterwards).
    pub fn remove_machine(&self, system_id: &str) -> Result<(), HandleError> {
        self.with_world(|w| {
            let index = w
                .machine_index(system_id)
                .ok_or_else(|| HandleError::NoSuchMachine(system_id.to_owned()))?;
            w.machines.remove(index);
            w.dirty = true;
            Ok(())
        })
    }

    /// Every VM host, ordered by id.
    pub fn vm_hosts(&self) -> Vec<VmHostView> {
        self.with_world(|w| w.vm_hosts.iter().map(|h| VmHostView::of(w, h)).collect())
    }

    /// What happened to VM hosts (registered, composed, updated, decomposed, deleted), oldest
    /// first; at most the latest 1024.
    pub fn vm_host_events(&self) -> Vec<VmHostEvent> {
        self.with_world(|w| w.vm_host_events.clone())
    }

    /// Creates a VM host as if MAAS had registered it; returns its id. Refused for a name
    /// in use, an unknown zone, pool or host machine, or a type other than `lxd`/`virsh`.
    pub fn add_vm_host(&self, spec: VmHostSpec) -> Result<u64, HandleError> {
        self.with_world(|w| {
            let invalid = |what: String| Err(HandleError::InvalidVmHost(what));
            if spec.name.is_empty() || w.vm_hosts.iter().any(|h| h.name == spec.name) {
                return invalid(format!("name {:?} is empty or taken", spec.name));
            }
            if !["lxd", "virsh"].contains(&spec.kind.as_str()) {
                return invalid(format!("type {:?} is not lxd or virsh", spec.kind));
            }
            if !w.zones.iter().any(|z| z.name == spec.zone) {
                return invalid(format!("no zone {:?}", spec.zone));
            }
            if !w.pools.iter().any(|p| p.name == spec.pool) {
                return invalid(format!("no pool {:?}", spec.pool));
            }
            let architecture = match &spec.host_system_id {
                Some(sid) => match w.machine_index(sid) {
                    Some(i) => w.machines[i].architecture.clone(),
                    None => return Err(HandleError::NoSuchMachine(sid.clone())),
                },
                None => "amd64/generic".to_owned(),
            };
            for tag in &spec.tags {
                w.ensure_tag(tag);
            }
            let id = w.new_id();
            w.add_vm_host(VmHost {
                id,
                name: spec.name,
                kind: spec.kind,
                power_address: spec.power_address,
                zone: spec.zone,
                pool: spec.pool,
                host_system_id: spec.host_system_id,
                cores: spec.cores,
                memory: spec.memory,
                local_storage: spec.local_storage,
                cpu_over_commit_ratio: spec.cpu_over_commit_ratio,
                memory_over_commit_ratio: spec.memory_over_commit_ratio,
                tags: spec.tags.into_iter().collect(),
                architecture,
                storage_pool: "default".to_owned(),
            });
            Ok(id)
        })
    }

    /// The next deployment of this machine ends in Failed deployment (11).
    pub fn fail_next_deploy(&self, system_id: &str) -> Result<(), HandleError> {
        self.add_machine_fault(system_id, |faults| &mut faults.fail_next_deploy_system_ids)
    }

    /// Every deployment of this machine fails until [`Self::clear_deploy_failure`].
    pub fn fail_all_deploys(&self, system_id: &str) -> Result<(), HandleError> {
        self.add_machine_fault(system_id, |faults| &mut faults.fail_deploy_system_ids)
    }

    /// The next deployment of this machine loses power: Failed deployment, `power_state: error`.
    pub fn power_fail_deploys(&self, system_id: &str) -> Result<(), HandleError> {
        self.add_machine_fault(system_id, |faults| &mut faults.power_fail_system_ids)
    }

    /// Undoes [`Self::fail_all_deploys`], [`Self::fail_next_deploy`] and [`Self::power_fail_deploys`].
    pub fn clear_deploy_failure(&self, system_id: &str) {
        self.with_world(|w| {
            w.faults.fail_deploy_system_ids.retain(|s| s != system_id);
            w.faults
                .fail_next_deploy_system_ids
                .retain(|s| s != system_id);
            w.faults.power_fail_system_ids.retain(|s| s != system_id);
        });
    }

    /// The next `n` releases (without erase) end in Releasing failed (13).
    pub fn fail_next_releases(&self, n: u32) {
        self.with_world(|w| w.faults.fail_next_releases = n);
    }

    /// Sets one of the region's configuration settings as an admin's `op=set_config` would
    /// (`enable_disk_erasing_on_release`, `disk_erase_with_secure_erase`,
    /// `disk_erase_with_quick_erase`); `false` when the simulator does not model `name`.
    pub fn set_config(&self, name: &str, value: bool) -> bool {
        self.with_world(|w| {
            let known = w.settings.set(name, value);
            w.dirty |= known;
            known
        })
    }

    /// The next `n` erasures end in Failed disk erasing (15).
    pub fn fail_next_erases(&self, n: u32) {
        self.with_world(|w| w.faults.fail_next_erases = n);
    }

    /// The next `n` deployments (any machine) fail.
    pub fn fail_next_deploys(&self, n: u32) {
        self.with_world(|w| w.faults.fail_next_deploys = n);
    }
}

/// Installs `faults`, turning `outage_seconds` into an outage deadline.
pub(crate) fn apply_faults(world: &mut World, mut faults: FaultConfig) {
    if let Some(seconds) = faults.outage_seconds.take() {
        world.outage_until_ms = Some(world.now_ms() + seconds.saturating_mul(1000));
    }
    world.faults = faults;
}
