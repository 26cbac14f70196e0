//! Pure mappings from a MAAS machine to MaasHost labels and status fields.

use std::collections::BTreeMap;

use capmaas_api::host::{HostInterface, PowerState, ProvisioningState};
use capmaas_api::keys;
use maas_api_client::{Machine, MachineStatus, PowerState as MaasPower};

/// A label value as Kubernetes accepts it (≤ 63 of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends), or `None`: MAAS names may contain characters labels cannot.
pub fn label_value(value: &str) -> Option<String> {
    keys::is_label_segment(value).then(|| value.to_owned())
}

/// Whether `name` can be a MaasHost name (DNS-1123 subdomain); MAAS system ids always can.
pub fn valid_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The architecture without the subarchitecture: `amd64/generic` → `amd64`.
pub fn arch_family(architecture: &str) -> &str {
    architecture.split('/').next().unwrap_or(architecture)
}

/// Labels maas-client owns on an imported host: inventory, zone, pool, architecture, one per
/// tag, and the inventory's extra labels. Values a label cannot hold are left out.
pub fn host_labels(
    machine: &Machine,
    inventory: &str,
    extra: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = extra.cloned().unwrap_or_default();
    let mut put = |key: &str, value: &str| {
        if let Some(v) = label_value(value) {
            labels.insert(key.to_owned(), v);
        }
    };
    put(keys::LABEL_HOST_INVENTORY, inventory);
    put(keys::LABEL_HOST_ZONE, machine.zone_name());
    put(keys::LABEL_HOST_POOL, machine.pool_name());
    put(keys::LABEL_HOST_ARCH, arch_family(&machine.architecture));
    for tag in &machine.tag_names {
        if let Some(key) = keys::host_tag_label(tag) {
            labels.insert(key, "true".to_owned());
        }
    }
    labels
}

/// The host's power state field.
pub fn power_state(power: &MaasPower) -> PowerState {
    match power {
        MaasPower::On => PowerState::On,
        MaasPower::Off => PowerState::Off,
        MaasPower::Error => PowerState::Error,
        _ => PowerState::Unknown,
    }
}

/// Life-cycle state from the MAAS status, whether the machine is held by us, and whether a
/// deployment is requested.
pub fn provisioning_state(
    machine: Option<&Machine>,
    ours: bool,
    wants_deploy: bool,
) -> ProvisioningState {
    let Some(machine) = machine else {
        return ProvisioningState::Missing;
    };
    match machine.status {
        MachineStatus::Ready if wants_deploy => ProvisioningState::Allocating,
        MachineStatus::Ready => ProvisioningState::Available,
        MachineStatus::Allocated if ours => ProvisioningState::Allocated,
        MachineStatus::Deploying if ours => ProvisioningState::Deploying,
        MachineStatus::Deployed if ours => ProvisioningState::Deployed,
        MachineStatus::Releasing | MachineStatus::DiskErasing => ProvisioningState::Releasing,
        MachineStatus::FailedDeployment
        | MachineStatus::FailedReleasing
        | MachineStatus::FailedDiskErasing
            if ours =>
        {
            ProvisioningState::Failed
        }
        MachineStatus::Broken => ProvisioningState::Broken,
        _ => ProvisioningState::Unavailable,
    }
}

/// Storage in GiB from MAAS's decimal megabytes.
pub fn storage_gib(storage_mb: f64) -> i64 {
    if !storage_mb.is_finite() || storage_mb <= 0.0 {
        return 0;
    }
    // Rounded to whole GiB; a machine with more than 2^53 bytes of disk is not a concern.
    #[allow(clippy::cast_possible_truncation)]
    let gib = (storage_mb * 1_000_000.0 / 1_073_741_824.0).round() as i64;
    gib
}

/// Interfaces with their MACs, sorted by name (deterministic status).
pub fn interfaces(machine: &Machine) -> Vec<HostInterface> {
    let mut out: Vec<HostInterface> = machine
        .interface_set
        .iter()
        .filter(|i| !i.name.is_empty())
        .map(|i| HostInterface {
            name: i.name.clone(),
            mac: i.mac_address.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The interface MAAS boots the machine from (`boot_interface`), when it names one.
pub fn boot_interface(machine: &Machine) -> Option<HostInterface> {
    machine
        .boot_interface
        .as_ref()
        .filter(|i| !i.name.is_empty())
        .map(|i| HostInterface {
            name: i.name.clone(),
            mac: i.mac_address.clone(),
        })
}

/// The deployed image as `osystem/series`, when MAAS reports one.
pub fn deployed_image(machine: &Machine) -> Option<String> {
    match (machine.osystem.as_str(), machine.distro_series.as_str()) {
        (_, "") => None,
        ("", series) => Some(series.to_owned()),
        (os, series) => Some(format!("{os}/{series}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        serde_json::from_value(serde_json::json!({
            "system_id": "abc123",
            "status": 4,
            "architecture": "arm64/generic",
            "zone": {"id": 1, "name": "zone-a"},
            "pool": {"id": 2, "name": "prod pool"},
            "tag_names": ["gpu", "bad tag", "ssd"],
            "interface_set": [
                {"id": 2, "name": "eth1", "mac_address": "00:00:00:00:00:02"},
                {"id": 1, "name": "eth0", "mac_address": "00:00:00:00:00:01"}
            ],
            "osystem": "ubuntu",
            "distro_series": "jammy",
            "storage": 500_107.86
        }))
        .unwrap()
    }

    #[test]
    fn labels_skip_values_a_label_cannot_hold() {
        let extra = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        let labels = host_labels(&machine(), "inv", Some(&extra));
        assert_eq!(
            labels.get(keys::LABEL_HOST_ZONE).map(String::as_str),
            Some("zone-a")
        );
        assert_eq!(
            labels.get(keys::LABEL_HOST_POOL),
            None,
            "space in pool name"
        );
        assert_eq!(
            labels.get(keys::LABEL_HOST_ARCH).map(String::as_str),
            Some("arm64")
        );
        assert_eq!(
            labels.get(keys::LABEL_HOST_INVENTORY).map(String::as_str),
            Some("inv")
        );
        assert!(labels.contains_key("tag.maas.cluster.x-k8s.io/gpu"));
        assert!(labels.contains_key("tag.maas.cluster.x-k8s.io/ssd"));
        assert_eq!(labels.len(), 6);
    }

    #[test]
    fn status_fields() {
        let m = machine();
        assert_eq!(storage_gib(m.storage), 466);
        assert_eq!(storage_gib(f64::NAN), 0);
        let ifs = interfaces(&m);
        assert_eq!(ifs[0].name, "eth0");
        assert_eq!(deployed_image(&m).as_deref(), Some("ubuntu/jammy"));
        assert!(valid_object_name("abc123"));
        assert!(!valid_object_name("ABC"));
    }

    #[test]
    fn boot_interface_is_the_one_maas_names() {
        let mut m = machine();
        assert_eq!(boot_interface(&m), None, "MAAS gave no boot_interface");
        m.boot_interface = serde_json::from_value(serde_json::json!(
            {"id": 2, "name": "eth1", "mac_address": "00:00:00:00:00:02"}
        ))
        .unwrap();
        let expected = HostInterface {
            name: "eth1".into(),
            mac: "00:00:00:00:00:02".into(),
        };
        assert_eq!(boot_interface(&m), Some(expected.clone()));
        assert_eq!(
            crate::host::status::observed(&m).boot_interface,
            Some(expected)
        );
        m.boot_interface =
            serde_json::from_value(serde_json::json!({"id": 3, "name": ""})).unwrap();
        assert_eq!(boot_interface(&m), None, "an unnamed boot interface");
    }

    #[test]
    fn provisioning_states() {
        use MachineStatus as M;
        use ProvisioningState as P;
        assert_eq!(provisioning_state(None, false, false), P::Missing);
        // (MAAS status, ours, wants a deployment, expected).
        let cases = [
            (M::Ready, false, false, P::Available),
            (M::Ready, false, true, P::Allocating),
            (M::Deployed, true, true, P::Deployed),
            (M::Deployed, false, true, P::Unavailable),
            (M::FailedDeployment, true, true, P::Failed),
            (M::DiskErasing, true, false, P::Releasing),
        ];
        for (status, ours, wants_deploy, expected) in cases {
            let mut m = machine();
            m.status = status;
            assert_eq!(
                provisioning_state(Some(&m), ours, wants_deploy),
                expected,
                "{status:?} ours={ours} wants_deploy={wants_deploy}"
            );
        }
    }
}
