#![allow(clippy::unwrap_used)]

use kube::CustomResourceExt;
use kube::core::cel::Validator;
use serde_json::{Value, json};

use super::{LxdConfig, MachineLxdConfig, VmConfig};
use crate::{MaasCluster, MaasHost, MaasMachine, MaasMachineTemplate};

fn object(kind: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": spec
    })
}

fn machine_spec(extra: &Value) -> Value {
    let mut spec = json!({"image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

/// The CEL errors of `object` against `schema`, as (field path, message).
fn cel_errors(schema: &Value, object: &Value) -> Vec<(String, String)> {
    match Validator::new().validate(schema, object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| (e.field_path.clone(), e.message.clone()))
            .collect(),
    }
}

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    crate::crd::schema_json(crd).unwrap()
}

#[test]
fn storage_size_must_be_a_positive_whole_number() {
    let schema = schema_of(&MaasCluster::crd());
    for good in ["50", "1", "2048"] {
        let c = object(
            "MaasCluster",
            &json!({"dnsDomain": "maas", "lxdConfig": {"enabled": true, "storageSize": good}}),
        );
        assert_eq!(cel_errors(&schema, &c), [], "{good}");
    }
    for bad in ["0", "", "50G", "-1", "050", "1.5"] {
        let c = object(
            "MaasCluster",
            &json!({"dnsDomain": "maas", "lxdConfig": {"storageSize": bad}}),
        );
        assert_eq!(
            cel_errors(&schema, &c),
            [(
                "spec.lxdConfig.storageSize".to_owned(),
                "spec.lxdConfig.storageSize must be a positive whole number of GB as a string, e.g. \"50\"".to_owned()
            )],
            "{bad}"
        );
    }
}

#[test]
fn interface_link_mode_keys_are_vm_interface_names() {
    let message =
        "spec.lxd.vmConfig.interfaceLinkModes keys are VM interface names eth0, eth1, ... ethN";
    let schema = schema_of(&MaasMachine::crd());
    let ok = object(
        "MaasMachine",
        &machine_spec(
            &json!({"lxd": {"enabled": true, "vmConfig": {"interfaceLinkModes": {"eth0": "auto", "eth1": "dhcp", "eth12": "link_up"}}}}),
        ),
    );
    assert_eq!(cel_errors(&schema, &ok), []);
    for bad in ["eno1", "eth", "ETH0", "eth0.100", " eth0"] {
        let m = object(
            "MaasMachine",
            &machine_spec(&json!({"lxd": {"vmConfig": {"interfaceLinkModes": {bad: "dhcp"}}}})),
        );
        assert_eq!(
            cel_errors(&schema, &m),
            [(
                "spec.lxd.vmConfig.interfaceLinkModes".to_owned(),
                message.to_owned()
            )],
            "{bad}"
        );
    }
    // The template's machine spec is the same type, with the same rule.
    let schema = schema_of(&MaasMachineTemplate::crd());
    let t = object(
        "MaasMachineTemplate",
        &json!({"template": {"spec": machine_spec(&json!({"lxd": {"vmConfig": {"interfaceLinkModes": {"enp5s0": "dhcp"}}}}))}}),
    );
    assert_eq!(
        cel_errors(&schema, &t),
        [(
            "spec.template.spec.lxd.vmConfig.interfaceLinkModes".to_owned(),
            message.to_owned()
        )]
    );
}

#[test]
fn an_lxd_machine_is_not_deployed_in_memory() {
    let message = "spec.lxd.enabled and spec.deployInMemory cannot both be true: MAAS composes and registers VMs only for a deployment to disk";
    let schema = schema_of(&MaasMachine::crd());
    for fine in [
        json!({"lxd": {"enabled": true}, "deployInMemory": false}),
        json!({"lxd": {"enabled": false}, "deployInMemory": true}),
        json!({"lxd": {}, "deployInMemory": true}),
        json!({"deployInMemory": true}),
        json!({"lxd": {"enabled": true}}),
    ] {
        let m = object("MaasMachine", &machine_spec(&fine));
        assert_eq!(cel_errors(&schema, &m), [], "{fine}");
    }
    let m = object(
        "MaasMachine",
        &machine_spec(&json!({"lxd": {"enabled": true}, "deployInMemory": true})),
    );
    assert_eq!(
        cel_errors(&schema, &m),
        [("spec.lxd.enabled".to_owned(), message.to_owned())]
    );
}

#[test]
fn a_vm_host_is_not_deployed_in_memory() {
    let message = "spec.provisioning.registerVMHost and spec.provisioning.deployInMemory cannot both be true: MAAS registers only a machine deployed to disk as a VM host";
    let schema = schema_of(&MaasHost::crd());
    let host = |provisioning: Value| {
        let mut p = json!({"image": "ubuntu/jammy"});
        for (k, v) in provisioning.as_object().unwrap() {
            p[k] = v.clone();
        }
        object(
            "MaasHost",
            &json!({"systemID": "abc123", "provisioning": p}),
        )
    };
    for fine in [
        json!({"registerVMHost": true}),
        json!({"registerVMHost": true, "deployInMemory": false}),
        json!({"registerVMHost": false, "deployInMemory": true}),
    ] {
        assert_eq!(cel_errors(&schema, &host(fine.clone())), [], "{fine}");
    }
    assert_eq!(
        cel_errors(
            &schema,
            &host(json!({"registerVMHost": true, "deployInMemory": true}))
        ),
        [(
            "spec.provisioning.registerVMHost".to_owned(),
            message.to_owned()
        )]
    );
}

/// What the Rust types read from an absent field is what the schema defaults it to, as
/// CAPMAAS's CRDs do.
#[test]
fn serde_defaults_are_the_schema_defaults() {
    let config: LxdConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(config, LxdConfig::default());
    assert_eq!(
        serde_json::to_value(&config).unwrap(),
        json!({"enabled": false, "storageBackend": "zfs", "storageSize": "50", "skipNetworkUpdate": true})
    );
    let vm: VmConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(vm, VmConfig::default());
    assert_eq!(
        serde_json::to_value(&vm).unwrap(),
        json!({"diskSize": 60, "autoStart": true})
    );
    let lxd: MachineLxdConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(lxd, MachineLxdConfig::default());
    assert_eq!(
        serde_json::to_value(&lxd).unwrap(),
        json!({"enabled": false})
    );

    let schema = schema_of(&MaasCluster::crd());
    let lxd_config = &schema["properties"]["spec"]["properties"]["lxdConfig"]["properties"];
    assert_eq!(lxd_config["enabled"]["default"], false);
    assert_eq!(lxd_config["storageBackend"]["default"], "zfs");
    assert_eq!(lxd_config["storageSize"]["default"], "50");
    assert_eq!(lxd_config["skipNetworkUpdate"]["default"], true);
    assert_eq!(lxd_config["nicType"]["enum"], json!(["bridge", "macvlan"]));
    let schema = schema_of(&MaasMachine::crd());
    let lxd = &schema["properties"]["spec"]["properties"]["lxd"]["properties"];
    assert_eq!(lxd["enabled"]["default"], false);
    let vm = &lxd["vmConfig"]["properties"];
    assert_eq!(vm["diskSize"]["default"], 60);
    assert_eq!(vm["diskSize"]["minimum"], 1.0);
    assert_eq!(vm["autoStart"]["default"], true);
    assert_eq!(
        vm["interfaceLinkModes"]["additionalProperties"]["enum"],
        json!(["auto", "dhcp", "static", "link_up"])
    );
}

#[test]
fn host_vm_host_status_round_trips_with_its_json_names() {
    let status = json!({
        "vmHost": {
            "id": 7, "name": "node-1", "zone": "az1", "pool": "lxd",
            "cores": {"total": 32, "used": 8},
            "memoryMiB": {"total": 131_072, "used": 16_384},
            "storageGiB": {"total": 900, "used": 120},
            "machines": ["abc123", "def456"]
        },
        "vmHostId": 3
    });
    let parsed: crate::MaasHostStatus = serde_json::from_value(status.clone()).unwrap();
    let vm_host = parsed.vm_host.clone().unwrap();
    assert_eq!(vm_host.memory_mib.total, 131_072);
    assert_eq!(vm_host.storage_gib.used, 120);
    assert_eq!(parsed.vm_host_id, Some(3));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), status);
}

fn vm(hostname: &str, cores: i32) -> Value {
    json!({
        "hostname": hostname, "cores": cores, "memoryMiB": 4096, "diskGB": 60,
        "consumer": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
                     "name": "cp-0", "uid": "0c6f5e1a-0000-4000-8000-000000000001", "namespace": "tenant"}
    })
}

fn host_with_vms(vms: &[Value]) -> Value {
    object("MaasHost", &json!({"systemID": "abc123", "vms": vms}))
}

/// The CEL errors of an update from `old` to `new`, as (field path, message).
fn cel_update_errors(schema: &Value, new: &Value, old: &Value) -> Vec<(String, String)> {
    match Validator::new().validate(schema, new, Some(old)) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| (e.field_path.clone(), e.message.clone()))
            .collect(),
    }
}

#[test]
fn a_vm_request_hostname_is_a_dns_label() {
    let schema = schema_of(&MaasHost::crd());
    assert_eq!(
        cel_errors(&schema, &host_with_vms(&[vm("vm-cp-0-0c6f5", 2)])),
        []
    );
    for bad in ["VM-cp", "vm_cp", "-vm", "vm-"] {
        let errors = cel_errors(&schema, &host_with_vms(&[vm(bad, 2)]));
        assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
        assert!(
            errors[0]
                .1
                .starts_with("spec.vms[].hostname must be a DNS label"),
            "{bad}"
        );
    }
}

#[test]
fn a_vm_request_is_never_changed_only_added_or_removed() {
    let schema = schema_of(&MaasHost::crd());
    let old = host_with_vms(&[vm("vm-a-00001", 2)]);
    let added = host_with_vms(&[vm("vm-a-00001", 2), vm("vm-b-00002", 4)]);
    assert_eq!(cel_update_errors(&schema, &added, &old), []);
    let removed = host_with_vms(&[]);
    assert_eq!(cel_update_errors(&schema, &removed, &old), []);
    let changed = host_with_vms(&[vm("vm-a-00001", 8)]);
    let errors = cel_update_errors(&schema, &changed, &old);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].1,
        "spec.vms[] entries are immutable: remove the entry and add another"
    );
}
