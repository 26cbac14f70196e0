//! The objects a person declares for a cluster: the story cluster is 3 control-plane
//! Machines (created directly, KubeadmControlPlane needs real nodes) and a
//! MachineDeployment of workers, on MAAS machines imported by a MaasInventory.

use serde_json::{Value, json};

const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
const INFRA_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const CAPI_VERSION: &str = "cluster.x-k8s.io/v1beta2";
/// Kubernetes version of the declared Machines; the kubelet stand-in reports it, since
/// CAPI only counts a Machine up to date when its Node runs the requested version.
pub const KUBERNETES_VERSION: &str = "v1.33.0";

/// What to declare.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Cluster name (also the DNS name's first label).
    pub name: String,
    /// Namespace, which the inventory imports hosts into.
    pub namespace: String,
    /// MAAS DNS domain of the control-plane endpoint.
    pub dns_domain: String,
    /// MAAS zones used as failure domains.
    pub zones: Vec<String>,
    /// Control-plane Machines.
    pub control_plane: usize,
    /// Worker replicas of the MachineDeployment.
    pub workers: usize,
    /// OS image of every machine.
    pub image: String,
    /// Re-image the same servers on upgrades.
    pub node_reuse: bool,
    /// MAAS resource pool to import.
    pub pool: String,
    /// `releasePolicy.erase` of every machine (`Quick`, `Secure`, `Full`); none: the API's
    /// default (no erase).
    pub release_erase: Option<String>,
    /// Static worker addresses through a MaasDataTemplate and a MaasIPPool (the
    /// data-controller's work); none: workers take what MAAS assigns.
    pub worker_addresses: Option<WorkerAddresses>,
    /// Dual stack: with `worker_addresses`, a second MaasIPPool of this (IPv6) range and an
    /// `ipv6` network on `eth0` of the same data template, so each machine has an address of
    /// each family; none: IPv4 only.
    pub ipv6_addresses: Option<WorkerAddresses>,
    /// With `worker_addresses`, the control-plane machines take their addresses from the same
    /// pools too, through a data template of their own (hostnames
    /// `<cluster>-control-plane-<index>`); off: they keep MAAS's addresses.
    pub control_plane_addresses: bool,
    /// `spec.dnsRecord.publishedAddressSubnets` of the MaasCluster; empty: not set.
    pub dns_published_subnets: Vec<String>,
    /// `spec.lxdConfig.enabled` on the MaasCluster: every server is deployed as an LXD VM host.
    pub lxd_hosts: bool,
    /// `spec.lxd.enabled` on every control-plane MaasMachine: each is an LXD VM composed on a VM
    /// host (CAPMAAS's hosted control-plane pattern), not a bare-metal server.
    pub lxd_control_plane: bool,
    /// A MachineHealthCheck over the workers that remediates through a MaasRemediationTemplate
    /// (the remediation-controller's work); none: no health check.
    pub worker_remediation: Option<WorkerRemediation>,
}

/// How unhealthy workers are remediated: rebooted up to `retry_limit` times, each attempt
/// given `timeout_seconds`, once their Node has not been Ready for `unhealthy_after_seconds`.
#[derive(Debug, Clone)]
pub struct WorkerRemediation {
    /// Reboots before the Machine is handed back for replacement.
    pub retry_limit: u32,
    /// Seconds one reboot may take until the Node is Ready again (the API's minimum is 100).
    pub timeout_seconds: u32,
    /// Seconds a Node may be not Ready before the MachineHealthCheck calls it unhealthy.
    pub unhealthy_after_seconds: u32,
}

/// An address range for the workers: each gets one address of it on `eth0`, the MAAS
/// subnet's gateway as default route, and the hostname `<cluster>-worker-<index>`.
#[derive(Debug, Clone)]
pub struct WorkerAddresses {
    /// First address of the range.
    pub start: String,
    /// Last address of the range.
    pub end: String,
    /// Prefix length of the network.
    pub prefix: u8,
    /// Default gateway.
    pub gateway: String,
    /// CIDR of the MAAS subnet holding the range (MAAS reserves the range there).
    pub maas_subnet: String,
}

impl WorkerAddresses {
    /// IPv6 subnet of [`WorkerAddresses::ipv6`] (a scenario adds it to the simulator's first
    /// fabric, next to `10.20.0.0/16`).
    pub const IPV6_SUBNET: &'static str = "fd00:20::/64";

    /// `count` IPv6 addresses from `fd00:20::10` in `fd00:20::/64` (gateway `fd00:20::1`).
    pub fn ipv6(count: u16) -> Self {
        let first = std::net::Ipv6Addr::new(0xfd00, 0x20, 0, 0, 0, 0, 0, 0x10);
        let last = std::net::Ipv6Addr::from(u128::from(first) + u128::from(count.max(1)) - 1);
        Self {
            start: first.to_string(),
            end: last.to_string(),
            prefix: 64,
            gateway: "fd00:20::1".into(),
            maas_subnet: Self::IPV6_SUBNET.into(),
        }
    }

    /// `count` addresses from `10.20.200.10` in the simulator's default subnet `10.20.0.0/16`.
    pub fn in_default_subnet(count: u16) -> Self {
        let first = std::net::Ipv4Addr::new(10, 20, 200, 10);
        let last = std::net::Ipv4Addr::from(u32::from(first) + u32::from(count.max(1)) - 1);
        Self {
            start: first.to_string(),
            end: last.to_string(),
            prefix: 16,
            gateway: "10.20.0.1".into(),
            maas_subnet: "10.20.0.0/16".into(),
        }
    }
}

impl ClusterSpec {
    /// The story cluster: 3 control-plane nodes and 5 workers.
    pub fn story(namespace: &str) -> Self {
        Self {
            name: "story".into(),
            namespace: namespace.into(),
            dns_domain: "maas".into(),
            zones: vec!["z1".into(), "z2".into(), "z3".into()],
            control_plane: 3,
            workers: 5,
            image: "ubuntu/jammy".into(),
            node_reuse: false,
            pool: "default".into(),
            release_erase: None,
            worker_addresses: None,
            ipv6_addresses: None,
            control_plane_addresses: false,
            dns_published_subnets: Vec::new(),
            lxd_hosts: false,
            lxd_control_plane: false,
            worker_remediation: None,
        }
    }

    /// Name of the IPv6 worker MaasIPPool (dual stack).
    pub fn ipv6_pool_name(&self) -> String {
        format!("{}-workers-v6", self.name)
    }

    /// Name of the control-plane MaasDataTemplate.
    pub fn control_plane_data_name(&self) -> String {
        format!("{}-control-plane", self.name)
    }

    fn control_plane_data(&self) -> bool {
        self.control_plane_addresses && self.worker_addresses.is_some()
    }

    /// Name of the worker MaasIPPool and MaasDataTemplate.
    pub fn worker_data_name(&self) -> String {
        format!("{}-workers", self.name)
    }

    /// Name of the worker MaasMachineTemplate for `image` (templates are immutable, so an
    /// image change is a new template).
    pub fn worker_template_name(&self, image: &str) -> String {
        let suffix: String = image
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("{}-workers-{}", self.name, suffix.trim_matches('-'))
    }

    /// Every object, in the order to create them (the kubeconfig Secret excepted, which
    /// the harness writes for the workload API server).
    pub fn objects(&self) -> Vec<Value> {
        let mut objects = vec![
            self.bootstrap_secret(),
            self.inventory(),
            self.maas_cluster(),
            self.cluster(),
        ];
        if let Some(addresses) = &self.worker_addresses {
            objects.push(self.worker_pool(addresses));
            if let Some(v6) = &self.ipv6_addresses {
                objects.push(self.pool(&self.ipv6_pool_name(), v6));
            }
            objects.push(self.worker_data_template());
            if self.control_plane_data() {
                objects.push(self.data_template(
                    &self.control_plane_data_name(),
                    &format!("{}-control-plane-", self.name),
                ));
            }
        }
        objects.push(self.worker_template(&self.image));
        objects.push(self.machine_deployment(&self.image));
        if let Some(remediation) = &self.worker_remediation {
            objects.push(self.worker_remediation_template(remediation));
            objects.push(self.worker_health_check(remediation));
        }
        for index in 0..self.control_plane {
            objects.push(self.control_plane_maas_machine(index));
            objects.push(self.control_plane_machine(index));
        }
        objects
    }

    fn labels(&self) -> Value {
        json!({"cluster.x-k8s.io/cluster-name": self.name})
    }

    /// Cloud-init every machine boots with (the simulator only stores it). A bootstrap
    /// provider's Secret would be owned by its config object; this hand-made one carries
    /// clusterctl's move label so that `clusterctl move` takes it along all the same.
    pub fn bootstrap_secret(&self) -> Value {
        let mut labels = self.labels();
        labels["clusterctl.cluster.x-k8s.io/move"] = json!("");
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{}-bootstrap", self.name), "namespace": self.namespace, "labels": labels},
            "type": "cluster.x-k8s.io/secret",
            "stringData": {"value": "#cloud-config\nruncmd:\n  - echo joining the cluster\n", "format": "cloud-config"}
        })
    }

    /// The MaasInventory importing the pool's machines into the namespace.
    pub fn inventory(&self) -> Value {
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasInventory",
            "metadata": {"name": self.pool, "namespace": self.namespace},
            "spec": {"resourcePool": self.pool, "syncIntervalSeconds": 10}
        })
    }

    /// The MaasCluster.
    pub fn maas_cluster(&self) -> Value {
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasCluster",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": self.maas_cluster_spec()
        })
    }

    fn maas_cluster_spec(&self) -> Value {
        let mut spec = json!({"dnsDomain": self.dns_domain, "failureDomains": self.zones});
        if !self.dns_published_subnets.is_empty() {
            spec["dnsRecord"] = json!({"publishedAddressSubnets": self.dns_published_subnets});
        }
        if self.lxd_hosts {
            spec["lxdConfig"] =
                json!({"enabled": true, "storageBackend": "zfs", "storageSize": "50"});
        }
        spec
    }

    /// The CAPI Cluster (no control-plane provider).
    pub fn cluster(&self) -> Value {
        json!({
            "apiVersion": CAPI_VERSION, "kind": "Cluster",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MaasCluster", "name": self.name}
            }
        })
    }

    fn machine_spec(&self) -> Value {
        let mut spec = json!({"minCPU": 2, "minMemory": 4096, "image": self.image});
        if let Some(erase) = &self.release_erase {
            spec["releasePolicy"] = json!({"erase": erase});
        }
        spec
    }

    /// The MaasIPPool the worker addresses come from.
    pub fn worker_pool(&self, addresses: &WorkerAddresses) -> Value {
        self.pool(&self.worker_data_name(), addresses)
    }

    fn pool(&self, name: &str, addresses: &WorkerAddresses) -> Value {
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasIPPool",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "clusterName": self.name,
                "namePrefix": name,
                "pools": [{"start": addresses.start, "end": addresses.end}],
                "prefix": addresses.prefix,
                "gateway": addresses.gateway,
                "maasSubnet": addresses.maas_subnet
            }
        })
    }

    /// The worker MaasDataTemplate: `eth0` by its MAC with a static address from the worker
    /// pool and a default route through the pool's gateway; metadata naming the hostname, the
    /// index, the address and the boot MAC.
    pub fn worker_data_template(&self) -> Value {
        self.data_template(&self.worker_data_name(), &format!("{}-worker-", self.name))
    }

    /// A MaasDataTemplate `name` drawing from the worker pool(s), hostnames `hostname_prefix`
    /// and the index; with `ipv6_addresses`, also an IPv6 address and default route on `eth0`.
    fn data_template(&self, name: &str, hostname_prefix: &str) -> Value {
        let pool = self.worker_data_name();
        let mut template = json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasDataTemplate",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "clusterName": self.name,
                "metaData": {
                    "indexes": [
                        {"key": "local-hostname", "prefix": hostname_prefix},
                        {"key": "node-index"}
                    ],
                    "ipAddressesFromPool": [{"key": "address", "name": pool}],
                    "fromHostInterfaces": [{"key": "boot-mac", "interface": "eth0"}]
                },
                "networkData": {
                    "links": {"ethernets": [
                        {"type": "phy", "id": "eth0", "macAddress": {"fromHostInterface": "eth0"}}
                    ]},
                    "networks": {"ipv4": [{
                        "id": "provisioning",
                        "link": "eth0",
                        "ipAddressFromPool": {"name": pool},
                        "routes": [{"network": "0.0.0.0/0", "gatewayFromPool": {"name": pool}}]
                    }]}
                }
            }
        });
        if self.ipv6_addresses.is_some() {
            let v6 = self.ipv6_pool_name();
            template["spec"]["networkData"]["networks"]["ipv6"] = json!([{
                "id": "provisioning-v6",
                "link": "eth0",
                "ipAddressFromPool": {"name": v6},
                "routes": [{"network": "::/0", "gatewayFromPool": {"name": v6}}]
            }]);
            if let Some(list) = template["spec"]["metaData"]["ipAddressesFromPool"].as_array_mut() {
                list.push(json!({"key": "address-v6", "name": v6}));
            }
        }
        template
    }

    /// The MaasRemediationTemplate the worker health check remediates with.
    pub fn worker_remediation_template(&self, remediation: &WorkerRemediation) -> Value {
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasRemediationTemplate",
            "metadata": {"name": self.worker_data_name(), "namespace": self.namespace, "labels": self.labels()},
            "spec": {"template": {"spec": {"strategy": {
                "type": "Reboot",
                "retryLimit": remediation.retry_limit,
                "timeoutSeconds": remediation.timeout_seconds
            }}}}
        })
    }

    /// The MachineHealthCheck over the workers: a Node not Ready (False or Unknown) for
    /// `unhealthy_after_seconds` is remediated through the MaasRemediationTemplate.
    pub fn worker_health_check(&self, remediation: &WorkerRemediation) -> Value {
        let not_ready = |status: &str| json!({"type": "Ready", "status": status, "timeoutSeconds": remediation.unhealthy_after_seconds});
        json!({
            "apiVersion": CAPI_VERSION, "kind": "MachineHealthCheck",
            "metadata": {"name": self.worker_data_name(), "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "clusterName": self.name,
                "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": format!("{}-workers", self.name)}},
                "checks": {
                    "nodeStartupTimeoutSeconds": 600,
                    "unhealthyNodeConditions": [not_ready("Unknown"), not_ready("False")]
                },
                "remediation": {"templateRef": {
                    "apiVersion": INFRA_VERSION,
                    "kind": "MaasRemediationTemplate",
                    "name": self.worker_data_name()
                }}
            }
        })
    }

    /// The worker MaasMachineTemplate for `image`.
    pub fn worker_template(&self, image: &str) -> Value {
        let mut spec = self.machine_spec();
        spec["image"] = json!(image);
        if self.worker_addresses.is_some() {
            spec["dataTemplate"] = json!({"name": self.worker_data_name()});
        }
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasMachineTemplate",
            "metadata": {"name": self.worker_template_name(image), "namespace": self.namespace, "labels": self.labels()},
            "spec": {"template": {"spec": spec}, "nodeReuse": self.node_reuse}
        })
    }

    /// The worker MachineDeployment, using the template for `image`.
    pub fn machine_deployment(&self, image: &str) -> Value {
        let md_labels = json!({"cluster.x-k8s.io/cluster-name": self.name, "cluster.x-k8s.io/deployment-name": format!("{}-workers", self.name)});
        json!({
            "apiVersion": CAPI_VERSION, "kind": "MachineDeployment",
            "metadata": {"name": format!("{}-workers", self.name), "namespace": self.namespace, "labels": self.labels()},
            "spec": {
                "clusterName": self.name,
                "replicas": self.workers,
                "selector": {"matchLabels": md_labels},
                "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
                "template": {
                    "metadata": {"labels": md_labels},
                    "spec": {
                        "clusterName": self.name,
                        "version": KUBERNETES_VERSION,
                        "bootstrap": {"dataSecretName": format!("{}-bootstrap", self.name)},
                        "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MaasMachineTemplate", "name": self.worker_template_name(image)}
                    }
                }
            }
        })
    }

    fn control_plane_name(&self, index: usize) -> String {
        format!("{}-control-plane-{index}", self.name)
    }

    /// The MaasMachine of control-plane node `index`.
    pub fn control_plane_maas_machine(&self, index: usize) -> Value {
        // KubeadmControlPlane labels the infrastructure machines it creates; we create
        // them by hand, so we label them the same way.
        let mut labels = self.labels();
        labels["cluster.x-k8s.io/control-plane"] = json!("");
        let mut spec = self.machine_spec();
        if self.control_plane_data() {
            spec["dataTemplate"] = json!({"name": self.control_plane_data_name()});
        }
        if self.lxd_control_plane {
            spec["lxd"] = json!({"enabled": true, "vmConfig": {"diskSize": 20}});
        }
        json!({
            "apiVersion": INFRA_VERSION, "kind": "MaasMachine",
            "metadata": {"name": self.control_plane_name(index), "namespace": self.namespace, "labels": labels},
            "spec": spec
        })
    }

    /// The Machine of control-plane node `index`, spread over the failure domains.
    pub fn control_plane_machine(&self, index: usize) -> Value {
        let mut labels = self.labels();
        labels["cluster.x-k8s.io/control-plane"] = json!("");
        let mut spec = json!({
            "clusterName": self.name,
            "version": KUBERNETES_VERSION,
            "bootstrap": {"dataSecretName": format!("{}-bootstrap", self.name)},
            "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MaasMachine", "name": self.control_plane_name(index)}
        });
        if !self.zones.is_empty() {
            spec["failureDomain"] = json!(self.zones[index % self.zones.len()]);
        }
        json!({
            "apiVersion": CAPI_VERSION, "kind": "Machine",
            "metadata": {"name": self.control_plane_name(index), "namespace": self.namespace, "labels": labels},
            "spec": spec
        })
    }
}

/// The `<cluster>-kubeconfig` Secret through which CAPI and our controllers reach the
/// workload API server.
pub fn kubeconfig_secret(cluster: &str, namespace: &str, kubeconfig: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": namespace,
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": kubeconfig}
    })
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
