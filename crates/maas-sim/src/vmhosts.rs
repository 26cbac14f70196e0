//! VM hosts (MAAS 3.x "pods"): resource accounting, machines composed on them, the
//! registration of machines deployed with `register_vmhost`/`install_kvm`, and the record of
//! what happened to VM hosts (for tests: "composed exactly once").

use std::collections::BTreeSet;

use serde::Serialize;

use crate::history::StatusHistory;
use crate::model::{
    Disk, Interface, Link, LinkMode, Machine, Outcome, Pending, PendingKind, Placement, PowerState,
    VmHost,
};
use crate::status::NodeStatus;
use crate::vmhost_events::{VmHostEvent, VmHostEventKind};
use crate::world::World;

/// At most this many VM host events are kept, the oldest dropped first.
const KEPT_EVENTS: usize = 1024;

/// Cores, memory (MiB) and storage (bytes) of a VM host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Resources {
    pub(crate) cores: u64,
    pub(crate) memory: u64,
    pub(crate) local_storage: u64,
}

/// A machine to compose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ComposeSpec {
    /// `None`: MAAS makes one up.
    pub(crate) hostname: Option<String>,
    pub(crate) cores: u32,
    /// MiB.
    pub(crate) memory: u64,
    /// Disk sizes in bytes.
    pub(crate) disks: Vec<u64>,
    pub(crate) zone: String,
    pub(crate) pool: String,
    pub(crate) architecture: String,
    pub(crate) cpu_speed: u32,
}

/// `n × ratio`, rounded down (MAAS compares against the overcommitted total).
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
pub(crate) fn overcommitted(n: u64, ratio: f64) -> u64 {
    (n as f64 * ratio).floor().max(0.0) as u64
}

impl World {
    /// The VM host whose id is `key`.
    pub(crate) fn vm_host_index(&self, key: &str) -> Option<usize> {
        self.vm_hosts.iter().position(|h| h.id.to_string() == key)
    }

    /// Machines composed on VM host `id` (not yet deleted).
    pub(crate) fn vm_host_machines(&self, id: u64) -> impl Iterator<Item = &Machine> {
        self.machines
            .iter()
            .filter(move |m| m.vm_host_id == Some(id) && !m.decomposed)
    }

    /// What the machines composed on VM host `id` use.
    pub(crate) fn vm_host_used(&self, id: u64) -> Resources {
        self.vm_host_machines(id)
            .fold(Resources::default(), |used, m| Resources {
                cores: used.cores + u64::from(m.cpu_count),
                memory: used.memory + m.memory,
                local_storage: used.local_storage + m.disks.iter().map(|d| d.size).sum::<u64>(),
            })
    }

    /// Notes an event of VM host `index`.
    pub(crate) fn record_vm_host(
        &mut self,
        kind: VmHostEventKind,
        index: usize,
        system_id: Option<String>,
    ) {
        let host = &self.vm_hosts[index];
        let event = VmHostEvent {
            kind,
            vm_host_id: host.id,
            vm_host_name: host.name.clone(),
            system_id,
        };
        if self.vm_host_events.len() == KEPT_EVENTS {
            self.vm_host_events.remove(0);
        }
        self.vm_host_events.push(event);
    }

    /// Adds a VM host and records its registration; returns its index.
    pub(crate) fn add_vm_host(&mut self, host: VmHost) -> usize {
        let system_id = host.host_system_id.clone();
        self.vm_hosts.push(host);
        let index = self.vm_hosts.len() - 1;
        self.record_vm_host(VmHostEventKind::Registered, index, system_id);
        self.dirty = true;
        index
    }

    /// Deletes VM host `index`; with `decompose` its machines are deleted too, else they stay
    /// as plain machines.
    pub(crate) fn delete_vm_host(&mut self, index: usize, decompose: bool) {
        let id = self.vm_hosts[index].id;
        if decompose {
            let gone: Vec<String> = self
                .vm_host_machines(id)
                .map(|m| m.system_id.clone())
                .collect();
            for system_id in gone {
                self.record_vm_host(VmHostEventKind::Decomposed, index, Some(system_id));
            }
            self.machines.retain(|m| m.vm_host_id != Some(id));
        } else {
            for m in self
                .machines
                .iter_mut()
                .filter(|m| m.vm_host_id == Some(id))
            {
                m.vm_host_id = None;
            }
        }
        self.record_vm_host(VmHostEventKind::Deleted, index, None);
        self.vm_hosts.remove(index);
        self.dirty = true;
    }

    /// The VM host running on machine `system_id`, if any.
    pub(crate) fn hosted_vm_host(&self, system_id: &str) -> Option<usize> {
        self.vm_hosts
            .iter()
            .position(|h| h.host_system_id.as_deref() == Some(system_id))
    }

    /// Registers the machines whose `register_vmhost` deployment finished and deletes the
    /// composed machines whose release finished; true when anything changed.
    pub(crate) fn settle_vm_hosts(&mut self) -> bool {
        let mut changed = false;
        let finished: Vec<usize> = self
            .machines
            .iter()
            .enumerate()
            .filter(|(_, m)| m.status == NodeStatus::Deployed && m.register_vmhost.is_some())
            .map(|(i, _)| i)
            .collect();
        for index in finished {
            let Some(kind) = self.machines[index].register_vmhost.take() else {
                continue;
            };
            changed = true;
            let system_id = self.machines[index].system_id.clone();
            if self.hosted_vm_host(&system_id).is_some() {
                continue;
            }
            let id = self.new_id();
            let m = &self.machines[index];
            let ip = m
                .ip_addresses()
                .first()
                .map_or_else(|| m.hostname.clone(), ToString::to_string);
            let power_address = if kind == "virsh" {
                format!("qemu+ssh://virsh@{ip}/system")
            } else {
                format!("{ip}:8443")
            };
            let host = VmHost {
                id,
                name: m.hostname.clone(),
                kind,
                power_address,
                zone: m.zone.clone(),
                pool: m.pool.clone(),
                host_system_id: Some(system_id),
                cores: m.cpu_count,
                memory: m.memory,
                local_storage: m.disks.iter().map(|d| d.size).sum(),
                cpu_over_commit_ratio: 1.0,
                memory_over_commit_ratio: 1.0,
                tags: BTreeSet::new(),
                architecture: m.architecture.clone(),
                storage_pool: "default".to_owned(),
            };
            self.add_vm_host(host);
        }
        if self.machines.iter().any(|m| m.decomposed) {
            let gone: Vec<(Option<usize>, String)> = self
                .machines
                .iter()
                .filter(|m| m.decomposed)
                .map(|m| {
                    let host = m
                        .vm_host_id
                        .and_then(|id| self.vm_hosts.iter().position(|h| h.id == id));
                    (host, m.system_id.clone())
                })
                .collect();
            for (host, system_id) in gone {
                if let Some(index) = host {
                    self.record_vm_host(VmHostEventKind::Decomposed, index, Some(system_id));
                }
            }
            self.machines.retain(|m| !m.decomposed);
            changed = true;
        }
        changed
    }

    /// Creates a machine on VM host `index` (resources already checked). It commissions
    /// (Commissioning → Ready, `timings.commission`) like a new machine. Returns its system id.
    pub(crate) fn compose_machine(&mut self, index: usize, spec: ComposeSpec) -> String {
        let now = self.now_ms();
        let host_id = self.vm_hosts[index].id;
        // The VM is cabled where its host is: the host machine's first NIC, else fabric-0.
        let subnet_id = self.vm_hosts[index]
            .host_system_id
            .as_deref()
            .and_then(|sid| self.machine_index(sid))
            .and_then(|i| self.machines[i].interfaces.first())
            .map_or_else(|| self.subnets.first().map_or(1, |s| s.id), |i| i.subnet_id);
        let id = self.new_id();
        let iface_id = self.new_id();
        let link_id = self.new_id();
        let system_id = vm_system_id(id, &self.machines);
        let disks = spec
            .disks
            .iter()
            .zip(0u64..)
            .map(|(size, d)| Disk {
                id: id * 10 + d,
                name: format!("sd{}", char::from(b'a' + u8::try_from(d % 26).unwrap_or(0))),
                size: *size,
                model: "QEMU HARDDISK".to_owned(),
                serial: format!("lxd_root_{id}_{d}"),
            })
            .collect();
        let mac = format!(
            "00:16:3e:{:02x}:{:02x}:{:02x}",
            (id >> 16) & 0xff,
            (id >> 8) & 0xff,
            id & 0xff
        );
        let mut history = StatusHistory::default();
        history.note(NodeStatus::New, now);
        history.note(NodeStatus::Commissioning, now);
        let hostname = spec.hostname.unwrap_or_else(|| format!("vm-{id}"));
        let placement = Placement {
            zone: spec.zone,
            pool: spec.pool,
            architecture: spec.architecture,
        };
        let domain_id = self.default_domain_id();
        let machine = Machine {
            cpu_count: spec.cores,
            cpu_speed: spec.cpu_speed,
            memory: spec.memory,
            disks,
            interfaces: vec![Interface::nic(
                iface_id,
                "eth0".to_owned(),
                mac,
                subnet_id,
                vec![Link {
                    id: link_id,
                    mode: LinkMode::Auto,
                    subnet_id: Some(subnet_id),
                    ip: None,
                }],
            )],
            power_type: "lxd".to_owned(),
            power_state: PowerState::On,
            status: NodeStatus::Commissioning,
            status_message: Some("Commissioning".to_owned()),
            status_action: "commission".to_owned(),
            hardware_uuid: format!("00000000-0000-4000-8000-{id:012x}"),
            pending: Some(Pending::starting(
                PendingKind::Commission,
                now,
                self.timings.commission,
                Outcome::Success,
            )),
            power_on_count: 1,
            history,
            vm_host_id: Some(host_id),
            ..Machine::new(id, system_id.clone(), hostname, domain_id, placement)
        };
        self.machines.push(machine);
        self.record_vm_host(VmHostEventKind::Composed, index, Some(system_id.clone()));
        self.dirty = true;
        // A zero commissioning time is over at once, as every other transition.
        self.advance();
        system_id
    }
}

/// A six-character system id derived from the object id, unique among `machines`.
fn vm_system_id(id: u64, machines: &[Machine]) -> String {
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstwxy3468";
    let mut n = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    loop {
        let mut out = String::with_capacity(6);
        let mut x = n;
        for _ in 0..6 {
            let digit = usize::try_from(x % 24).unwrap_or(0);
            out.push(char::from(ALPHABET[digit]));
            x /= 24;
        }
        if !machines.iter().any(|m| m.system_id == out) {
            return out;
        }
        n = n.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overcommit_rounds_down() {
        assert_eq!(overcommitted(4, 1.0), 4);
        assert_eq!(overcommitted(4, 2.5), 10);
        assert_eq!(overcommitted(3, 0.5), 1);
    }

    #[test]
    fn vm_system_ids_are_unique() {
        let a = vm_system_id(1001, &[]);
        assert_eq!(a.len(), 6);
        assert_ne!(a, vm_system_id(1002, &[]));
    }
}
