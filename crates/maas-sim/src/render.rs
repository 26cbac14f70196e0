//! JSON shapes of MAAS objects (`DISPLAYED_MACHINE_FIELDS` and friends), `resource_uri` on all.

use serde_json::{Value, json};

use crate::model::{
    BootResource, DnsResource, Domain, Interface, IpRange, Machine, Pool, Subnet, Tag, VmHost, Zone,
};
use crate::netmodel::{self, VlanInfo};
use crate::vmhosts::overcommitted;
use crate::world::World;

/// API root path.
pub(crate) const API: &str = "/MAAS/api/2.0/";

pub(crate) fn zone(z: &Zone) -> Value {
    json!({"id": z.id, "name": z.name, "description": z.description, "resource_uri": format!("{API}zones/{}/", z.name)})
}

pub(crate) fn pool(p: &Pool) -> Value {
    json!({"id": p.id, "name": p.name, "description": p.description, "resource_uri": format!("{API}resourcepool/{}/", p.id)})
}

pub(crate) fn tag(t: &Tag) -> Value {
    json!({"name": t.name, "definition": t.definition, "comment": t.comment, "kernel_opts": t.kernel_opts,
        "resource_uri": format!("{API}tags/{}/", t.name)})
}

pub(crate) fn domain(world: &World, d: &Domain) -> Value {
    let count = world
        .dns_resources
        .iter()
        .filter(|r| r.domain_id == d.id)
        .count()
        + world
            .machines
            .iter()
            .filter(|m| m.domain_id == d.id)
            .count();
    json!({"id": d.id, "name": d.name, "ttl": d.ttl, "authoritative": d.authoritative,
        "is_default": d.id == world.default_domain_id(), "resource_record_count": count,
        "resource_uri": format!("{API}domains/{}/", d.id)})
}

/// A VLAN (`/fabrics/{id}/vlans/` and embedded in subnets and interfaces).
pub(crate) fn vlan(v: &VlanInfo) -> Value {
    json!({"id": v.id, "vid": v.vid, "name": v.name, "fabric": v.fabric(), "fabric_id": v.fabric_id, "mtu": v.mtu,
        "dhcp_on": v.vid == 0, "external_dhcp": null, "relay_vlan": null, "primary_rack": null, "secondary_rack": null,
        "space": "undefined", "resource_uri": format!("{API}vlans/{}/", v.id)})
}

pub(crate) fn subnet(s: &Subnet) -> Value {
    let v = netmodel::subnet_vlan(s);
    json!({"id": s.id, "name": s.name, "cidr": s.cidr.to_string(), "vlan": vlan(&v), "space": s.space,
        "gateway_ip": s.gateway_ip.map(|ip| ip.to_string()), "dns_servers": s.dns_servers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "rdns_mode": 2, "allow_dns": true, "allow_proxy": true, "active_discovery": false, "managed": true,
        "disabled_boot_architectures": [], "description": "", "resource_uri": format!("{API}subnets/{}/", s.id)})
}

/// An IP range.
pub(crate) fn ip_range(world: &World, r: &IpRange) -> Value {
    let subnet_value = world.subnet(r.subnet_id).map_or(Value::Null, subnet);
    json!({"id": r.id, "type": r.kind.as_str(), "start_ip": r.start_ip.to_string(), "end_ip": r.end_ip.to_string(),
        "comment": r.comment, "subnet": subnet_value,
        "user": {"username": r.user, "is_superuser": true, "email": format!("{}@example.com", r.user), "is_local": true,
            "resource_uri": format!("{API}users/{}/", r.user)},
        "resource_uri": format!("{API}ipranges/{}/", r.id)})
}

fn params(i: &Interface) -> Value {
    let mut p = serde_json::Map::new();
    if let Some(mtu) = i.mtu {
        p.insert("mtu".to_owned(), json!(mtu));
    }
    if let Some(mode) = &i.bond_mode {
        p.insert("bond_mode".to_owned(), json!(mode));
        p.insert("bond_miimon".to_owned(), json!(100));
        p.insert("bond_downdelay".to_owned(), json!(0));
        p.insert("bond_updelay".to_owned(), json!(0));
        p.insert("bond_lacp_rate".to_owned(), json!("slow"));
        p.insert("bond_xmit_hash_policy".to_owned(), json!("layer2"));
        p.insert("bond_num_grat_arp".to_owned(), json!(1));
    }
    if p.is_empty() {
        json!("")
    } else {
        Value::Object(p)
    }
}

pub(crate) fn interface(world: &World, m: &Machine, i: &Interface) -> Value {
    let vlan_info = world.interface_vlan(i);
    let mut children: Vec<String> = netmodel::children(m, i.id)
        .map(|c| c.name.clone())
        .collect();
    children.sort();
    let links: Vec<Value> = i
        .links
        .iter()
        .map(|l| {
            let mut link = json!({"id": l.id, "mode": l.mode.as_str()});
            if let Some(s) = l
                .subnet_id
                .and_then(|id| world.subnets.iter().find(|s| s.id == id))
            {
                link["subnet"] = subnet(s);
            }
            if let Some(ip) = l.ip {
                link["ip_address"] = json!(ip.to_string());
            }
            link
        })
        .collect();
    let effective_mtu = i
        .mtu
        .unwrap_or_else(|| vlan_info.as_ref().map_or(1500, |v| v.mtu));
    json!({
        "id": i.id, "name": i.name, "type": i.kind.as_str(), "mac_address": i.mac_address,
        "vlan": vlan_info.as_ref().map(vlan), "links": links, "enabled": true, "tags": [], "params": params(i),
        "discovered": [], "effective_mtu": effective_mtu, "parents": netmodel::parent_names(m, i),
        "children": children, "link_connected": true,
        "interface_speed": 10000, "link_speed": 10000, "numa_node": 0, "sriov_max_vf": 0,
        "vendor": "Red Hat, Inc.", "product": "Virtio network device", "firmware_version": null,
        "system_id": m.system_id,
        "resource_uri": format!("{API}nodes/{}/interfaces/{}/", m.system_id, i.id),
    })
}

/// `{gateway_ip, link_id}` of the link chosen with `set_default_gateway`.
fn default_gateway(world: &World, m: &Machine, link_id: Option<u64>) -> Value {
    let gateway = link_id
        .and_then(|id| {
            m.interfaces
                .iter()
                .flat_map(|i| &i.links)
                .find(|l| l.id == id)
        })
        .and_then(|l| world.link_subnet(l))
        .and_then(|s| s.gateway_ip);
    json!({"gateway_ip": gateway.map(|g| g.to_string()), "link_id": link_id})
}

fn block_device(m: &Machine, index: usize) -> Value {
    let d = &m.disks[index];
    json!({"id": d.id, "name": d.name, "path": format!("/dev/disk/by-dname/{}", d.name), "size": d.size,
        "block_size": 512, "model": d.model, "serial": d.serial, "type": "physical", "tags": ["ssd"],
        "id_path": format!("/dev/{}", d.name), "uuid": null, "filesystem": null, "partitions": [],
        "partition_table_type": null, "available_size": d.size, "used_size": 0, "used_for": "Unused",
        "storage_pool": null, "numa_node": 0, "system_id": m.system_id,
        "resource_uri": format!("{API}nodes/{}/blockdevices/{}/", m.system_id, d.id)})
}

/// The full machine object.
pub(crate) fn machine(world: &World, m: &Machine) -> Value {
    let zone_value = world
        .zones
        .iter()
        .find(|z| z.name == m.zone)
        .map_or(Value::Null, zone);
    let pool_value = world
        .pools
        .iter()
        .find(|p| p.name == m.pool)
        .map_or(Value::Null, pool);
    let domain_value = world
        .domains
        .iter()
        .find(|d| d.id == m.domain_id)
        .map_or(Value::Null, |d| domain(world, d));
    let interfaces: Vec<Value> = m
        .interfaces
        .iter()
        .map(|i| interface(world, m, i))
        .collect();
    let disks: Vec<Value> = (0..m.disks.len()).map(|i| block_device(m, i)).collect();
    let ips: Vec<String> = m.ip_addresses().iter().map(ToString::to_string).collect();
    let mut value = json!({
        "system_id": m.system_id,
        "hostname": m.hostname,
        "description": m.description,
        "fqdn": format!("{}.{}", m.hostname, world.domain_name(m.domain_id)),
        "domain": domain_value,
        "owner": m.owner,
        "owner_data": m.owner_data,
        "workload_annotations": m.owner_data,
        "locked": m.locked,
        "hardware_uuid": m.hardware_uuid,
        "status": m.status.number(),
        "status_name": m.status.name(),
        "status_message": m.status_message,
        "status_action": m.status_action,
        "error_description": m.error_description,
        "power_state": m.power_state.as_str(),
        "power_type": m.power_type,
        "cpu_count": m.cpu_count,
        "cpu_speed": m.cpu_speed,
        "memory": m.memory,
        "swap_size": m.swap_size,
        "storage": m.storage_mb(),
        "architecture": m.architecture,
        "min_hwe_kernel": m.min_hwe_kernel,
        "hwe_kernel": m.hwe_kernel,
        "osystem": m.osystem,
        "distro_series": m.distro_series,
        "ephemeral_deploy": m.ephemeral_deploy,
        "netboot": m.netboot,
        "disable_ipv4": false,
        "enable_hw_sync": m.enable_hw_sync,
        "enable_kernel_crash_dump": false,
        "is_dpu": false,
        "ip_addresses": ips,
        "boot_interface": interfaces.first().cloned().unwrap_or(Value::Null),
        "interface_set": interfaces,
        "tag_names": m.tags.iter().collect::<Vec<_>>(),
        "zone": zone_value,
        "pool": pool_value,
        "pod": pod_ref(world, m),
        "parent": parent_ref(world, m),
        "node_type": 0,
        "node_type_name": "Machine",
        "boot_disk": disks.first().cloned().unwrap_or(Value::Null),
        "blockdevice_set": disks.clone(),
        "physicalblockdevice_set": disks,
        "virtualblockdevice_set": [],
        "volume_groups": [],
        "raids": [],
        "cache_sets": [],
        "bcaches": [],
        "special_filesystems": [],
        "numanode_set": [{"index": 0, "cores": (0..m.cpu_count).collect::<Vec<_>>(), "memory": m.memory, "hugepages_set": []}],
        "hardware_info": {"system_vendor": "QEMU", "system_product": "Standard PC (Q35 + ICH9, 2009)", "cpu_model": "Intel Xeon Processor"},
        "default_gateways": {"ipv4": default_gateway(world, m, m.gateway_link_ipv4),
            "ipv6": default_gateway(world, m, m.gateway_link_ipv6)},
        "bios_boot_method": "uefi",
        "address_ttl": null,
        "current_commissioning_result_id": -1,
        "current_testing_result_id": -1,
        "current_installation_result_id": -1,
        "commissioning_status": 2,
        "commissioning_status_name": "Passed",
        "testing_status": 2,
        "testing_status_name": "Passed",
        "resource_uri": format!("{API}machines/{}/", m.system_id),
    });
    if !world.vm_hosts_supported {
        // MAAS 4.0 / [dev] dropped the field with VM hosts.
        if let Some(fields) = value.as_object_mut() {
            fields.remove("pod");
        }
    }
    value
}

/// `pod` of a machine composed on a VM host: `{id, name, resource_uri}`.
fn pod_ref(world: &World, m: &Machine) -> Value {
    m.vm_host_id
        .and_then(|id| world.vm_hosts.iter().find(|h| h.id == id))
        .map_or(Value::Null, |h| {
            json!({"id": h.id, "name": h.name, "resource_uri": format!("{API}vm-hosts/{}/", h.id)})
        })
}

/// `parent` of a VM composed on a VM host that runs on a MAAS machine: that machine.
fn parent_ref(world: &World, m: &Machine) -> Value {
    m.vm_host_id
        .and_then(|id| world.vm_hosts.iter().find(|h| h.id == id))
        .and_then(|h| h.host_system_id.as_deref())
        .map_or(Value::Null, |sid| {
            json!({"system_id": sid, "resource_uri": format!("{API}machines/{sid}/"), "__incomplete__": true})
        })
}

/// A VM host (`/vm-hosts/`): totals, what its machines use, what is left with overcommit.
pub(crate) fn vm_host(world: &World, h: &VmHost) -> Value {
    let used = world.vm_host_used(h.id);
    let total_cores = u64::from(h.cores);
    let available = json!({
        "cores": overcommitted(total_cores, h.cpu_over_commit_ratio).saturating_sub(used.cores),
        "memory": overcommitted(h.memory, h.memory_over_commit_ratio).saturating_sub(used.memory),
        "local_storage": h.local_storage.saturating_sub(used.local_storage),
    });
    let zone_value = world
        .zones
        .iter()
        .find(|z| z.name == h.zone)
        .map_or(Value::Null, zone);
    let pool_value = world
        .pools
        .iter()
        .find(|p| p.name == h.pool)
        .map_or(Value::Null, pool);
    let host = h.host_system_id.as_deref().map_or(Value::Null, |sid| {
        json!({"system_id": sid, "resource_uri": format!("{API}machines/{sid}/"), "__incomplete__": true})
    });
    let storage_pool = json!({"id": format!("{}-{}", h.id, h.storage_pool), "name": h.storage_pool,
        "type": "dir", "path": "/var/snap/lxd/common/lxd/storage-pools/default", "total": h.local_storage,
        "used": used.local_storage, "available": h.local_storage.saturating_sub(used.local_storage),
        "default": true});
    json!({
        "id": h.id,
        "name": h.name,
        "type": h.kind,
        "power_address": h.power_address,
        "zone": zone_value,
        "pool": pool_value,
        "host": host,
        "total": {"cores": total_cores, "memory": h.memory, "local_storage": h.local_storage},
        "used": {"cores": used.cores, "memory": used.memory, "local_storage": used.local_storage},
        "available": available,
        "cpu_over_commit_ratio": h.cpu_over_commit_ratio,
        "memory_over_commit_ratio": h.memory_over_commit_ratio,
        "storage_pools": [storage_pool],
        "default_storage_pool": format!("{}-{}", h.id, h.storage_pool),
        "default_macvlan_mode": null,
        "tags": h.tags.iter().collect::<Vec<_>>(),
        "architectures": [h.architecture],
        "version": if h.kind == "lxd" { "5.21.1" } else { "8.0.0" },
        "capabilities": ["composable", "dynamic_local_storage", "over_commit", "storage_pools"],
        "resource_uri": format!("{API}vm-hosts/{}/", h.id),
    })
}

pub(crate) fn dns_resource(world: &World, r: &DnsResource) -> Value {
    let domain_name = world.domain_name(r.domain_id);
    let fqdn = if r.name == "@" {
        domain_name.to_owned()
    } else {
        format!("{}.{domain_name}", r.name)
    };
    let ips: Vec<Value> = r
        .ip_addresses
        .iter()
        .map(|ip| {
            let subnet = world.subnets.iter().find(|s| s.cidr.contains(ip)).map(subnet);
            json!({"ip": ip.to_string(), "alloc_type": 4, "alloc_type_name": "User reserved", "created": "2024-01-01T00:00:00",
                "owner": {"username": r.owner}, "subnet": subnet, "interface_set": [],
                "resource_uri": format!("{API}ipaddresses/")})
        })
        .collect();
    json!({"id": r.id, "fqdn": fqdn, "address_ttl": r.address_ttl, "ip_addresses": ips, "resource_records": [],
        "resource_uri": format!("{API}dnsresources/{}/", r.id)})
}

pub(crate) fn boot_resource(b: &BootResource, detailed: bool) -> Value {
    let mut v = json!({"id": b.id, "type": b.rtype, "name": b.name, "architecture": b.architecture,
        "subarches": b.subarches, "title": b.title, "last_deployed": null,
        "resource_uri": format!("{API}boot-resources/{}/", b.id)});
    if !b.base_image.is_empty() {
        v["base_image"] = json!(b.base_image);
    }
    if detailed {
        v["sets"] = json!({"20240101": {"version": "20240101", "label": "stable", "size": 1_073_741_824u64,
            "complete": true, "progress": 100, "files": {}}});
    }
    v
}
