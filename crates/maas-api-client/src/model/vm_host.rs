//! VM hosts (MAAS 3.x "pods", `/vm-hosts/`) and the references machines hold to them.

use serde::{Deserialize, Serialize};

use super::{ResourcePool, Zone, null_default};

/// Cores, memory (MiB) and local storage (bytes) of a VM host: its `total`, what its machines
/// `used`, what is `available`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VmHostResources {
    /// Cores.
    #[serde(deserialize_with = "null_default")]
    pub cores: u64,
    /// Memory in MiB.
    #[serde(deserialize_with = "null_default")]
    pub memory: u64,
    /// Local storage in bytes.
    #[serde(deserialize_with = "null_default")]
    pub local_storage: u64,
}

/// The machine a VM host runs on (`host`), or the parent of an LXD VM (`parent`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeRef {
    /// System id.
    #[serde(deserialize_with = "null_default")]
    pub system_id: String,
    /// API path.
    #[serde(deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// A machine's `pod`: the VM host it was composed on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodRef {
    /// VM host id.
    pub id: i64,
    /// VM host name.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// API path.
    #[serde(deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// A storage pool of a VM host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VmHostStoragePool {
    /// Id (a string in MAAS 3.x).
    #[serde(deserialize_with = "null_default")]
    pub id: serde_json::Value,
    /// Name, as `storage` of a compose request refers to it.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// `dir`, `zfs`, `lvm`, ...
    #[serde(rename = "type", deserialize_with = "null_default")]
    pub kind: String,
    /// Bytes.
    #[serde(deserialize_with = "null_default")]
    pub total: u64,
    /// Bytes.
    #[serde(deserialize_with = "null_default")]
    pub used: u64,
    /// Bytes.
    #[serde(deserialize_with = "null_default")]
    pub available: u64,
    /// The pool composed disks go to unless told otherwise.
    #[serde(deserialize_with = "null_default")]
    pub default: bool,
}

/// A VM host (`GET /vm-hosts/{id}/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmHost {
    /// Id.
    pub id: i64,
    /// Name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// `lxd` or `virsh`.
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
    /// Where MAAS reaches it, e.g. `10.0.0.5:8443`.
    #[serde(default, deserialize_with = "null_default")]
    pub power_address: String,
    /// Zone of composed machines by default.
    #[serde(default)]
    pub zone: Option<Zone>,
    /// Pool of composed machines by default.
    #[serde(default)]
    pub pool: Option<ResourcePool>,
    /// The MAAS machine it runs on (deployed with `register_vmhost`), if any.
    #[serde(default)]
    pub host: Option<NodeRef>,
    /// Its resources.
    #[serde(default, deserialize_with = "null_default")]
    pub total: VmHostResources,
    /// What its machines use.
    #[serde(default, deserialize_with = "null_default")]
    pub used: VmHostResources,
    /// What is left.
    #[serde(default, deserialize_with = "null_default")]
    pub available: VmHostResources,
    /// Cores may be committed this many times over.
    #[serde(default = "one", deserialize_with = "ratio")]
    pub cpu_over_commit_ratio: f64,
    /// Memory may be committed this many times over.
    #[serde(default = "one", deserialize_with = "ratio")]
    pub memory_over_commit_ratio: f64,
    /// Storage pools.
    #[serde(default, deserialize_with = "null_default")]
    pub storage_pools: Vec<VmHostStoragePool>,
    /// Tags.
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// Architectures it composes, e.g. `amd64/generic`.
    #[serde(default, deserialize_with = "null_default")]
    pub architectures: Vec<String>,
    /// LXD or libvirt version.
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
    /// e.g. `composable`, `over_commit`.
    #[serde(default, deserialize_with = "null_default")]
    pub capabilities: Vec<String>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

fn one() -> f64 {
    1.0
}

/// An overcommit ratio; `null` means 1.
fn ratio<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(1.0))
}

impl VmHost {
    /// System id of the machine it runs on, if any.
    pub fn host_system_id(&self) -> Option<&str> {
        self.host
            .as_ref()
            .map(|h| h.system_id.as_str())
            .filter(|s| !s.is_empty())
    }

    /// Cores that can still be composed: `total × cpu_over_commit_ratio − used`.
    pub fn cores_left(&self) -> u64 {
        overcommitted(self.total.cores, self.cpu_over_commit_ratio).saturating_sub(self.used.cores)
    }

    /// MiB that can still be composed: `total × memory_over_commit_ratio − used`.
    pub fn memory_left_mib(&self) -> u64 {
        overcommitted(self.total.memory, self.memory_over_commit_ratio)
            .saturating_sub(self.used.memory)
    }
}

#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
fn overcommitted(n: u64, ratio: f64) -> u64 {
    if !ratio.is_finite() || ratio <= 0.0 {
        return 0;
    }
    (n as f64 * ratio).floor() as u64
}

/// Answer of `POST /vm-hosts/{id}/?op=compose`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComposedMachine {
    /// The new machine.
    pub system_id: String,
    /// Its API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_maas_vm_host_and_ignores_unknown_fields() {
        let host: VmHost = serde_json::from_str(
            r#"{"id": 3, "name": "lxd1", "type": "lxd", "power_address": "10.0.0.5:8443",
            "zone": {"id": 1, "name": "default"}, "pool": {"id": 0, "name": "default"},
            "host": {"system_id": "abc123", "__incomplete__": true},
            "total": {"cores": 8, "memory": 16384, "local_storage": 100000000000},
            "used": {"cores": 2, "memory": 4096, "local_storage": 8000000000},
            "available": {"cores": 6, "memory": 12288, "local_storage": 92000000000},
            "cpu_over_commit_ratio": 2.0, "memory_over_commit_ratio": null,
            "storage_pools": [{"id": "3-default", "name": "default", "type": "dir", "total": 1, "used": 0,
                "available": 1, "default": true, "path": "/x"}],
            "tags": ["t"], "architectures": ["amd64/generic"], "version": "5.21",
            "capabilities": ["composable"], "new_field": {"x": 1}, "resource_uri": "/MAAS/api/2.0/vm-hosts/3/"}"#,
        )
        .unwrap();
        assert_eq!(host.host_system_id(), Some("abc123"));
        assert_eq!(host.cores_left(), 14);
        assert_eq!(host.memory_left_mib(), 12288);
        assert!((host.memory_over_commit_ratio - 1.0).abs() < f64::EPSILON);
        assert_eq!(host.storage_pools[0].name, "default");
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        assert!(serde_json::from_str::<VmHost>(r#"{"id": "x"}"#).is_err());
        assert!(serde_json::from_str::<VmHost>(r#"{"id": 1, "total": {"cores": -1}}"#).is_err());
        assert!(serde_json::from_str::<VmHost>("[]").is_err());
        let minimal: VmHost =
            serde_json::from_str(r#"{"id": 1, "host": null, "total": null}"#).unwrap();
        assert_eq!(minimal.host_system_id(), None);
        assert_eq!(minimal.cores_left(), 0);
    }
}
