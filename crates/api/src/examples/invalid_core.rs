//! Invalid cases for the cluster and machine kinds (and their templates).

use serde_json::json;

use super::valid::{maas_cluster, maas_cluster_template, maas_machine, maas_machine_template};
use super::{
    InvalidExample, REQUIRED, UNSUPPORTED, rejected_create as create, rejected_update as update,
};

pub(super) fn cluster() -> Vec<InvalidExample> {
    let c = maas_cluster();
    let ct = maas_cluster_template();
    vec![
        create(
            "cluster-dnsdomain-missing",
            &c,
            &json!({"spec": {"dnsDomain": null}}),
            "spec.dnsDomain",
            REQUIRED,
        ),
        create(
            "cluster-dnsdomain-empty",
            &c,
            &json!({"spec": {"dnsDomain": ""}}),
            "spec.dnsDomain",
            "should be at least 1 chars long",
        ),
        create(
            "cluster-endpoint-port-zero",
            &c,
            &json!({"spec": {"controlPlaneEndpoint": {"port": 0}}}),
            "spec.controlPlaneEndpoint.port",
            "should be greater than or equal to 1",
        ),
        create(
            "cluster-endpoint-port-too-big",
            &c,
            &json!({"spec": {"controlPlaneEndpoint": {"port": 70000}}}),
            "spec.controlPlaneEndpoint.port",
            "should be less than or equal to 65535",
        ),
        create(
            "cluster-endpoint-host-missing",
            &c,
            &json!({"spec": {"controlPlaneEndpoint": {"host": null}}}),
            "spec.controlPlaneEndpoint.host",
            REQUIRED,
        ),
        create(
            "cluster-failuredomain-empty",
            &c,
            &json!({"spec": {"failureDomains": [""]}}),
            "spec.failureDomains[0]",
            "should be at least 1 chars long",
        ),
        create(
            "cluster-dns-subnet-not-cidr",
            &c,
            &json!({"spec": {"dnsRecord": {"publishedAddressSubnet": "10.20.0.1"}}}),
            "spec.dnsRecord.publishedAddressSubnet",
            "spec.dnsRecord.publishedAddressSubnet must be a CIDR such as 10.0.0.0/24",
        ),
        create(
            "cluster-dns-subnets-not-cidr",
            &c,
            &json!({"spec": {"dnsRecord": {"publishedAddressSubnets": ["10.20.0.0/16", "fd00:20::1"]}}}),
            "spec.dnsRecord.publishedAddressSubnets",
            "spec.dnsRecord.publishedAddressSubnets must hold CIDRs such as 10.0.0.0/24 or fd00::/64",
        ),
        create(
            "cluster-dns-subnets-same-family",
            &c,
            &json!({"spec": {"dnsRecord": {"publishedAddressSubnets": ["10.20.0.0/16", "10.30.0.0/16"]}}}),
            "spec.dnsRecord.publishedAddressSubnets",
            "spec.dnsRecord.publishedAddressSubnets holds at most one CIDR per family (one IPv4, one IPv6)",
        ),
        create(
            "cluster-dns-ttl-zero",
            &c,
            &json!({"spec": {"dnsRecord": {"ttl": 0}}}),
            "spec.dnsRecord.ttl",
            "should be greater than or equal to 1",
        ),
        update(
            "cluster-dnsdomain-changed",
            &c,
            &json!({"spec": {"dnsDomain": "lab"}}),
            "spec.dnsDomain",
            "spec.dnsDomain is immutable",
        ),
        update(
            "cluster-endpoint-changed",
            &c,
            &json!({"spec": {"controlPlaneEndpoint": {"host": "other.maas"}}}),
            "spec.controlPlaneEndpoint",
            "spec.controlPlaneEndpoint is immutable once its host is set",
        ),
        update(
            "cluster-endpoint-removed",
            &c,
            &json!({"spec": {"controlPlaneEndpoint": null}}),
            "spec.controlPlaneEndpoint",
            "spec.controlPlaneEndpoint is immutable once its host is set",
        ),
        create(
            "clustertemplate-dnsdomain-missing",
            &ct,
            &json!({"spec": {"template": {"spec": {"dnsDomain": null}}}}),
            "spec.template.spec.dnsDomain",
            REQUIRED,
        ),
        create(
            "clustertemplate-dns-subnet-not-cidr",
            &ct,
            &json!({"spec": {"template": {"spec": {"dnsRecord": {"publishedAddressSubnet": "10.20.0.1"}}}}}),
            "spec.template.spec.dnsRecord.publishedAddressSubnet",
            "spec.dnsRecord.publishedAddressSubnet must be a CIDR such as 10.0.0.0/24",
        ),
        create(
            "clustertemplate-dns-subnets-not-cidr",
            &ct,
            &json!({"spec": {"template": {"spec": {"dnsRecord": {"publishedAddressSubnets": ["fd00:20::/64", "10.20.0.1"]}}}}}),
            "spec.template.spec.dnsRecord.publishedAddressSubnets",
            "spec.dnsRecord.publishedAddressSubnets must hold CIDRs such as 10.0.0.0/24 or fd00::/64",
        ),
        create(
            "clustertemplate-dns-subnets-same-family",
            &ct,
            &json!({"spec": {"template": {"spec": {"dnsRecord": {"publishedAddressSubnets": ["fd00:20::/64", "fd00:30::/64"]}}}}}),
            "spec.template.spec.dnsRecord.publishedAddressSubnets",
            "spec.dnsRecord.publishedAddressSubnets holds at most one CIDR per family (one IPv4, one IPv6)",
        ),
    ]
}

pub(super) fn machine() -> Vec<InvalidExample> {
    let m = maas_machine();
    let mt = maas_machine_template();
    let expressions =
        |e: serde_json::Value| json!({"spec": {"hostSelector": {"matchExpressions": [e]}}});
    let template_expressions = |e: serde_json::Value| json!({"spec": {"template": {"spec": {"hostSelector": {"matchExpressions": [e]}}}}});
    vec![
        create(
            "machine-image-missing",
            &m,
            &json!({"spec": {"image": null}}),
            "spec.image",
            REQUIRED,
        ),
        create(
            "machine-image-empty",
            &m,
            &json!({"spec": {"image": ""}}),
            "spec.image",
            "should be at least 1 chars long",
        ),
        create(
            "machine-mincpu-missing",
            &m,
            &json!({"spec": {"minCPU": null}}),
            "spec.minCPU",
            REQUIRED,
        ),
        create(
            "machine-minmemory-missing",
            &m,
            &json!({"spec": {"minMemory": null}}),
            "spec.minMemory",
            REQUIRED,
        ),
        create(
            "machine-mincpu-negative",
            &m,
            &json!({"spec": {"minCPU": -1}}),
            "spec.minCPU",
            "should be greater than or equal to 0",
        ),
        create(
            "machine-minmemory-negative",
            &m,
            &json!({"spec": {"minMemory": -1}}),
            "spec.minMemory",
            "should be greater than or equal to 0",
        ),
        create(
            "machine-mindisksize-negative",
            &m,
            &json!({"spec": {"minDiskSize": -1}}),
            "spec.minDiskSize",
            "should be greater than or equal to 0",
        ),
        create(
            "machine-too-many-tags",
            &m,
            &json!({"spec": {"tags": (0..33).map(|i| format!("tag-{i}")).collect::<Vec<_>>()}}),
            "spec.tags",
            "Too many",
        ),
        create(
            "machine-selector-bad-operator",
            &m,
            &expressions(
                json!({"key": "maas.cluster.x-k8s.io/zone", "operator": "in", "values": ["az1"]}),
            ),
            "spec.hostSelector.matchExpressions[0].operator",
            UNSUPPORTED,
        ),
        create(
            "machine-selector-in-without-values",
            &m,
            &expressions(json!({"key": "maas.cluster.x-k8s.io/zone", "operator": "In"})),
            "spec.hostSelector.matchExpressions[0].values",
            "spec.hostSelector.matchExpressions[].values must not be empty when operator is In or NotIn",
        ),
        create(
            "machine-selector-exists-with-values",
            &m,
            &expressions(
                json!({"key": "tag.maas.cluster.x-k8s.io/gpu", "operator": "Exists", "values": ["true"]}),
            ),
            "spec.hostSelector.matchExpressions[0].values",
            "spec.hostSelector.matchExpressions[].values must be empty when operator is Exists or DoesNotExist",
        ),
        create(
            "machine-release-bad-erase",
            &m,
            &json!({"spec": {"releasePolicy": {"erase": "Zero"}}}),
            "spec.releasePolicy.erase",
            UNSUPPORTED,
        ),
        create(
            "machine-userdata-name-missing",
            &m,
            &json!({"spec": {"userData": {"key": "value"}}}),
            "spec.userData.name",
            REQUIRED,
        ),
        update(
            "machine-providerid-changed",
            &m,
            &json!({"spec": {"providerID": "maas:///az2/4y3h7a"}}),
            "spec.providerID",
            "spec.providerID is immutable once set",
        ),
        update(
            "machine-providerid-removed",
            &m,
            &json!({"spec": {"providerID": null}}),
            "spec.providerID",
            "spec.providerID is immutable once set",
        ),
        update(
            "machine-image-changed",
            &m,
            &json!({"spec": {"image": "ubuntu/noble"}}),
            "spec.image",
            "spec.image is immutable",
        ),
        update(
            "machine-mincpu-changed",
            &m,
            &json!({"spec": {"minCPU": 8}}),
            "spec.minCPU",
            "spec.minCPU is immutable",
        ),
        update(
            "machine-minmemory-changed",
            &m,
            &json!({"spec": {"minMemory": 16384}}),
            "spec.minMemory",
            "spec.minMemory is immutable",
        ),
        create(
            "machinetemplate-image-missing",
            &mt,
            &json!({"spec": {"template": {"spec": {"image": null}}}}),
            "spec.template.spec.image",
            REQUIRED,
        ),
        create(
            "machinetemplate-reuse-ttl-too-short",
            &mt,
            &json!({"spec": {"nodeReuseTTLSeconds": 10}}),
            "spec.nodeReuseTTLSeconds",
            "should be greater than or equal to 60",
        ),
        create(
            "machinetemplate-selector-in-without-values",
            &mt,
            &template_expressions(
                json!({"key": "maas.cluster.x-k8s.io/zone", "operator": "NotIn"}),
            ),
            "spec.template.spec.hostSelector.matchExpressions[0].values",
            "spec.hostSelector.matchExpressions[].values must not be empty when operator is In or NotIn",
        ),
        create(
            "machinetemplate-selector-exists-with-values",
            &mt,
            &template_expressions(
                json!({"key": "maas.cluster.x-k8s.io/zone", "operator": "DoesNotExist", "values": ["az1"]}),
            ),
            "spec.template.spec.hostSelector.matchExpressions[0].values",
            "spec.hostSelector.matchExpressions[].values must be empty when operator is Exists or DoesNotExist",
        ),
    ]
}
