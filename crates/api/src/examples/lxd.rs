//! The LXD fields of CAPMAAS v0.9.0 (`lxdConfig`, `parent`, `lxd`) and the VM-host request of a
//! MaasHost: valid, defaulted and invalid cases.

use serde_json::{Value, json};

use super::valid::{
    maas_cluster, maas_cluster_template, maas_host, maas_machine, maas_machine_template, object,
};
use super::{
    DefaultedExample, Example, InvalidExample, UNSUPPORTED, merged, rejected_create as create,
    rejected_update as update,
};

/// CAPMAAS's `hcp` flavor sets these, every field of `lxdConfig` spelled out.
fn lxd_config() -> Value {
    json!({
        "enabled": true,
        "resourcePool": "lxd-hosts",
        "zone": "az1",
        "storageBackend": "zfs",
        "storageSize": "100",
        "nicType": "bridge",
        "nicParent": "br0",
        "skipNetworkUpdate": true
    })
}

fn machine_lxd() -> Value {
    json!({
        "enabled": true,
        "vmConfig": {
            "diskSize": 80,
            "storagePool": "default",
            "network": "10.20.0.0/24",
            "interfaceLinkModes": {"eth0": "auto", "eth1": "dhcp", "eth2": "static", "eth3": "link_up"},
            "autoStart": true
        }
    })
}

/// `base` merged with `patch`, renamed `name`.
fn named(base: &Value, name: &str, patch: &Value) -> Value {
    let mut object = merged(base, patch);
    object["metadata"]["name"] = Value::from(name);
    object
}

pub(super) fn valid() -> Vec<Example> {
    vec![
        Example {
            name: "maascluster-lxd",
            kind: "MaasCluster",
            object: named(
                &maas_cluster(),
                "prod-lxd",
                &json!({"spec": {"lxdConfig": lxd_config()}}),
            ),
        },
        Example {
            name: "maasclustertemplate-lxd",
            kind: "MaasClusterTemplate",
            object: named(
                &maas_cluster_template(),
                "prod-cluster-lxd",
                &json!({"spec": {"template": {"spec": {"lxdConfig": lxd_config()}}}}),
            ),
        },
        Example {
            name: "maasmachine-lxd",
            kind: "MaasMachine",
            object: named(
                &maas_machine(),
                "prod-cp-lxd",
                &json!({"spec": {"systemID": null, "providerID": null, "parent": "4y3h7a", "lxd": machine_lxd()}}),
            ),
        },
        Example {
            name: "maasmachinetemplate-lxd",
            kind: "MaasMachineTemplate",
            object: named(
                &maas_machine_template(),
                "prod-control-plane-lxd",
                &json!({"spec": {"template": {"spec": {"lxd": machine_lxd()}}}}),
            ),
        },
        Example {
            name: "maashost-vmhost",
            kind: "MaasHost",
            object: named(
                &maas_host(),
                "7ad3kq",
                &json!({"spec": {"systemID": "7ad3kq", "provisioning": {"registerVMHost": true}}}),
            ),
        },
    ]
}

pub(super) fn defaulted() -> Vec<DefaultedExample> {
    vec![
        DefaultedExample {
            name: "maascluster-lxd-defaults",
            kind: "MaasCluster",
            object: object(
                "MaasCluster",
                "lxd-defaults",
                &json!({"dnsDomain": "maas", "lxdConfig": {}}),
            ),
            defaulted: object(
                "MaasCluster",
                "lxd-defaults",
                &json!({"dnsDomain": "maas", "lxdConfig": {
                    "enabled": false, "storageBackend": "zfs", "storageSize": "50", "skipNetworkUpdate": true
                }}),
            ),
        },
        DefaultedExample {
            name: "maasmachine-lxd-defaults",
            kind: "MaasMachine",
            object: object(
                "MaasMachine",
                "lxd-defaults",
                &json!({"image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096, "lxd": {"vmConfig": {}}}),
            ),
            defaulted: object(
                "MaasMachine",
                "lxd-defaults",
                &json!({
                    "image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096, "deployInMemory": false,
                    "lxd": {"enabled": false, "vmConfig": {"diskSize": 60, "autoStart": true}}
                }),
            ),
        },
    ]
}

const STORAGE_SIZE: &str =
    "spec.lxdConfig.storageSize must be a positive whole number of GB as a string, e.g. \"50\"";
const LINK_MODE_KEYS: &str =
    "spec.lxd.vmConfig.interfaceLinkModes keys are VM interface names eth0, eth1, ... ethN";
const VM_HOSTNAME: &str =
    "spec.vms[].hostname must be a DNS label (lower case letters, digits and '-')";
const VM_ENTRY_IMMUTABLE: &str =
    "spec.vms[] entries are immutable: remove the entry and add another";

/// A `spec.vms` entry of a VM host's MaasHost.
fn vm_request(hostname: &str, cores: i32) -> Value {
    json!({
        "hostname": hostname, "cores": cores, "memoryMiB": 4096, "diskGB": 60,
        "consumer": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
                     "name": "cp-0", "uid": "0c6f5e1a-0000-4000-8000-000000000001"}
    })
}

const LXD_IN_MEMORY: &str = "spec.lxd.enabled and spec.deployInMemory cannot both be true: MAAS composes and registers VMs only for a deployment to disk";

pub(super) fn invalid() -> Vec<InvalidExample> {
    let c = maas_cluster();
    let ct = maas_cluster_template();
    let m = maas_machine();
    let mt = maas_machine_template();
    let vm = |vm: Value| json!({"spec": {"lxd": {"enabled": true, "vmConfig": vm}}});
    vec![
        create(
            "cluster-lxd-nictype-unknown",
            &c,
            &json!({"spec": {"lxdConfig": {"nicType": "bridged"}}}),
            "spec.lxdConfig.nicType",
            UNSUPPORTED,
        ),
        create(
            "cluster-lxd-storagesize-unit",
            &c,
            &json!({"spec": {"lxdConfig": {"storageSize": "50G"}}}),
            "spec.lxdConfig.storageSize",
            STORAGE_SIZE,
        ),
        create(
            "clustertemplate-lxd-storagesize-zero",
            &ct,
            &json!({"spec": {"template": {"spec": {"lxdConfig": {"storageSize": "0"}}}}}),
            "spec.template.spec.lxdConfig.storageSize",
            STORAGE_SIZE,
        ),
        create(
            "machine-parent-empty",
            &m,
            &json!({"spec": {"parent": ""}}),
            "spec.parent",
            "should be at least 1 chars long",
        ),
        create(
            "machine-lxd-disksize-zero",
            &m,
            &vm(json!({"diskSize": 0})),
            "spec.lxd.vmConfig.diskSize",
            "should be greater than or equal to 1",
        ),
        create(
            "machine-lxd-link-mode-unknown",
            &m,
            &vm(json!({"interfaceLinkModes": {"eth0": "bridge"}})),
            "spec.lxd.vmConfig.interfaceLinkModes",
            UNSUPPORTED,
        ),
        create(
            "machine-lxd-link-mode-interface-name",
            &m,
            &vm(json!({"interfaceLinkModes": {"enp5s0": "dhcp"}})),
            "spec.lxd.vmConfig.interfaceLinkModes",
            LINK_MODE_KEYS,
        ),
        create(
            "machinetemplate-lxd-link-mode-interface-name",
            &mt,
            &json!({"spec": {"template": {"spec": {"lxd": {"vmConfig": {"interfaceLinkModes": {"eno1": "auto"}}}}}}}),
            "spec.template.spec.lxd.vmConfig.interfaceLinkModes",
            LINK_MODE_KEYS,
        ),
        create(
            "machine-lxd-in-memory",
            &m,
            &json!({"spec": {"lxd": {"enabled": true}, "deployInMemory": true}}),
            "spec.lxd.enabled",
            LXD_IN_MEMORY,
        ),
        create(
            "machinetemplate-lxd-in-memory",
            &mt,
            &json!({"spec": {"template": {"spec": {"lxd": {"enabled": true}, "deployInMemory": true}}}}),
            "spec.template.spec.lxd.enabled",
            LXD_IN_MEMORY,
        ),
        create(
            "host-vm-hostname-not-a-label",
            &maas_host(),
            &json!({"spec": {"vms": [vm_request("VM_cp-0", 2)]}}),
            "spec.vms[0].hostname",
            VM_HOSTNAME,
        ),
        update(
            "host-vm-entry-changed",
            &merged(
                &maas_host(),
                &json!({"spec": {"vms": [vm_request("vm-cp-0-0c6f5", 2)]}}),
            ),
            &json!({"spec": {"vms": [vm_request("vm-cp-0-0c6f5", 8)]}}),
            "spec.vms[0]",
            VM_ENTRY_IMMUTABLE,
        ),
        create(
            "host-vmhost-in-memory",
            &maas_host(),
            &json!({"spec": {"provisioning": {"registerVMHost": true, "deployInMemory": true}}}),
            "spec.provisioning.registerVMHost",
            "spec.provisioning.registerVMHost and spec.provisioning.deployInMemory cannot both be true: MAAS registers only a machine deployed to disk as a VM host",
        ),
    ]
}
