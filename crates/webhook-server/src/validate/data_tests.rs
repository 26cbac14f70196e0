//! Every rule of the three data kinds: exact field paths and messages, valid objects clean.

use std::sync::Arc;

use capmaas_api::MaasIPPool;
use capmaas_api::examples::valid_examples;
use serde_json::{Value, json};

use super::*;
use crate::validate::StaticLookups;

const NS: &str = "default";

fn example(kind: &str) -> Value {
    valid_examples()
        .into_iter()
        .find(|e| e.kind == kind)
        .unwrap()
        .object
}

fn with_namespace(mut object: Value) -> Value {
    object["metadata"]["namespace"] = json!(NS);
    object
}

fn template(spec: &Value) -> MaasDataTemplate {
    serde_json::from_value(json!({
        "apiVersion": capmaas_api::API_VERSION,
        "kind": "MaasDataTemplate",
        "metadata": {"name": "t", "namespace": NS},
        "spec": spec,
    }))
    .unwrap()
}

/// MaasIPPools named `names`, in namespace `namespace`.
fn pools(namespace: &str, names: &[&str]) -> StaticLookups {
    let pools = names
        .iter()
        .map(|name| {
            let mut pool = example("MaasIPPool");
            pool["metadata"] = json!({"name": name, "namespace": namespace});
            Arc::new(serde_json::from_value::<MaasIPPool>(pool).unwrap())
        })
        .collect();
    StaticLookups {
        pools,
        ..StaticLookups::default()
    }
}

fn request<'a, K>(
    operation: Operation,
    object: Option<&'a K>,
    old: Option<&'a K>,
) -> Request<'a, K> {
    Request {
        operation,
        namespace: NS,
        name: "t",
        object,
        old,
    }
}

fn create_template(t: &MaasDataTemplate, lookups: &StaticLookups) -> Verdict {
    maas_data_template(&request(Operation::Create, Some(t), None), lookups)
}

fn errors(v: &Verdict) -> Vec<String> {
    v.errors.iter().map(ToString::to_string).collect()
}

/// Links every structure test builds on: eno1 alone, bond0 over eno2 and eno3.
fn links() -> Value {
    json!({
        "ethernets": [
            {"id": "eno1", "macAddress": {"fromHostInterface": "eno1"}},
            {"id": "eno2", "macAddress": {"fromHostInterface": "eno2"}},
            {"id": "eno3", "macAddress": {"fromHostInterface": "eno3"}}
        ],
        "bonds": [{"id": "bond0", "bondMode": "active-backup", "bondLinks": ["eno2", "eno3"]}]
    })
}

#[test]
fn the_valid_example_template_is_admitted_silently_when_its_pool_exists() {
    let t: MaasDataTemplate =
        serde_json::from_value(with_namespace(example("MaasDataTemplate"))).unwrap();
    assert_eq!(
        create_template(&t, &pools(NS, &["prod-provisioning"])),
        Verdict::ok()
    );
}

#[test]
fn a_missing_maas_ip_pool_is_one_warning_at_the_first_field_naming_it() {
    let t: MaasDataTemplate =
        serde_json::from_value(with_namespace(example("MaasDataTemplate"))).unwrap();
    // The pool exists, but in another namespace.
    let v = create_template(&t, &pools("elsewhere", &["prod-provisioning"]));
    assert!(v.allowed(), "{:?}", v.errors);
    assert_eq!(
        v.warnings,
        [
            r#"spec.metaData.ipAddressesFromPool[0].name: MaasIPPool "prod-provisioning" does not exist in namespace "default" (5 other fields name it too); the data claims of this template wait until it does"#
        ]
    );
    let one = template(&json!({"networkData": {
        "links": links(),
        "networks": {"ipv4": [{"id": "n", "link": "eno1", "ipAddressFromPool": {"name": "gone"}}]}
    }}));
    assert_eq!(
        create_template(&one, &StaticLookups::default()).warnings,
        [
            r#"spec.networkData.networks.ipv4[0].ipAddressFromPool.name: MaasIPPool "gone" does not exist in namespace "default"; the data claims of this template wait until it does"#
        ]
    );
}

#[test]
fn pool_references_name_a_kind_someone_serves() {
    let in_cluster =
        json!({"name": "ic", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"});
    let t = template(&json!({
        "metaData": {
            "prefixesFromPool": [{"key": "p", "name": "x", "kind": "GlobalIPPool"}],
            "gatewaysFromPool": [{"key": "g", "name": "ic", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}],
            "dnsServersFromPool": [{"key": "d", "name": "ic", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}]
        },
        "networkData": {
            "links": links(),
            "networks": {
                "ipv4": [{
                    "id": "a", "link": "eno1",
                    "ipAddressFromPool": {"name": "p", "kind": "Foo"},
                    "routes": [{"network": "0.0.0.0/0", "gatewayFromPool": {"name": "p", "apiGroup": ""}}]
                }],
                "ipv6": [{"id": "b", "link": "bond0", "ipAddressFromPool": in_cluster}]
            },
            "services": {"dnsFromPool": in_cluster}
        }
    }));
    let v = create_template(&t, &pools(NS, &["p", "x"]));
    assert_eq!(
        errors(&v),
        [
            r#"spec.metaData.prefixesFromPool[0].kind: Unsupported value: "GlobalIPPool": this provider serves MaasIPPool; other IPAM providers' pools are referenced with their own apiGroup"#,
            r#"spec.metaData.dnsServersFromPool[0].kind: Unsupported value: "InClusterIPPool": DNS servers come only from a MaasIPPool (apiGroup infrastructure.cluster.x-k8s.io): the IPAddress another IPAM provider hands out carries none, so rendering would fail"#,
            r#"spec.networkData.networks.ipv4[0].ipAddressFromPool.kind: Unsupported value: "Foo": this provider serves MaasIPPool; other IPAM providers' pools are referenced with their own apiGroup"#,
            r#"spec.networkData.networks.ipv4[0].routes[0].gatewayFromPool.apiGroup: Invalid value: "": the core API group serves no IP pools: use infrastructure.cluster.x-k8s.io for a MaasIPPool, or the group of another IPAM provider's pool kind"#,
            r#"spec.networkData.services.dnsFromPool.kind: Unsupported value: "InClusterIPPool": DNS servers come only from a MaasIPPool (apiGroup infrastructure.cluster.x-k8s.io): the IPAddress another IPAM provider hands out carries none, so rendering would fail"#,
        ]
    );
    assert!(
        v.warnings.is_empty(),
        "only MaasIPPools are looked up: {:?}",
        v.warnings
    );
}

#[test]
fn another_providers_pool_is_accepted_for_addresses_and_gateways() {
    let in_cluster =
        json!({"name": "ic", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"});
    let t = template(&json!({
        "metaData": {"ipAddressesFromPool": [{"key": "ip", "name": "ic", "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool"}]},
        "networkData": {
            "links": links(),
            "networks": {"ipv4": [{
                "id": "a", "link": "eno1", "ipAddressFromPool": in_cluster,
                "routes": [{"network": "0.0.0.0/0", "gatewayFromPool": in_cluster}]
            }]}
        }
    }));
    assert_eq!(
        create_template(&t, &StaticLookups::default()),
        Verdict::ok()
    );
}

#[test]
fn links_and_networks_must_render() {
    let mut links = links();
    links["vlans"] = json!([
        {"id": "eno1", "vlanID": 5, "vlanLink": "bond0"},
        {"id": "v7", "vlanID": 7, "vlanLink": "eno2"},
        {"id": "v8", "vlanID": 8, "vlanLink": "v7"}
    ]);
    links["bonds"][0]["bondLinks"] = json!(["eno2", "eno7", "eno2"]);
    let t = template(&json!({"networkData": {
        "links": links,
        "networks": {
            "ipv4": [{
                "id": "n", "link": "eth9", "ipAddressFromPool": {"name": "p"},
                "routes": [{"network": "::/0", "gateway": "10.0.0.1"}, {"network": "10.0.0.0/8", "gateway": "fe80::1"}]
            }],
            "ipv4DHCP": [{"id": "n", "link": "eno2"}]
        }
    }}));
    assert_eq!(
        errors(&create_template(&t, &pools(NS, &["p"]))),
        [
            r#"spec.networkData.links.bonds[0].bondLinks[1]: Invalid value: "eno7": no ethernet link with this id in spec.networkData.links"#,
            r#"spec.networkData.links.bonds[0].bondLinks[2]: Duplicate value: "eno2": already a member of the bond at spec.networkData.links.bonds[0].bondLinks[0]; a link joins one bond once"#,
            r#"spec.networkData.links.vlans[0].id: Duplicate value: "eno1": already the id of spec.networkData.links.ethernets[0]"#,
            r#"spec.networkData.links.vlans[1].vlanLink: Invalid value: "eno2": a member of bond "bond0": put VLANs and addresses on the bond"#,
            r#"spec.networkData.links.vlans[2].vlanLink: Invalid value: "v7": no ethernet or bond link with this id in spec.networkData.links"#,
            r#"spec.networkData.networks.ipv4[0].link: Invalid value: "eth9": no link with this id in spec.networkData.links"#,
            r#"spec.networkData.networks.ipv4[0].routes[0].network: Invalid value: "::/0": must be an IPv4 address or network, as the network it belongs to"#,
            r#"spec.networkData.networks.ipv4[0].routes[1].gateway: Invalid value: "fe80::1": must be an IPv4 address or network, as the network it belongs to"#,
            r#"spec.networkData.networks.ipv4DHCP[0].id: Duplicate value: "n": already the id of spec.networkData.networks.ipv4[0]"#,
            r#"spec.networkData.networks.ipv4DHCP[0].link: Invalid value: "eno2": a member of bond "bond0": put VLANs and addresses on the bond"#,
        ]
    );
}

#[test]
fn two_vlans_with_one_id_on_one_parent_are_a_duplicate() {
    let mut links = links();
    links["vlans"] = json!([
        {"id": "a", "vlanID": 7, "vlanLink": "bond0"},
        {"id": "b", "vlanID": 7, "vlanLink": "bond0"},
        {"id": "c", "vlanID": 7, "vlanLink": "eno1"}
    ]);
    let t = template(&json!({"networkData": {"links": links}}));
    assert_eq!(
        errors(&create_template(&t, &StaticLookups::default())),
        [
            r#"spec.networkData.links.vlans[1].vlanID: Duplicate value: "7": VLAN 7 on "bond0" is already defined by spec.networkData.links.vlans[0]"#
        ]
    );
}

#[test]
fn metadata_keys_are_unique_across_every_list() {
    let t = template(&json!({"metaData": {
        "strings": [{"key": "hostname", "value": "x"}],
        "objectNames": [{"key": "hostname", "object": "maasmachine"}],
        "namespaces": [{"key": "ns"}],
        "indexes": [{"key": "i"}],
        "ipAddressesFromPool": [{"key": "i", "name": "p"}],
        "fromHostInterfaces": [{"key": "mac", "interface": "eno1"}],
        "fromLabels": [{"key": "mac", "object": "maashost", "label": "l"}],
        "fromAnnotations": [{"key": "ns", "object": "machine", "annotation": "a"}]
    }}));
    assert_eq!(
        errors(&create_template(&t, &pools(NS, &["p"]))),
        [
            r#"spec.metaData.objectNames[0].key: Duplicate value: "hostname": already the key of spec.metaData.strings[0]; keys are unique across all metaData lists"#,
            r#"spec.metaData.ipAddressesFromPool[0].key: Duplicate value: "i": already the key of spec.metaData.indexes[0]; keys are unique across all metaData lists"#,
            r#"spec.metaData.fromLabels[0].key: Duplicate value: "mac": already the key of spec.metaData.fromHostInterfaces[0]; keys are unique across all metaData lists"#,
            r#"spec.metaData.fromAnnotations[0].key: Duplicate value: "ns": already the key of spec.metaData.namespaces[0]; keys are unique across all metaData lists"#,
        ]
    );
}

#[test]
fn an_update_does_not_judge_the_immutable_data_again() {
    let bad = template(&json!({
        "metaData": {
            "strings": [{"key": "k", "value": "x"}],
            "namespaces": [{"key": "k"}],
            "gatewaysFromPool": [{"key": "g", "name": "gone"}]
        }
    }));
    let lookups = StaticLookups::default();
    assert_eq!(create_template(&bad, &lookups).errors.len(), 1);
    // data-controller adding or removing its finalizer, or a new clusterName.
    let mut updated = bad.clone();
    updated.metadata.finalizers = Some(vec!["x".into()]);
    updated.spec.cluster_name = Some("c".into());
    let v = maas_data_template(
        &request(Operation::Update, Some(&updated), Some(&bad)),
        &lookups,
    );
    assert!(v.allowed(), "{:?}", v.errors);
    assert_eq!(
        v.warnings.len(),
        1,
        "the missing pool is still worth a word"
    );
    let v = maas_data_template(&request(Operation::Delete, None, Some(&bad)), &lookups);
    assert_eq!(v, Verdict::ok());
}

fn claim(host: Option<&str>) -> MaasDataClaim {
    let mut claim: MaasDataClaim =
        serde_json::from_value(with_namespace(example("MaasDataClaim"))).unwrap();
    claim.spec.host_ref = host.map(|h| capmaas_api::common::HostReference::new(h, "ns", "ns"));
    claim
}

fn update_claim(old: &MaasDataClaim, new: &MaasDataClaim) -> Vec<String> {
    errors(&maas_data_claim(&request(
        Operation::Update,
        Some(new),
        Some(old),
    )))
}

#[test]
fn a_claims_host_may_be_set_once_and_never_changed() {
    let (unset, a, b) = (claim(None), claim(Some("a")), claim(Some("b")));
    assert_eq!(
        maas_data_claim(&request(Operation::Create, Some(&a), None)),
        Verdict::ok()
    );
    assert!(update_claim(&unset, &a).is_empty(), "unset to set");
    assert!(update_claim(&unset, &unset).is_empty());
    let mut released = a.clone();
    released.metadata.finalizers = None;
    assert!(
        update_claim(&a, &released).is_empty(),
        "finalizer removal by machine-controller"
    );
    assert_eq!(
        update_claim(&a, &b),
        [
            r#"spec.hostRef: Forbidden: may not change once set (it names MaasHost "a"): the rendered data (MACs, hostname) belong to that host; delete the claim to render for another"#
        ]
    );
    assert_eq!(
        update_claim(&a, &unset),
        [
            r#"spec.hostRef: Forbidden: may not be removed once set (it names MaasHost "a"): the rendered data (MACs, hostname) belong to that host; delete the claim to render for another"#
        ]
    );
    assert_eq!(
        maas_data_claim(&request(Operation::Delete, None, Some(&a))),
        Verdict::ok()
    );
}

fn data(name: &str) -> MaasData {
    let mut data: MaasData = serde_json::from_value(with_namespace(example("MaasData"))).unwrap();
    data.metadata.name = Some(name.to_owned());
    data
}

#[test]
fn a_maas_data_is_named_after_its_template_and_index() {
    let good = data("prod-data-0");
    let create = |d: &MaasData| errors(&maas_data(&request(Operation::Create, Some(d), None)));
    assert!(create(&good).is_empty());
    assert_eq!(
        create(&data("prod-data-00")),
        [
            r#"metadata.name: Invalid value: "prod-data-00": must be "prod-data-0" (<spec.template.name>-<spec.index>): the name is what makes an index unique per template, as the API server refuses a second object of one name"#
        ]
    );
    // generateName: no name to match.
    assert_eq!(create(&data("")).len(), 1);
    let renamed = data("anything");
    assert!(
        maas_data(&request(Operation::Update, Some(&renamed), Some(&renamed))).allowed(),
        "an update is CEL's: the name never changes"
    );
}
