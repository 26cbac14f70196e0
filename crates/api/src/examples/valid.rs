//! Valid, realistic objects: a three-zone production cluster `prod` on MAAS.

use serde_json::{Value, json};

use super::{DefaultedExample, Example};
use crate::common::API_VERSION;

/// `apiVersion`/`kind`/`metadata.name` around a spec.
pub(crate) fn object(kind: &str, name: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "spec": spec,
    })
}

fn machine_spec() -> Value {
    json!({
        "image": "ubuntu/jammy",
        "minCPU": 4,
        "minMemory": 8192,
        "minDiskSize": 100,
        "resourcePool": "k8s",
        "tags": ["k8s-control-plane"],
        "failureDomain": "az1",
        "hostSelector": {
            "matchLabels": {"maas.cluster.x-k8s.io/arch": "amd64"},
            "matchExpressions": [
                {"key": "maas.cluster.x-k8s.io/zone", "operator": "In", "values": ["az1", "az2", "az3"]},
                {"key": "tag.maas.cluster.x-k8s.io/gpu", "operator": "DoesNotExist"}
            ]
        },
        "dataTemplate": {"name": "prod-data"},
        "releasePolicy": {"erase": "Quick", "force": false}
    })
}

pub(crate) fn maas_cluster() -> Value {
    object(
        "MaasCluster",
        "prod",
        &json!({
            "dnsDomain": "maas",
            "controlPlaneEndpoint": {"host": "prod.maas", "port": 6443},
            "failureDomains": ["az1", "az2", "az3"],
            "dnsRecord": {"publishedAddressSubnet": "10.20.0.0/16", "ttl": 60}
        }),
    )
}

pub(crate) fn maas_cluster_template() -> Value {
    object(
        "MaasClusterTemplate",
        "prod-cluster",
        &json!({"template": {
            "metadata": {"labels": {"environment": "production"}},
            "spec": {"dnsDomain": "maas", "failureDomains": ["az1", "az2", "az3"]}
        }}),
    )
}

pub(crate) fn maas_machine() -> Value {
    let mut spec = machine_spec();
    spec["systemID"] = json!("4y3h7a");
    spec["providerID"] = json!("maas:///az1/4y3h7a");
    object("MaasMachine", "prod-cp-x7k2p", &spec)
}

pub(crate) fn maas_machine_template() -> Value {
    object(
        "MaasMachineTemplate",
        "prod-control-plane-v1",
        &json!({
            "template": {"metadata": {"labels": {"role": "control-plane"}}, "spec": machine_spec()},
            "nodeReuse": true,
            "nodeReuseTTLSeconds": 1800
        }),
    )
}

pub(crate) fn maas_inventory() -> Value {
    object(
        "MaasInventory",
        "k8s-pool",
        &json!({
            "resourcePool": "k8s",
            "zones": ["az1", "az2", "az3"],
            "tags": ["k8s"],
            "syncIntervalSeconds": 60,
            "hostLabels": {"site": "dc1"}
        }),
    )
}

pub(crate) fn maas_host() -> Value {
    object(
        "MaasHost",
        "4y3h7a",
        &json!({
            "systemID": "4y3h7a",
            "consumerRef": {
                "apiVersion": API_VERSION,
                "kind": "MaasMachine",
                "name": "prod-cp-x7k2p",
                "uid": "5f0c8a8e-4d3b-4c64-9a55-0c2f1e7b9d10"
            },
            "provisioning": {
                "image": "ubuntu/jammy",
                "userDataSecretRef": {"name": "prod-cp-x7k2p-bootstrap", "key": "value"},
                "networkDataSecretRef": {"name": "prod-cp-x7k2p-networkdata", "key": "networkData"},
                "hostname": "prod-cp-x7k2p",
                "deployInMemory": false,
                "hweKernel": "hwe-22.04",
                "releasePolicy": {"erase": "Quick", "force": false}
            }
        }),
    )
}

fn maas_host_reserved() -> Value {
    object(
        "MaasHost",
        "8kqwne",
        &json!({
            "systemID": "8kqwne",
            "reservation": {
                "owner": {
                    "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                    "kind": "KubeadmControlPlane",
                    "name": "prod",
                    "uid": "0b6f3f5e-2a57-4b0e-8a3c-6a1d2f9e4c21"
                },
                "expiresAt": "2026-12-01T12:00:00Z"
            }
        }),
    )
}

pub(crate) fn maas_dns_record() -> Value {
    object(
        "MaasDNSRecord",
        "prod-apiserver",
        &json!({"name": "prod", "domain": "maas", "addresses": ["10.20.0.11", "10.20.0.12", "fd00:20::13"], "ttl": 60}),
    )
}

pub(crate) fn maas_data_template() -> Value {
    let pool = |key: &str| json!({"key": key, "name": "prod-provisioning"});
    object(
        "MaasDataTemplate",
        "prod-data",
        &json!({
            "clusterName": "prod",
            "metaData": {
                "strings": [{"key": "environment", "value": "production"}],
                "objectNames": [{"key": "machine", "object": "machine"}, {"key": "host", "object": "maashost"}],
                "namespaces": [{"key": "namespace"}],
                "indexes": [{"key": "node-index", "offset": 10, "step": 1, "prefix": "node-", "suffix": ".prod"}],
                "ipAddressesFromPool": [pool("provisioning-ip")],
                "prefixesFromPool": [pool("provisioning-prefix")],
                "gatewaysFromPool": [pool("provisioning-gateway")],
                "dnsServersFromPool": [pool("provisioning-dns")],
                "fromHostInterfaces": [{"key": "boot-mac", "interface": "eno1"}],
                "fromLabels": [{"key": "zone", "object": "maashost", "label": "maas.cluster.x-k8s.io/zone"}],
                "fromAnnotations": [{"key": "rack", "object": "maashost", "annotation": "example.com/rack"}]
            },
            "networkData": {
                "links": {
                    "ethernets": [
                        {"type": "phy", "id": "eno1", "mtu": 1500, "macAddress": {"fromBootMAC": true}},
                        {"type": "phy", "id": "eno2", "mtu": 9000, "macAddress": {"fromHostInterface": "eno2"}},
                        {"type": "phy", "id": "eno3", "mtu": 9000, "macAddress": {"string": "52:54:00:12:34:56"}}
                    ],
                    "bonds": [{"id": "bond0", "mtu": 9000, "bondMode": "802.3ad", "bondLinks": ["eno2", "eno3"]}],
                    "vlans": [{"id": "bond0.120", "mtu": 9000, "vlanID": 120, "vlanLink": "bond0"}]
                },
                "networks": {
                    "ipv4": [{
                        "id": "provisioning",
                        "link": "eno1",
                        "ipAddressFromPool": {"name": "prod-provisioning"},
                        "routes": [{"network": "0.0.0.0/0", "gatewayFromPool": {"name": "prod-provisioning"}}]
                    }],
                    "ipv4DHCP": [{
                        "id": "storage",
                        "link": "bond0.120",
                        "routes": [{"network": "10.99.0.0/16", "gateway": "10.30.0.1"}]
                    }]
                },
                "services": {"dns": ["10.20.0.2", "10.20.0.3"]}
            }
        }),
    )
}

pub(crate) fn maas_data_claim() -> Value {
    object(
        "MaasDataClaim",
        "prod-cp-x7k2p",
        &json!({"template": {"name": "prod-data"}, "hostRef": {"name": "4y3h7a"}}),
    )
}

pub(crate) fn maas_data() -> Value {
    object(
        "MaasData",
        "prod-data-0",
        &json!({
            "index": 0,
            "template": {"name": "prod-data"},
            "claim": {"name": "prod-cp-x7k2p"},
            "metaData": {"name": "prod-cp-x7k2p-metadata"},
            "networkData": {"name": "prod-cp-x7k2p-networkdata"}
        }),
    )
}

/// A pool holds one address family; IPv6 addresses come from a pool of their own.
pub(crate) fn maas_ip_pool_ipv6() -> Value {
    object(
        "MaasIPPool",
        "prod-provisioning-v6",
        &json!({
            "namePrefix": "prod-provisioning-v6",
            "clusterName": "prod",
            "pools": [{"subnet": "fd00:20::/64", "prefix": 64, "gateway": "fd00:20::1"}],
            "exclusions": ["fd00:20::10-fd00:20::1f"]
        }),
    )
}

/// The lock data-controller takes for the pre-allocated address of `maas_ip_pool`.
pub(crate) fn maas_ip_address_lock() -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "MaasIPAddressLock",
        "metadata": {"name": "10.20.0.100"},
        "spec": {
            "address": "10.20.0.100",
            "claim": {
                "namespace": "prod",
                "name": "prod-cp-x7k2p-provisioning",
                "uid": "0b6f3c1e-8a54-4d2b-9a1e-5f7c3d2e1a90"
            },
            "pool": "prod-provisioning"
        }
    })
}

pub(crate) fn maas_ip_pool() -> Value {
    object(
        "MaasIPPool",
        "prod-provisioning",
        &json!({
            "namePrefix": "prod-provisioning",
            "clusterName": "prod",
            "pools": [
                {"start": "10.20.0.100", "end": "10.20.0.199", "prefix": 24, "gateway": "10.20.0.1"},
                {"subnet": "10.21.0.0/24", "gateway": "10.21.0.1", "dnsServers": ["10.21.0.2"]}
            ],
            "prefix": 24,
            "gateway": "10.20.0.1",
            "dnsServers": ["10.20.0.2", "10.20.0.3"],
            "exclusions": ["10.20.0.150", "10.20.0.160-10.20.0.169", "10.20.0.192/28"],
            "preAllocations": {"prod-cp-x7k2p-provisioning": "10.20.0.100"},
            "allocationStrategy": "Sequential"
        }),
    )
}

pub(crate) fn maas_remediation() -> Value {
    object(
        "MaasRemediation",
        "prod-md-0-7d9fb-x2x9q",
        &json!({"strategy": {"type": "Reboot", "retryLimit": 2, "timeoutSeconds": 900}}),
    )
}

pub(crate) fn maas_remediation_template() -> Value {
    object(
        "MaasRemediationTemplate",
        "prod-reboot",
        &json!({"template": {"spec": {"strategy": {"type": "Reboot", "retryLimit": 3, "timeoutSeconds": 600}}}}),
    )
}

pub(super) fn all() -> Vec<Example> {
    vec![
        Example {
            name: "maascluster",
            kind: "MaasCluster",
            object: maas_cluster(),
        },
        Example {
            name: "maasclustertemplate",
            kind: "MaasClusterTemplate",
            object: maas_cluster_template(),
        },
        Example {
            name: "maasmachine",
            kind: "MaasMachine",
            object: maas_machine(),
        },
        Example {
            name: "maasmachinetemplate",
            kind: "MaasMachineTemplate",
            object: maas_machine_template(),
        },
        Example {
            name: "maasinventory",
            kind: "MaasInventory",
            object: maas_inventory(),
        },
        Example {
            name: "maashost-consumed",
            kind: "MaasHost",
            object: maas_host(),
        },
        Example {
            name: "maashost-reserved",
            kind: "MaasHost",
            object: maas_host_reserved(),
        },
        Example {
            name: "maasdnsrecord",
            kind: "MaasDNSRecord",
            object: maas_dns_record(),
        },
        Example {
            name: "maasdatatemplate",
            kind: "MaasDataTemplate",
            object: maas_data_template(),
        },
        Example {
            name: "maasdataclaim",
            kind: "MaasDataClaim",
            object: maas_data_claim(),
        },
        Example {
            name: "maasdata",
            kind: "MaasData",
            object: maas_data(),
        },
        Example {
            name: "maasippool",
            kind: "MaasIPPool",
            object: maas_ip_pool(),
        },
        Example {
            name: "maasippool-ipv6",
            kind: "MaasIPPool",
            object: maas_ip_pool_ipv6(),
        },
        Example {
            name: "maasipaddresslock",
            kind: "MaasIPAddressLock",
            object: maas_ip_address_lock(),
        },
        Example {
            name: "maasremediation",
            kind: "MaasRemediation",
            object: maas_remediation(),
        },
        Example {
            name: "maasremediationtemplate",
            kind: "MaasRemediationTemplate",
            object: maas_remediation_template(),
        },
    ]
}

/// Minimal objects and the same objects with the API server's schema defaults applied.
pub(super) fn all_defaulted() -> Vec<DefaultedExample> {
    vec![
        DefaultedExample {
            name: "maasinventory-defaults",
            kind: "MaasInventory",
            // Its own resource pool: one MAAS pool is imported by one inventory only.
            object: object(
                "MaasInventory",
                "defaults",
                &json!({"resourcePool": "spare"}),
            ),
            defaulted: object(
                "MaasInventory",
                "defaults",
                &json!({"resourcePool": "spare", "syncIntervalSeconds": 30}),
            ),
        },
        DefaultedExample {
            name: "maasremediation-defaults",
            kind: "MaasRemediation",
            object: object("MaasRemediation", "defaults", &json!({})),
            defaulted: object(
                "MaasRemediation",
                "defaults",
                &json!({"strategy": {"type": "Reboot", "retryLimit": 1, "timeoutSeconds": 600}}),
            ),
        },
        DefaultedExample {
            name: "maasmachinetemplate-defaults",
            kind: "MaasMachineTemplate",
            object: object(
                "MaasMachineTemplate",
                "defaults",
                &json!({"template": {"spec": {"image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096, "userData": {"name": "custom-user-data"}}}}),
            ),
            defaulted: object(
                "MaasMachineTemplate",
                "defaults",
                &json!({
                    "template": {"spec": {
                        "image": "ubuntu/jammy", "minCPU": 2, "minMemory": 4096, "deployInMemory": false,
                        "userData": {"name": "custom-user-data", "key": "value"}
                    }},
                    "nodeReuse": false,
                    "nodeReuseTTLSeconds": 3600
                }),
            ),
        },
        DefaultedExample {
            name: "maasippool-defaults",
            kind: "MaasIPPool",
            object: object(
                "MaasIPPool",
                "defaults",
                &json!({"namePrefix": "defaults", "pools": [{"subnet": "10.0.0.0/24"}]}),
            ),
            defaulted: object(
                "MaasIPPool",
                "defaults",
                &json!({"namePrefix": "defaults", "pools": [{"subnet": "10.0.0.0/24"}], "allocationStrategy": "Sequential"}),
            ),
        },
        DefaultedExample {
            name: "maasdatatemplate-defaults",
            kind: "MaasDataTemplate",
            object: object(
                "MaasDataTemplate",
                "defaults",
                &json!({
                    "metaData": {
                        "indexes": [{"key": "index"}],
                        "ipAddressesFromPool": [{"key": "ip", "name": "pool"}]
                    },
                    "networkData": {"links": {"ethernets": [{"id": "eno1", "macAddress": {"fromHostInterface": "eno1"}}]}}
                }),
            ),
            defaulted: object(
                "MaasDataTemplate",
                "defaults",
                &json!({
                    "metaData": {
                        "indexes": [{"key": "index", "offset": 0, "step": 1}],
                        "ipAddressesFromPool": [{"key": "ip", "name": "pool", "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasIPPool"}]
                    },
                    "networkData": {"links": {"ethernets": [{"type": "phy", "id": "eno1", "mtu": 1500, "macAddress": {"fromHostInterface": "eno1"}}]}}
                }),
            ),
        },
    ]
}
