//! The initial world: generated deterministically from a seed, or read from a YAML inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use crate::config::SimConfig;
use crate::error::SimError;
use crate::model::{
    BootResource, Disk, Domain, Interface, Link, LinkMode, Machine, Placement, Pool, Subnet, Zone,
};
use crate::netsetup::{NicSpec, SubnetSpec};
use crate::status::NodeStatus;
use crate::world::{Clock, SimRng, World};

/// A YAML inventory file.
#[derive(Debug, Default, Deserialize)]
// Every field defaults, so an inventory file names only what it does not want generated.
#[serde(default, deny_unknown_fields)]
pub struct Inventory {
    /// Zones to create (besides `default`).
    pub zones: Vec<String>,
    /// Resource pools to create (besides `default`).
    pub pools: Vec<String>,
    /// Tags to create.
    pub tags: Vec<String>,
    /// Machines; fields left out are generated.
    pub machines: Vec<InventoryMachine>,
    /// Subnets besides the default `10.20.0.0/16` (fabric-0) and `10.30.0.0/16` (fabric-1),
    /// possibly on tagged VLANs (created when missing), with their IP ranges.
    pub subnets: Vec<SubnetSpec>,
    /// The CIDR of fabric-0's subnet, where every generated NIC is linked, instead of
    /// `10.20.0.0/16`; its gateway is its first address. A test world whose servers must be
    /// reachable on the test machine gives a loopback range (`127.20.0.0/16`).
    pub provisioning_subnet: Option<String>,
    /// Custom images an operator uploaded (`Uploaded` boot resources) besides the synced Ubuntu
    /// releases and `u-2204-0-k-1330-0`.
    pub images: Vec<InventoryImage>,
}

/// An uploaded custom image of a YAML inventory, deployable as `NAME` or `custom/NAME`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryImage {
    /// Image name, e.g. `u-2204-0-k-1264-0`.
    pub name: String,
    /// Title shown by MAAS (default: the name).
    pub title: Option<String>,
    /// The image it was built from (default `ubuntu/jammy`).
    pub base_image: Option<String>,
}

/// One machine of a YAML inventory.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryMachine {
    /// Hostname.
    pub hostname: Option<String>,
    /// System id (6 lowercase alphanumerics).
    pub system_id: Option<String>,
    /// Zone name.
    pub zone: Option<String>,
    /// Pool name.
    pub pool: Option<String>,
    /// Cores.
    pub cpu_count: Option<u32>,
    /// Memory in MiB.
    pub memory: Option<u64>,
    /// `amd64/generic`, `arm64/generic`...
    pub architecture: Option<String>,
    /// Tag names (created when missing).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Disk sizes in bytes.
    pub disks: Option<Vec<u64>>,
    /// MAC addresses, one NIC each.
    pub mac_addresses: Option<Vec<String>>,
    /// `ipmi`, `redfish`, `manual`...
    pub power_type: Option<String>,
    /// Initial status constant (`ready`, `new`, `broken`...), default `ready`.
    pub status: Option<String>,
    /// The NICs (MAC and subnet each), replacing the generated ones and `mac_addresses`.
    pub interfaces: Option<Vec<NicSpec>>,
}

const ADJECTIVES: [&str; 16] = [
    "able", "bold", "calm", "deft", "eager", "fair", "glad", "hale", "keen", "lucid", "merry",
    "neat", "proud", "quick", "sharp", "tidy",
];
const ANIMALS: [&str; 16] = [
    "ant", "bass", "crow", "deer", "eel", "fox", "gnu", "hare", "ibis", "jay", "koala", "lynx",
    "mole", "newt", "owl", "puma",
];
const SYSTEM_ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstwxy0123456789";
const CPU_CHOICES: [u32; 8] = [4, 8, 12, 16, 24, 32, 48, 64];
const MEMORY_GIB: [u64; 7] = [8, 16, 32, 64, 128, 256, 512];
const DISK_BYTES: [u64; 5] = [
    240_057_409_536,
    480_103_981_056,
    960_197_124_096,
    1_920_383_410_176,
    4_000_787_030_016,
];

fn names_or_default(names: &[String]) -> Vec<String> {
    let mut out = vec!["default".to_owned()];
    for n in names {
        let n = n.trim();
        if !n.is_empty() && !out.iter().any(|o| o == n) {
            out.push(n.to_owned());
        }
    }
    out
}

fn parse_net(cidr: &str) -> IpNet {
    cidr.parse()
        .unwrap_or_else(|_| IpNet::V4(ipnet::Ipv4Net::default()))
}

fn base_world(cfg: &SimConfig, zones: &[String], pools: &[String]) -> World {
    let subnet = |id: u64, name: &str, cidr: &str, gw: &str, fabric_id: u64| Subnet {
        id,
        name: name.to_owned(),
        cidr: parse_net(cidr),
        gateway_ip: gw.parse::<IpAddr>().ok(),
        dns_servers: Vec::new(),
        vlan_id: 5000 + fabric_id,
        fabric: format!("fabric-{fabric_id}"),
        fabric_id,
        space: "undefined".to_owned(),
        vid: 0,
    };
    World {
        machines: Vec::new(),
        zones: names_or_default(zones)
            .into_iter()
            .zip(1u64..)
            .map(|(name, id)| Zone {
                id,
                name,
                description: String::new(),
            })
            .collect(),
        pools: names_or_default(pools)
            .into_iter()
            .zip(0u64..)
            .map(|(name, id)| Pool {
                id,
                name,
                description: String::new(),
            })
            .collect(),
        tags: Vec::new(),
        domains: vec![Domain {
            id: 0,
            name: cfg.domain.clone(),
            ttl: None,
            authoritative: true,
        }],
        dns_resources: Vec::new(),
        vlans: Vec::new(),
        ip_ranges: Vec::new(),
        subnets: vec![
            subnet(1, "10.20.0.0/16", "10.20.0.0/16", "10.20.0.1", 0),
            subnet(2, "10.30.0.0/16", "10.30.0.0/16", "10.30.0.1", 1),
        ],
        boot_resources: default_boot_resources(),
        vm_hosts: Vec::new(),
        vm_hosts_supported: cfg.vm_hosts,
        vm_host_events: Vec::new(),
        next_id: 1000,
        timings: cfg.timings,
        seed: cfg.seed,
        faults: cfg.faults.clone(),
        settings: crate::settings::Settings::default(),
        outage_until_ms: None,
        counts: BTreeMap::new(),
        effects: crate::faults::EffectCounts::default(),
        clock: Clock::default(),
        rng: SimRng(StdRng::seed_from_u64(cfg.seed)),
        dirty: false,
    }
}

fn default_boot_resources() -> Vec<BootResource> {
    let synced = |id: u64, series: &str, version: &str| BootResource {
        id,
        rtype: "Synced".to_owned(),
        name: format!("ubuntu/{series}"),
        architecture: "amd64/ga-".to_owned() + version,
        subarches: format!("generic,hwe-{version},ga-{version}"),
        title: format!("Ubuntu {version} LTS"),
        base_image: String::new(),
    };
    vec![
        synced(1, "focal", "20.04"),
        synced(2, "jammy", "22.04"),
        synced(3, "noble", "24.04"),
        BootResource {
            id: 4,
            rtype: "Uploaded".to_owned(),
            name: "u-2204-0-k-1330-0".to_owned(),
            architecture: "amd64/generic".to_owned(),
            subarches: "generic".to_owned(),
            title: "Ubuntu 22.04 with Kubernetes 1.33.0".to_owned(),
            base_image: "ubuntu/jammy".to_owned(),
        },
    ]
}

/// Generates a unique MAAS-looking system id.
fn system_id(rng: &mut StdRng, taken: &BTreeSet<String>) -> String {
    loop {
        let id: String = (0..6)
            .map(|_| char::from(SYSTEM_ID_ALPHABET[rng.random_range(0..SYSTEM_ID_ALPHABET.len())]))
            .collect();
        if !taken.contains(&id) {
            return id;
        }
    }
}

fn hostname(index: usize) -> String {
    let base = format!("{}-{}", ADJECTIVES[index % 16], ANIMALS[(index / 16) % 16]);
    if index < 256 {
        base
    } else {
        format!("{base}-{}", index / 256)
    }
}

/// A generated machine; `index` makes hostnames and MACs unique.
fn generated_machine(
    world: &mut World,
    rng: &mut StdRng,
    index: usize,
    taken: &BTreeSet<String>,
) -> Machine {
    let id = world.new_id();
    let disk_count = rng.random_range(1..=3);
    let disks = (0..disk_count)
        .map(|d| Disk {
            id: id * 10 + d,
            name: format!("sd{}", char::from(b'a' + u8::try_from(d).unwrap_or(0))),
            size: DISK_BYTES[rng.random_range(0..DISK_BYTES.len())],
            model: "QEMU HARDDISK".to_owned(),
            serial: format!("QM{index:05}{d}"),
        })
        .collect();
    let nic_count = rng.random_range(1..=2u64);
    let interfaces = (0..nic_count)
        .map(|n| {
            let iface_id = world.new_id();
            let link_id = world.new_id();
            let subnet_id = n + 1;
            Interface::nic(
                iface_id,
                format!("eth{n}"),
                format!(
                    "52:54:00:{:02x}:{:02x}:{:02x}",
                    (index >> 8) & 0xff,
                    index & 0xff,
                    n
                ),
                subnet_id,
                vec![Link {
                    id: link_id,
                    mode: if n == 0 {
                        LinkMode::Auto
                    } else {
                        LinkMode::LinkUp
                    },
                    subnet_id: Some(subnet_id),
                    ip: None,
                }],
            )
        })
        .collect();
    let architecture = if rng.random_range(0..8) == 0 {
        "arm64/generic"
    } else {
        "amd64/generic"
    };
    let placement = Placement {
        zone: world.zones[index % world.zones.len()].name.clone(),
        pool: world.pools[index % world.pools.len()].name.clone(),
        architecture: architecture.to_owned(),
    };
    let system_id = system_id(rng, taken);
    Machine {
        cpu_count: CPU_CHOICES[rng.random_range(0..CPU_CHOICES.len())],
        cpu_speed: 2000 + 100 * rng.random_range(0..16u32),
        memory: MEMORY_GIB[rng.random_range(0..MEMORY_GIB.len())] * 1024,
        disks,
        interfaces,
        hardware_uuid: format!("{:08x}-0000-4000-8000-{:012x}", rng.random::<u32>(), index),
        ..Machine::new(
            id,
            system_id,
            hostname(index),
            world.default_domain_id(),
            placement,
        )
    }
}

fn apply_overrides(
    world: &mut World,
    m: &mut Machine,
    spec: &InventoryMachine,
) -> Result<(), String> {
    if let Some(h) = &spec.hostname {
        m.hostname.clone_from(h);
    }
    if let Some(s) = &spec.system_id {
        m.system_id.clone_from(s);
    }
    if let Some(z) = &spec.zone {
        if !world.zones.iter().any(|x| &x.name == z) {
            return Err(format!("machine {}: unknown zone {z}", m.hostname));
        }
        m.zone.clone_from(z);
    }
    if let Some(p) = &spec.pool {
        if !world.pools.iter().any(|x| &x.name == p) {
            return Err(format!("machine {}: unknown pool {p}", m.hostname));
        }
        m.pool.clone_from(p);
    }
    m.cpu_count = spec.cpu_count.unwrap_or(m.cpu_count);
    m.memory = spec.memory.unwrap_or(m.memory);
    if let Some(a) = &spec.architecture {
        m.architecture = if a.contains('/') {
            a.clone()
        } else {
            format!("{a}/generic")
        };
    }
    for t in &spec.tags {
        world.ensure_tag(t);
        m.tags.insert(t.clone());
    }
    if let Some(sizes) = &spec.disks {
        m.disks.truncate(sizes.len().max(1));
        for (disk, size) in m.disks.iter_mut().zip(sizes) {
            disk.size = *size;
        }
    }
    if let Some(macs) = &spec.mac_addresses {
        for (iface, mac) in m.interfaces.iter_mut().zip(macs) {
            iface.mac_address = mac.to_ascii_lowercase();
        }
    }
    if let Some(p) = &spec.power_type {
        m.power_type.clone_from(p);
    }
    if let Some(s) = &spec.status {
        m.status = NodeStatus::from_filter(s)
            .ok_or_else(|| format!("machine {}: unknown status {s}", m.hostname))?;
        m.status_message = Some(m.status.name().to_owned());
    }
    Ok(())
}

/// Reads a YAML inventory.
pub fn load_inventory(path: &Path) -> Result<Inventory, SimError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| SimError::io(path.display().to_string(), e))?;
    serde_saphyr::from_str(&text).map_err(|e| SimError::Inventory {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Builds the initial world from the config (and its inventory file, if any).
pub(crate) fn build_world(cfg: &SimConfig) -> Result<World, SimError> {
    let inventory = match &cfg.inventory_file {
        Some(path) => Some(load_inventory(path)?),
        None => None,
    };
    let inv = inventory.unwrap_or_default();
    let zones: Vec<String> = cfg.zones.iter().chain(&inv.zones).cloned().collect();
    let pools: Vec<String> = cfg.pools.iter().chain(&inv.pools).cloned().collect();
    let mut world = base_world(cfg, &zones, &pools);
    for t in &inv.tags {
        world.ensure_tag(t);
    }
    for image in &inv.images {
        if world.boot_resources.iter().any(|b| b.name == image.name) {
            continue;
        }
        let id = world.boot_resources.iter().map(|b| b.id).max().unwrap_or(0) + 1;
        world.boot_resources.push(BootResource {
            id,
            rtype: "Uploaded".to_owned(),
            name: image.name.clone(),
            architecture: "amd64/generic".to_owned(),
            subarches: "generic".to_owned(),
            title: image.title.clone().unwrap_or_else(|| image.name.clone()),
            base_image: image
                .base_image
                .clone()
                .unwrap_or_else(|| "ubuntu/jammy".to_owned()),
        });
    }
    let inventory_path = || {
        cfg.inventory_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    if let Some(cidr) = &inv.provisioning_subnet {
        let net: IpNet = cidr.parse().map_err(|e| SimError::Inventory {
            path: inventory_path(),
            message: format!("provisioning_subnet {cidr:?}: {e}"),
        })?;
        if let Some(subnet) = world.subnets.iter_mut().find(|s| s.id == 1) {
            subnet.name = net.trunc().to_string();
            subnet.cidr = net.trunc();
            subnet.gateway_ip = net.hosts().next();
        }
    }
    for subnet in &inv.subnets {
        world
            .add_subnet(subnet)
            .map_err(|message| SimError::Inventory {
                path: inventory_path(),
                message,
            })?;
    }
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut taken = BTreeSet::new();
    let count = if inv.machines.is_empty() {
        cfg.machines
    } else {
        inv.machines.len()
    };
    for index in 0..count {
        let mut machine = generated_machine(&mut world, &mut rng, index, &taken);
        if let Some(spec) = inv.machines.get(index) {
            let path = cfg
                .inventory_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            apply_overrides(&mut world, &mut machine, spec).map_err(|message| {
                SimError::Inventory {
                    path: path.clone(),
                    message,
                }
            })?;
            if taken.contains(&machine.system_id)
                || world
                    .machines
                    .iter()
                    .any(|m| m.hostname == machine.hostname)
            {
                return Err(SimError::Inventory {
                    path,
                    message: format!("duplicate machine {}", machine.hostname),
                });
            }
        }
        taken.insert(machine.system_id.clone());
        world.machines.push(machine);
        if let Some(nics) = inv.machines.get(index).and_then(|m| m.interfaces.as_ref()) {
            let last = world.machines.len() - 1;
            world
                .set_nics(last, nics)
                .map_err(|message| SimError::Inventory {
                    path: inventory_path(),
                    message,
                })?;
        }
    }
    world.dirty = false;
    Ok(world)
}

#[cfg(test)]
#[path = "inventory_tests.rs"]
mod tests;
