//! Invalid cases for the data-template, data-claim, data and IP-pool kinds.

use serde_json::{Value, json};

use super::valid::{
    maas_data, maas_data_claim, maas_data_template, maas_ip_address_lock, maas_ip_pool,
};
use super::{
    InvalidExample, REQUIRED, UNSUPPORTED, merged, rejected_create as create,
    rejected_update as update,
};

/// Locks are named after their address by data-controller; the schema does not check the
/// name, so the cases carry plain names.
pub(super) fn ip_lock() -> Vec<InvalidExample> {
    let l = maas_ip_address_lock();
    vec![
        create(
            "lock-address-invalid",
            &l,
            &json!({"spec": {"address": "10.20.0.999"}}),
            "spec.address",
            "spec.address must be an IP address",
        ),
        update(
            "lock-address-changed",
            &merged(&l, &json!({"spec": {"address": "10.20.0.102"}})),
            &json!({"spec": {"address": "10.20.0.103"}}),
            "spec.address",
            "spec.address is immutable: a lock is released by deleting it",
        ),
        update(
            "lock-claim-changed",
            &merged(&l, &json!({"spec": {"address": "10.20.0.104"}})),
            &json!({"spec": {"claim": {"uid": "another-incarnation"}}}),
            "spec.claim",
            "spec.claim is immutable: a lock is released by deleting it",
        ),
        update(
            "lock-pool-changed",
            &merged(&l, &json!({"spec": {"address": "10.20.0.105"}})),
            &json!({"spec": {"pool": "elsewhere"}}),
            "spec.pool",
            "spec.pool is immutable",
        ),
    ]
}

/// A patch replacing the template's ethernets with `ethernet`.
fn ethernet(ethernet: &Value) -> Value {
    json!({"spec": {"networkData": {"links": {"ethernets": [ethernet]}}}})
}

/// A patch replacing the template's DHCP networks with one carrying `route`.
fn route(route: &Value) -> Value {
    json!({"spec": {"networkData": {"networks": {"ipv4DHCP": [{"id": "storage", "link": "eno1", "routes": [route]}]}}}})
}

pub(super) fn data_template() -> Vec<InvalidExample> {
    let t = maas_data_template();
    let mac = json!({"fromHostInterface": "eno1"});
    vec![
        create(
            "datatemplate-mtu-too-small",
            &t,
            &ethernet(&json!({"type": "phy", "id": "eno1", "mtu": 1000, "macAddress": mac})),
            "spec.networkData.links.ethernets[0].mtu",
            "should be greater than or equal to 1280",
        ),
        create(
            "datatemplate-bad-link-type",
            &t,
            &ethernet(&json!({"type": "wifi", "id": "eno1", "macAddress": mac})),
            "spec.networkData.links.ethernets[0].type",
            UNSUPPORTED,
        ),
        create(
            "datatemplate-link-id-invalid",
            &t,
            &ethernet(&json!({"id": "1eth", "macAddress": mac})),
            "spec.networkData.links.ethernets[0].id",
            "should match",
        ),
        create(
            "datatemplate-mac-both-sources",
            &t,
            &ethernet(
                &json!({"id": "eno1", "macAddress": {"string": "52:54:00:12:34:56", "fromHostInterface": "eno1"}}),
            ),
            "spec.networkData.links.ethernets[0].macAddress",
            "spec.networkData.links macAddress must set exactly one of string, fromHostInterface or fromBootMAC",
        ),
        create(
            "datatemplate-mac-boot-and-interface",
            &t,
            &ethernet(
                &json!({"id": "eno1", "macAddress": {"fromBootMAC": true, "fromHostInterface": "eno1"}}),
            ),
            "spec.networkData.links.ethernets[0].macAddress",
            "spec.networkData.links macAddress must set exactly one of string, fromHostInterface or fromBootMAC",
        ),
        create(
            "datatemplate-mac-boot-false-only",
            &t,
            &ethernet(&json!({"id": "eno1", "macAddress": {"fromBootMAC": false}})),
            "spec.networkData.links.ethernets[0].macAddress",
            "spec.networkData.links macAddress must set exactly one of string, fromHostInterface or fromBootMAC",
        ),
        create(
            "datatemplate-mac-no-source",
            &t,
            &ethernet(&json!({"id": "eno1", "macAddress": {}})),
            "spec.networkData.links.ethernets[0].macAddress",
            "spec.networkData.links macAddress must set exactly one of string, fromHostInterface or fromBootMAC",
        ),
        create(
            "datatemplate-mac-malformed",
            &t,
            &ethernet(&json!({"id": "eno1", "macAddress": {"string": "52:54:00:12:34"}})),
            "spec.networkData.links.ethernets[0].macAddress.string",
            "should match",
        ),
        create(
            "datatemplate-vlan-id-too-big",
            &t,
            &json!({"spec": {"networkData": {"links": {"vlans": [{"id": "bond0.5000", "vlanID": 5000, "vlanLink": "bond0"}]}}}}),
            "spec.networkData.links.vlans[0].vlanID",
            "should be less than or equal to 4094",
        ),
        create(
            "datatemplate-bad-bond-mode",
            &t,
            &json!({"spec": {"networkData": {"links": {"bonds": [{"id": "bond0", "bondMode": "lacp", "bondLinks": ["eno2"]}]}}}}),
            "spec.networkData.links.bonds[0].bondMode",
            UNSUPPORTED,
        ),
        create(
            "datatemplate-bond-without-links",
            &t,
            &json!({"spec": {"networkData": {"links": {"bonds": [{"id": "bond0", "bondMode": "active-backup", "bondLinks": []}]}}}}),
            "spec.networkData.links.bonds[0].bondLinks",
            "should have at least 1 items",
        ),
        create(
            "datatemplate-route-two-gateways",
            &t,
            &route(
                &json!({"network": "10.99.0.0/16", "gateway": "10.30.0.1", "gatewayFromPool": {"name": "prod-provisioning"}}),
            ),
            "spec.networkData.networks.ipv4DHCP[0].routes[0]",
            "spec.networkData.networks routes must set exactly one of gateway or gatewayFromPool",
        ),
        create(
            "datatemplate-route-network-not-cidr",
            &t,
            &route(&json!({"network": "10.99.0.0", "gateway": "10.30.0.1"})),
            "spec.networkData.networks.ipv4DHCP[0].routes[0].network",
            "spec.networkData.networks routes network must be a CIDR",
        ),
        create(
            "datatemplate-route-gateway-not-ip",
            &t,
            &route(&json!({"network": "10.99.0.0/16", "gateway": "router.lab"})),
            "spec.networkData.networks.ipv4DHCP[0].routes[0].gateway",
            "spec.networkData.networks routes gateway must be an IP address",
        ),
        create(
            "datatemplate-dns-not-ip",
            &t,
            &json!({"spec": {"networkData": {"services": {"dns": ["dns.lab"]}}}}),
            "spec.networkData.services.dns",
            "spec.networkData.services.dns must contain only IP addresses",
        ),
        create(
            "datatemplate-static-network-pool-missing",
            &t,
            &json!({"spec": {"networkData": {"networks": {"ipv4": [{"id": "provisioning", "link": "eno1"}]}}}}),
            "spec.networkData.networks.ipv4[0].ipAddressFromPool",
            REQUIRED,
        ),
        create(
            "datatemplate-index-step-zero",
            &t,
            &json!({"spec": {"metaData": {"indexes": [{"key": "node-index", "step": 0}]}}}),
            "spec.metaData.indexes[0].step",
            "should be greater than or equal to 1",
        ),
        create(
            "datatemplate-index-offset-negative",
            &t,
            &json!({"spec": {"metaData": {"indexes": [{"key": "node-index", "offset": -1}]}}}),
            "spec.metaData.indexes[0].offset",
            "should be greater than or equal to 0",
        ),
        create(
            "datatemplate-bad-object",
            &t,
            &json!({"spec": {"metaData": {"objectNames": [{"key": "node", "object": "node"}]}}}),
            "spec.metaData.objectNames[0].object",
            UNSUPPORTED,
        ),
        create(
            "datatemplate-duplicate-key",
            &t,
            &json!({"spec": {"metaData": {"strings": [{"key": "env", "value": "a"}, {"key": "env", "value": "b"}]}}}),
            "spec.metaData.strings[1]",
            "Duplicate value",
        ),
        update(
            "datatemplate-metadata-changed",
            &t,
            &json!({"spec": {"metaData": {"strings": [{"key": "environment", "value": "staging"}]}}}),
            "spec.metaData",
            "spec.metaData is immutable",
        ),
        update(
            "datatemplate-metadata-removed",
            &t,
            &json!({"spec": {"metaData": null}}),
            "spec.metaData",
            "spec.metaData is immutable",
        ),
        update(
            "datatemplate-networkdata-changed",
            &t,
            &json!({"spec": {"networkData": {"services": {"dns": ["10.20.0.9"]}}}}),
            "spec.networkData",
            "spec.networkData is immutable",
        ),
    ]
}

pub(super) fn claim_and_data() -> Vec<InvalidExample> {
    let c = maas_data_claim();
    let d = maas_data();
    vec![
        create(
            "dataclaim-template-missing",
            &c,
            &json!({"spec": {"template": null}}),
            "spec.template",
            REQUIRED,
        ),
        update(
            "dataclaim-template-changed",
            &c,
            &json!({"spec": {"template": {"name": "other-data"}}}),
            "spec.template",
            "spec.template is immutable",
        ),
        create(
            "data-claim-missing",
            &d,
            &json!({"spec": {"claim": null}}),
            "spec.claim",
            REQUIRED,
        ),
        create(
            "data-index-negative",
            &d,
            &json!({"spec": {"index": -1}}),
            "spec.index",
            "should be greater than or equal to 0",
        ),
        // Named `<template>-<index>` like every MaasData (the webhook refuses other names).
        update(
            "index-changed-0",
            &data_of("index-changed"),
            &json!({"spec": {"index": 1}}),
            "spec.index",
            "spec.index is immutable",
        ),
        update(
            "template-changed-0",
            &data_of("template-changed"),
            &json!({"spec": {"template": {"name": "other-data"}}}),
            "spec.template",
            "spec.template is immutable",
        ),
        update(
            "claim-changed-0",
            &data_of("claim-changed"),
            &json!({"spec": {"claim": {"name": "other-claim"}}}),
            "spec.claim",
            "spec.claim is immutable",
        ),
    ]
}

/// The valid MaasData, index 0 of template `template`.
fn data_of(template: &str) -> Value {
    merged(
        &maas_data(),
        &json!({"spec": {"template": {"name": template}}}),
    )
}

/// A patch replacing the pool's ranges with `range`.
fn range(range: &Value) -> Value {
    json!({"spec": {"pools": [range]}})
}

pub(super) fn ip_pool() -> Vec<InvalidExample> {
    let p = maas_ip_pool();
    vec![
        create(
            "ippool-nameprefix-missing",
            &p,
            &json!({"spec": {"namePrefix": null}}),
            "spec.namePrefix",
            REQUIRED,
        ),
        create(
            "ippool-nameprefix-invalid",
            &p,
            &json!({"spec": {"namePrefix": "Prod_Pool"}}),
            "spec.namePrefix",
            "should match",
        ),
        create(
            "ippool-pools-missing",
            &p,
            &json!({"spec": {"pools": null}}),
            "spec.pools",
            REQUIRED,
        ),
        create(
            "ippool-pools-empty",
            &p,
            &json!({"spec": {"pools": []}}),
            "spec.pools",
            "should have at least 1 items",
        ),
        create(
            "ippool-range-start-only",
            &p,
            &range(&json!({"start": "10.20.0.100"})),
            "spec.pools[0]",
            "spec.pools[] entries must set subnet, or both start and end",
        ),
        create(
            "ippool-range-start-not-ip",
            &p,
            &range(&json!({"start": "10.20.0.300", "end": "10.20.0.199"})),
            "spec.pools[0].start",
            "spec.pools[].start must be an IP address",
        ),
        create(
            "ippool-range-end-not-ip",
            &p,
            &range(&json!({"start": "10.20.0.100", "end": "last"})),
            "spec.pools[0].end",
            "spec.pools[].end must be an IP address",
        ),
        create(
            "ippool-maas-subnet-not-cidr",
            &p,
            &json!({"spec": {"maasSubnet": "10.20.0.0"}}),
            "spec.maasSubnet",
            "spec.maasSubnet must be a CIDR such as 10.20.0.0/16",
        ),
        create(
            "ippool-range-subnet-not-cidr",
            &p,
            &range(&json!({"subnet": "10.21.0.0/33"})),
            "spec.pools[0].subnet",
            "spec.pools[].subnet must be a CIDR such as 10.0.0.0/24",
        ),
        create(
            "ippool-range-gateway-not-ip",
            &p,
            &range(&json!({"subnet": "10.21.0.0/24", "gateway": "gw"})),
            "spec.pools[0].gateway",
            "spec.pools[].gateway must be an IP address",
        ),
        create(
            "ippool-range-dns-not-ip",
            &p,
            &range(&json!({"subnet": "10.21.0.0/24", "dnsServers": ["dns"]})),
            "spec.pools[0].dnsServers",
            "spec.pools[].dnsServers must contain only IP addresses",
        ),
        create(
            "ippool-range-prefix-too-big",
            &p,
            &range(&json!({"subnet": "fd00:20::/64", "prefix": 129})),
            "spec.pools[0].prefix",
            "should be less than or equal to 128",
        ),
        create(
            "ippool-prefix-negative",
            &p,
            &json!({"spec": {"prefix": -1}}),
            "spec.prefix",
            "should be greater than or equal to 0",
        ),
        create(
            "ippool-gateway-not-ip",
            &p,
            &json!({"spec": {"gateway": "10.20.0"}}),
            "spec.gateway",
            "spec.gateway must be an IP address",
        ),
        create(
            "ippool-dns-not-ip",
            &p,
            &json!({"spec": {"dnsServers": ["10.20.0.2", "resolver"]}}),
            "spec.dnsServers",
            "spec.dnsServers must contain only IP addresses",
        ),
        create(
            "ippool-exclusion-malformed",
            &p,
            &json!({"spec": {"exclusions": ["10.20.0.160-10.20.0.x"]}}),
            "spec.exclusions",
            "spec.exclusions entries must be an IP address, a range first-last or a CIDR",
        ),
        create(
            "ippool-preallocation-not-ip",
            &p,
            &json!({"spec": {"preAllocations": {"prod-cp-x7k2p-provisioning": "first"}}}),
            "spec.preAllocations",
            "spec.preAllocations values must be IP addresses",
        ),
        create(
            "ippool-bad-strategy",
            &p,
            &json!({"spec": {"allocationStrategy": "Fastest"}}),
            "spec.allocationStrategy",
            UNSUPPORTED,
        ),
        update(
            "ippool-nameprefix-changed",
            &p,
            &json!({"spec": {"namePrefix": "prod-prov"}}),
            "spec.namePrefix",
            "spec.namePrefix is immutable",
        ),
        update(
            "ippool-strategy-changed",
            &p,
            &json!({"spec": {"allocationStrategy": "Random"}}),
            "spec.allocationStrategy",
            "spec.allocationStrategy is immutable",
        ),
    ]
}
