//! Unit tests of the initial world: generation and the YAML inventory.
use super::*;

/// A default configuration that reads the inventory `yaml` from a file, and that file's path
/// for rewriting it; the directory lives as long as the caller holds it.
fn inventory_file(yaml: &str) -> (tempfile::TempDir, std::path::PathBuf, SimConfig) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inv.yaml");
    std::fs::write(&path, yaml).unwrap();
    let cfg = SimConfig {
        inventory_file: Some(path.clone()),
        ..SimConfig::default()
    };
    (dir, path, cfg)
}
#[test]
fn generation_is_deterministic_and_unique() {
    let cfg = SimConfig {
        machines: 300,
        zones: vec!["z1".into(), "z2".into()],
        ..SimConfig::default()
    };
    let a = build_world(&cfg).unwrap();
    let b = build_world(&cfg).unwrap();
    let ids: Vec<_> = a.machines.iter().map(|m| m.system_id.clone()).collect();
    assert_eq!(
        ids,
        b.machines
            .iter()
            .map(|m| m.system_id.clone())
            .collect::<Vec<_>>()
    );
    let unique: BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 300);
    let macs: BTreeSet<_> = a
        .machines
        .iter()
        .flat_map(|m| m.interfaces.iter().map(|i| i.mac_address.clone()))
        .collect();
    let nics: usize = a.machines.iter().map(|m| m.interfaces.len()).sum();
    assert_eq!(macs.len(), nics);
    let hosts: BTreeSet<_> = a.machines.iter().map(|m| m.hostname.clone()).collect();
    assert_eq!(hosts.len(), 300);
    for m in &a.machines {
        assert_eq!(m.system_id.len(), 6);
        assert!((4..=64).contains(&m.cpu_count));
        assert!((8 * 1024..=512 * 1024).contains(&m.memory));
        assert!(["default", "z1", "z2"].contains(&m.zone.as_str()));
    }
    let other = build_world(&SimConfig { seed: 2, ..cfg }).unwrap();
    assert_ne!(other.machines[0].system_id, a.machines[0].system_id);
}

#[test]
fn yaml_inventory_overrides_generated_fields() {
    let (_dir, path, cfg) = inventory_file(
        "zones: [rack1]\ntags: [gpu]\nmachines:\n  - hostname: big\n    system_id: abc123\n    zone: rack1\n    cpu_count: 64\n    memory: 524288\n    tags: [gpu, nvme]\n  - hostname: small\n    status: new\n",
    );
    let world = build_world(&cfg).unwrap();
    assert_eq!(world.machines.len(), 2);
    assert_eq!(world.machines[0].system_id, "abc123");
    assert_eq!(world.machines[0].zone, "rack1");
    assert!(world.machines[0].tags.contains("nvme"));
    assert!(world.tags.iter().any(|t| t.name == "nvme"));
    assert_eq!(world.machines[1].status, NodeStatus::New);

    std::fs::write(&path, "machines:\n  - zone: nowhere\n").unwrap();
    assert!(build_world(&cfg).is_err());
    std::fs::write(&path, "machines:\n  - flavour: x\n").unwrap();
    assert!(build_world(&cfg).is_err());
}

#[test]
fn yaml_inventory_adds_subnets_vlans_ranges_and_nics() {
    let (_dir, path, cfg) = inventory_file(
        "subnets:\n  - cidr: 10.40.0.0/24\n    vid: 100\n    gateway_ip: 10.40.0.1\n    dns_servers: [10.40.0.2]\n    dynamic_ranges: [10.40.0.200-10.40.0.250]\n    reserved_ranges: [10.40.0.2-10.40.0.9]\nmachines:\n  - hostname: a\n    interfaces:\n      - {mac_address: '52:54:00:00:00:0A', subnet: 10.40.0.0/24}\n      - {mac_address: '52:54:00:00:00:0b'}\n",
    );
    let world = build_world(&cfg).unwrap();
    assert_eq!(world.subnets.len(), 3);
    let tagged = &world.subnets[2];
    assert_eq!((tagged.vid, tagged.fabric_id), (100, 0));
    assert_eq!(world.vlans.len(), 1);
    assert_eq!(world.vlans[0].id, tagged.vlan_id);
    assert_eq!(world.ip_ranges.len(), 2);
    let nics = &world.machines[0].interfaces;
    assert_eq!(nics.len(), 2);
    assert_eq!(
        (nics[0].mac_address.as_str(), nics[0].subnet_id),
        ("52:54:00:00:00:0a", tagged.id)
    );
    assert_eq!(nics[1].subnet_id, 1, "the first subnet by default");
    for bad in [
        "subnets:\n  - cidr: 10.20.5.0/24\n",
        "subnets:\n  - cidr: nope\n",
        "subnets:\n  - {cidr: 10.50.0.0/24, vid: 5000}\n",
        "machines:\n  - interfaces: [{mac_address: 'aa', subnet: 10.99.0.0/16}]\n",
    ] {
        std::fs::write(&path, bad).unwrap();
        assert!(build_world(&cfg).is_err(), "{bad}");
    }
}

#[test]
fn yaml_inventory_adds_uploaded_images_deployable_by_name() {
    let (_dir, _, cfg) = inventory_file("images:\n  - name: u-2204-0-k-1264-0\n");
    let world = build_world(&cfg).unwrap();
    let image = world
        .boot_resources
        .iter()
        .find(|b| b.name == "u-2204-0-k-1264-0")
        .unwrap();
    assert_eq!(image.rtype, "Uploaded");
    assert_eq!(image.base_image, "ubuntu/jammy");
    assert_eq!(
        image.os_and_series(),
        ("custom".to_owned(), "u-2204-0-k-1264-0".to_owned())
    );
}

#[test]
fn yaml_inventory_moves_the_provisioning_subnet() {
    let (_dir, path, cfg) =
        inventory_file("provisioning_subnet: 127.20.0.0/16\nmachines:\n  - hostname: a\n");
    let world = build_world(&cfg).unwrap();
    let subnet = world.subnets.iter().find(|s| s.id == 1).unwrap();
    assert_eq!(subnet.cidr.to_string(), "127.20.0.0/16");
    assert_eq!(subnet.gateway_ip, Some("127.20.0.1".parse().unwrap()));
    assert_eq!(world.machines[0].interfaces[0].subnet_id, 1);
    assert_eq!(world.free_ip(1), Some("127.20.0.11".parse().unwrap()));

    std::fs::write(&path, "provisioning_subnet: nope\n").unwrap();
    let error = build_world(&cfg).unwrap_err().to_string();
    assert!(error.contains("provisioning_subnet"), "{error}");
}
