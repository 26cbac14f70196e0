//! The whole simulated MAAS region: objects, clock, time-driven transitions.
//!
//! Time is evaluated lazily: every request (and a ticker) calls [`World::advance`] first, so a
//! zero duration is exact — the request after a deploy already sees Deployed.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::config::Timings;
use crate::faults::{EffectCounts, FaultConfig};
use crate::model::{
    BootResource, DnsResource, Domain, IpRange, LinkMode, Machine, Outcome, PendingKind, Pool,
    PowerState, ReleaseResult, Subnet, Tag, Vlan, VmHost, Zone,
};
use crate::settings::Settings;
use crate::status::NodeStatus;
use crate::vmhost_events::VmHostEvent;

/// Monotonic simulator clock (milliseconds since start).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }
}

impl Clock {
    pub(crate) fn now_ms(self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The instant of simulator time `ms`.
    pub(crate) fn instant(self, ms: u64) -> Instant {
        self.epoch + std::time::Duration::from_millis(ms)
    }
}

/// Random source for fault rolls; seeded so runs are reproducible.
#[derive(Debug, Clone)]
pub(crate) struct SimRng(pub(crate) StdRng);

impl Default for SimRng {
    fn default() -> Self {
        Self(StdRng::seed_from_u64(0))
    }
}

/// Deployment messages MAAS shows while Deploying, by fraction of the deploy time elapsed.
const DEPLOY_MESSAGES: [(u64, &str); 5] = [
    (0, "Performing PXE boot"),
    (20, "Loading ephemeral"),
    (40, "Installing OS"),
    (70, "Configuring OS"),
    (90, "Rebooting"),
];

/// Error text MAAS shows when curtin fails.
pub(crate) const INSTALL_FAILED: &str =
    "Installation failed (refer to the installation log for more information).";
/// Error text when the BMC stops answering during a deployment.
pub(crate) const POWER_FAILED: &str = "Failed to power on node - Power on for the node failed: Failed to login to virsh console (simulated BMC failure).";

/// Everything the simulator knows. Serialized whole into the state file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct World {
    pub(crate) machines: Vec<Machine>,
    pub(crate) zones: Vec<Zone>,
    pub(crate) pools: Vec<Pool>,
    pub(crate) tags: Vec<Tag>,
    pub(crate) domains: Vec<Domain>,
    pub(crate) dns_resources: Vec<DnsResource>,
    pub(crate) subnets: Vec<Subnet>,
    /// Tagged VLANs (untagged ones are implied by the subnets of each fabric).
    #[serde(default)]
    pub(crate) vlans: Vec<Vlan>,
    /// Reserved and dynamic IP ranges.
    #[serde(default)]
    pub(crate) ip_ranges: Vec<IpRange>,
    pub(crate) boot_resources: Vec<BootResource>,
    /// VM hosts (MAAS 3.x pods).
    #[serde(default)]
    pub(crate) vm_hosts: Vec<VmHost>,
    /// Whether this MAAS has VM hosts (3.x) or not (4.0 / [dev]); from the configuration.
    #[serde(skip)]
    pub(crate) vm_hosts_supported: bool,
    /// What happened to VM hosts (registered, composed, updated, deleted), oldest first
    /// (simulator bookkeeping, in memory only).
    #[serde(skip)]
    pub(crate) vm_host_events: Vec<VmHostEvent>,
    pub(crate) next_id: u64,
    pub(crate) timings: Timings,
    /// Seed of the configuration: the hardware spread, and the spread of deployment times.
    #[serde(default)]
    pub(crate) seed: u64,
    #[serde(default)]
    pub(crate) faults: FaultConfig,
    /// The region's configuration (`get_config`/`set_config`).
    #[serde(default)]
    pub(crate) settings: Settings,
    #[serde(skip)]
    pub(crate) outage_until_ms: Option<u64>,
    #[serde(skip)]
    pub(crate) counts: BTreeMap<String, u64>,
    /// Calls that took effect, and answers lost after taking effect, per operation key.
    #[serde(skip)]
    pub(crate) effects: EffectCounts,
    #[serde(skip)]
    pub(crate) clock: Clock,
    #[serde(skip)]
    pub(crate) rng: SimRng,
    #[serde(skip)]
    pub(crate) dirty: bool,
}

impl World {
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    pub(crate) fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Creates the manual tag `name` unless it exists: naming a tag on a machine creates it.
    pub(crate) fn ensure_tag(&mut self, name: &str) {
        if !self.tags.iter().any(|t| t.name == name) {
            self.tags.push(Tag {
                name: name.to_owned(),
                definition: String::new(),
                comment: String::new(),
                kernel_opts: String::new(),
            });
        }
    }

    /// Applies every transition that is due.
    pub(crate) fn advance(&mut self) {
        let now = self.now_ms();
        let mut changed = false;
        for machine in &mut self.machines {
            changed |= advance_machine(machine, now);
        }
        changed |= self.settle_vm_hosts();
        if changed {
            self.dirty = true;
        }
        if self.outage_until_ms.is_some_and(|until| until <= now) {
            self.outage_until_ms = None;
        }
    }

    /// Notes every machine's current status in its history (a change is recorded when it
    /// differs from the last one noted). Called after anything that may have changed a status
    /// without dating it itself, so no change is missed whichever code path made it.
    pub(crate) fn note_statuses(&mut self) {
        let now = self.now_ms();
        for machine in &mut self.machines {
            machine.history.note(machine.status, now);
        }
    }

    pub(crate) fn machine_index(&self, system_id: &str) -> Option<usize> {
        self.machines.iter().position(|m| m.system_id == system_id)
    }

    pub(crate) fn domain_name(&self, id: u64) -> &str {
        self.domains
            .iter()
            .find(|d| d.id == id)
            .map_or("maas", |d| d.name.as_str())
    }

    pub(crate) fn default_domain_id(&self) -> u64 {
        self.domains.first().map_or(0, |d| d.id)
    }

    /// Addresses in use on `subnet_id` (machine links and the gateway).
    pub(crate) fn used_ips(&self, subnet_id: u64) -> HashSet<IpAddr> {
        let mut used: HashSet<IpAddr> = self
            .machines
            .iter()
            .flat_map(|m| m.interfaces.iter())
            .flat_map(|i| i.links.iter())
            .filter(|l| l.subnet_id == Some(subnet_id))
            .filter_map(|l| l.ip)
            .collect();
        if let Some(subnet) = self.subnets.iter().find(|s| s.id == subnet_id) {
            used.extend(subnet.gateway_ip);
            used.extend(subnet.dns_servers.iter().copied());
        }
        used
    }

    /// The first free address of a subnet, skipping the first ten (infrastructure range) and
    /// the reserved and dynamic ranges, as MAAS's automatic assignment does.
    pub(crate) fn free_ip(&self, subnet_id: u64) -> Option<IpAddr> {
        let subnet = self.subnets.iter().find(|s| s.id == subnet_id)?;
        let used = self.used_ips(subnet_id);
        subnet.cidr.hosts().skip(10).find(|ip| {
            !used.contains(ip)
                && !self
                    .ip_ranges
                    .iter()
                    .any(|r| r.subnet_id == subnet_id && r.contains(*ip))
        })
    }

    /// Assigns addresses to every `auto` link without one (done when a deployment starts).
    pub(crate) fn assign_auto_ips(&mut self, index: usize) {
        let links: Vec<(usize, usize, u64)> = self.machines[index]
            .interfaces
            .iter()
            .enumerate()
            .flat_map(|(i, iface)| {
                iface.links.iter().enumerate().filter_map(move |(j, l)| {
                    (l.mode == LinkMode::Auto && l.ip.is_none()).then_some((
                        i,
                        j,
                        l.subnet_id.unwrap_or(0),
                    ))
                })
            })
            .collect();
        for (i, j, subnet_id) in links {
            let ip = self.free_ip(subnet_id);
            self.machines[index].interfaces[i].links[j].ip = ip;
        }
    }

    /// Decides how the next deployment of `system_id` ends, consuming one-shot faults.
    pub(crate) fn deploy_outcome(&mut self, system_id: &str) -> Outcome {
        if self
            .faults
            .power_fail_system_ids
            .iter()
            .any(|s| s == system_id)
        {
            Outcome::PowerFail
        } else if self
            .faults
            .fail_deploy_system_ids
            .iter()
            .any(|s| s == system_id)
        {
            Outcome::Fail
        } else if let Some(i) = self
            .faults
            .fail_next_deploy_system_ids
            .iter()
            .position(|s| s == system_id)
        {
            self.faults.fail_next_deploy_system_ids.remove(i);
            Outcome::Fail
        } else if self.faults.fail_next_deploys > 0 {
            self.faults.fail_next_deploys -= 1;
            Outcome::Fail
        } else {
            Outcome::Success
        }
    }

    pub(crate) fn release_outcome(&mut self, erase: bool) -> Outcome {
        let counter = if erase {
            &mut self.faults.fail_next_erases
        } else {
            &mut self.faults.fail_next_releases
        };
        if *counter > 0 {
            *counter -= 1;
            Outcome::Fail
        } else {
            Outcome::Success
        }
    }
}

/// Advances one machine to `now`; true when anything changed.
pub(crate) fn advance_machine(machine: &mut Machine, now: u64) -> bool {
    let mut changed = false;
    if let Some(power) = machine.pending_power.filter(|p| p.due_ms <= now) {
        machine.power_state = power.target;
        machine.pending_power = None;
        changed = true;
    }
    let Some(pending) = machine.pending.clone() else {
        return changed;
    };
    if pending.due_ms > now {
        if pending.kind == PendingKind::Deploy {
            let span = pending.due_ms.saturating_sub(pending.started_ms).max(1);
            let percent = now.saturating_sub(pending.started_ms) * 100 / span;
            let message = DEPLOY_MESSAGES
                .iter()
                .rev()
                .find(|(at, _)| percent >= *at)
                .map(|(_, m)| *m);
            if let Some(message) = message
                && machine.status_message.as_deref() != Some(message)
            {
                machine.status_message = Some(message.to_owned());
                changed = true;
            }
        }
        return changed;
    }
    machine.pending = None;
    match (pending.kind, pending.outcome) {
        (PendingKind::Deploy, Outcome::Success) => {
            machine.status = NodeStatus::Deployed;
            machine.status_message = Some("Deployed".to_owned());
            machine.power_state = PowerState::On;
        }
        (PendingKind::Deploy, Outcome::Fail) => {
            machine.status = NodeStatus::FailedDeployment;
            machine.status_message = Some("Failed deployment".to_owned());
            INSTALL_FAILED.clone_into(&mut machine.error_description);
        }
        (PendingKind::Deploy, Outcome::PowerFail) => {
            machine.status = NodeStatus::FailedDeployment;
            machine.status_message = Some(POWER_FAILED.to_owned());
            POWER_FAILED.clone_into(&mut machine.error_description);
            machine.power_state = PowerState::Error;
            machine.pending_power = None;
        }
        (PendingKind::Release | PendingKind::Erase, Outcome::Success) => {
            finalize_release(machine);
            settle_release(machine, ReleaseResult::Released);
        }
        (PendingKind::Release, _) => {
            settle_release(machine, ReleaseResult::Failed);
            machine.status = NodeStatus::FailedReleasing;
            machine.status_message = Some("Releasing failed".to_owned());
            "Failed to power off node (simulated fault)."
                .clone_into(&mut machine.error_description);
        }
        (PendingKind::Erase, _) => {
            settle_release(machine, ReleaseResult::Failed);
            machine.status = NodeStatus::FailedDiskErasing;
            machine.status_message = Some("Failed to erase disks".to_owned());
            "Failed to erase disks (simulated fault).".clone_into(&mut machine.error_description);
            machine.power_state = PowerState::Off;
        }
        (PendingKind::Commission, Outcome::Success) => {
            machine.status = NodeStatus::Ready;
            machine.status_message = Some("Ready".to_owned());
            machine.power_state = PowerState::Off;
        }
        (PendingKind::Commission, _) => {
            machine.status = NodeStatus::FailedCommissioning;
            machine.status_message = Some("Failed commissioning".to_owned());
        }
    }
    // Dated when it was due, not when the next request or tick happened to look.
    machine.history.note(machine.status, pending.due_ms);
    true
}

/// Records how the release in progress (the latest [`crate::model::ReleaseRecord`]) ended.
pub(crate) fn settle_release(machine: &mut Machine, result: ReleaseResult) {
    if let Some(record) = machine
        .releases
        .last_mut()
        .filter(|r| r.result == ReleaseResult::InProgress)
    {
        record.result = result;
    }
    // MAAS deletes a machine composed on a VM host when its release finishes.
    if result == ReleaseResult::Released && machine.vm_host_id.is_some() {
        machine.decomposed = true;
    }
}

/// The end of a release: Ready, unowned, OS and workload annotations cleared, auto IPs freed.
pub(crate) fn finalize_release(machine: &mut Machine) {
    machine.status = NodeStatus::Ready;
    machine.status_message = Some("Released".to_owned());
    machine.status_action = String::new();
    machine.owner = None;
    machine.agent_name.clear();
    machine.owner_data.clear();
    machine.osystem.clear();
    machine.distro_series.clear();
    machine.hwe_kernel = None;
    machine.user_data = None;
    machine.ephemeral_deploy = false;
    machine.enable_hw_sync = false;
    machine.locked = false;
    machine.register_vmhost = None;
    machine.pending = None;
    machine.pending_power = None;
    if machine.power_state != PowerState::Error {
        machine.power_state = PowerState::Off;
    }
    for link in machine
        .interfaces
        .iter_mut()
        .flat_map(|i| i.links.iter_mut())
    {
        if matches!(link.mode, LinkMode::Auto | LinkMode::Dhcp) {
            link.ip = None;
        }
    }
}

/// Rebases pending deadlines to "remaining time" so a reloaded state file resumes them.
pub(crate) fn rebase_for_save(world: &World) -> World {
    let now = world.now_ms();
    let mut copy = world.clone();
    for machine in &mut copy.machines {
        if let Some(p) = machine.pending.as_mut() {
            p.due_ms = p.due_ms.saturating_sub(now);
            p.started_ms = 0;
        }
        if let Some(p) = machine.pending_power.as_mut() {
            p.due_ms = p.due_ms.saturating_sub(now);
        }
    }
    copy
}
