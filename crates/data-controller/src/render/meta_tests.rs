//! metaData: every item kind, every error, YAML quoting.

use std::collections::BTreeMap;

use capmaas_api::data_meta::DataObject;

use super::super::tests::Fixture;
use super::*;

fn meta(yaml: &str) -> MetaData {
    serde_saphyr::from_str(yaml).unwrap()
}

fn render_map(yaml: &str, fixture: &Fixture) -> Result<BTreeMap<String, String>, RenderError> {
    render_meta_data_map(&meta(yaml), &fixture.input())
}

fn ok(yaml: &str) -> BTreeMap<String, String> {
    render_map(yaml, &Fixture::example()).unwrap()
}

fn err(yaml: &str, fixture: &Fixture) -> String {
    render_map(yaml, fixture).unwrap_err().to_string()
}

#[test]
fn strings_object_names_and_namespaces() {
    let map = ok(r"
strings: [{key: a, value: literal}, {key: empty, value: ''}]
objectNames: [{key: m, object: machine}, {key: mm, object: maasmachine}, {key: h, object: maashost}]
namespaces: [{key: ns}]
");
    let expected: BTreeMap<String, String> = [
        ("a", "literal"),
        ("empty", ""),
        ("m", "cp-abcde"),
        ("mm", "prod-1-cp-xyz12"),
        ("h", "node-07"),
        ("ns", "prod"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(map, expected);
}

#[test]
fn indexes() {
    let map = ok(r"
indexes:
  - {key: plain}
  - {key: scaled, offset: 100, step: 10, prefix: 'node-', suffix: '.lab'}
  - {key: prefix-only, prefix: 'w'}
");
    assert_eq!(map["plain"], "3");
    assert_eq!(map["scaled"], "node-130.lab");
    assert_eq!(map["prefix-only"], "w3");
    let mut fixture = Fixture::example();
    fixture.index = i32::MAX;
    let big = render_map(
        "indexes: [{key: k, offset: 2147483647, step: 2147483647}]",
        &fixture,
    )
    .unwrap();
    assert_eq!(
        big["k"],
        (i64::from(i32::MAX) * i64::from(i32::MAX) + i64::from(i32::MAX)).to_string()
    );
}

#[test]
fn index_errors() {
    let mut fixture = Fixture::example();
    for (template, message) in [
        (
            "indexes: [{key: a}, {key: k, step: 0}]",
            "spec.metaData.indexes[1]: step is 0, must be >= 1",
        ),
        (
            "indexes: [{key: k, offset: -1}]",
            "spec.metaData.indexes[0]: offset is -1, must be >= 0",
        ),
    ] {
        assert_eq!(err(template, &fixture), message, "{template}");
    }
    fixture.index = -4;
    assert_eq!(
        err("indexes: [{key: k}]", &fixture),
        "spec.metaData.indexes[0]: index is -4, must be >= 0"
    );
    assert_eq!(index_value(1, 2, 3), Some(7));
    assert_eq!(index_value(0, i64::MAX, 2), None);
    assert_eq!(index_value(1, i64::MAX, 1), None);
    let overflow = RenderError::new(
        "spec.metaData.indexes[0]",
        RenderProblem::IndexOverflow {
            offset: 1,
            index: i64::MAX,
            step: 1,
        },
    );
    assert_eq!(
        overflow.to_string(),
        "spec.metaData.indexes[0]: offset 1 + index 9223372036854775807 * step 1 overflows"
    );
}

#[test]
fn values_from_pools() {
    let map = ok(r"
ipAddressesFromPool: [{key: v4, name: provisioning}, {key: v6, name: public-v6}]
prefixesFromPool: [{key: p4, name: provisioning}, {key: p6, name: public-v6}]
gatewaysFromPool: [{key: g4, name: provisioning}, {key: g6, name: public-v6}]
dnsServersFromPool: [{key: d4, name: provisioning}, {key: d6, name: public-v6}]
");
    assert_eq!(map["v4"], "10.20.0.23");
    assert_eq!(map["v6"], "2001:db8:0:10::23");
    assert_eq!(map["p4"], "24");
    assert_eq!(map["p6"], "64");
    assert_eq!(map["g4"], "10.20.0.1");
    assert_eq!(map["g6"], "2001:db8:0:10::1");
    assert_eq!(map["d4"], "10.20.0.2,10.20.0.3");
    assert_eq!(map["d6"], "2001:db8::53");
}

#[test]
fn pool_errors() {
    let fixture = Fixture::with_bare_pool(22);
    for (template, message) in [
        (
            "ipAddressesFromPool: [{key: k, name: foo}]",
            "spec.metaData.ipAddressesFromPool[0]: no address allocated from pool MaasIPPool/foo",
        ),
        (
            "prefixesFromPool: [{key: k, name: foo, kind: InClusterIPPool, apiGroup: ipam.cluster.x-k8s.io}]",
            "spec.metaData.prefixesFromPool[0]: no address allocated from pool InClusterIPPool.ipam.cluster.x-k8s.io/foo",
        ),
        (
            "gatewaysFromPool: [{key: k, name: bare}]",
            "spec.metaData.gatewaysFromPool[0]: pool MaasIPPool/bare gives no gateway",
        ),
        (
            "dnsServersFromPool: [{key: k, name: bare}]",
            "spec.metaData.dnsServersFromPool[0]: pool MaasIPPool/bare gives no DNS servers",
        ),
        // A pool of the same name but another kind is another pool.
        (
            "ipAddressesFromPool: [{key: k, name: provisioning, kind: Other}]",
            "spec.metaData.ipAddressesFromPool[0]: no address allocated from pool Other/provisioning",
        ),
    ] {
        assert_eq!(err(template, &fixture), message, "{template}");
    }
}

#[test]
fn mac_addresses_from_host_interfaces_are_normalised() {
    let map = ok("fromHostInterfaces: [{key: a, interface: eno1}, {key: c, interface: eno3}]");
    assert_eq!(map["a"], "52:54:00:aa:bb:01");
    assert_eq!(map["c"], "52:54:00:aa:bb:03");
}

#[test]
fn host_interface_errors() {
    let mut fixture = Fixture::example();
    assert_eq!(
        err(
            "fromHostInterfaces: [{key: a, interface: eno1}, {key: b, interface: eno4}]",
            &fixture
        ),
        r#"spec.metaData.fromHostInterfaces[1]: the host has no interface "eno4""#
    );
    fixture.interfaces[0].mac = String::new();
    assert_eq!(
        err("fromHostInterfaces: [{key: a, interface: eno1}]", &fixture),
        r#"spec.metaData.fromHostInterfaces[0]: "" is not a MAC address"#
    );
    fixture.host = None;
    assert_eq!(
        err("fromHostInterfaces: [{key: a, interface: eno2}]", &fixture),
        "spec.metaData.fromHostInterfaces[0]: the MaasHost is not known yet"
    );
}

#[test]
fn labels_and_annotations() {
    let map = ok(r"
fromLabels:
  - {key: cluster, object: machine, label: cluster.x-k8s.io/cluster-name}
  - {key: zone, object: maashost, label: maas.cluster.x-k8s.io/zone}
fromAnnotations:
  - {key: tag, object: maashost, annotation: example.com/asset-tag}
");
    assert_eq!(map["cluster"], "prod-1");
    assert_eq!(map["zone"], "rack-2");
    assert_eq!(map["tag"], "AT-0042");
    let mut fixture = Fixture::example();
    fixture
        .maas_machine
        .as_mut()
        .unwrap()
        .labels
        .insert("empty".into(), String::new());
    let empty = render_map(
        "fromLabels: [{key: e, object: maasmachine, label: empty}]",
        &fixture,
    )
    .unwrap();
    assert_eq!(empty["e"], "", "a present but empty label renders empty");
}

#[test]
fn label_and_annotation_errors() {
    let mut fixture = Fixture::example();
    for (template, message) in [
        (
            r"
fromLabels:
  - {key: a, object: machine, label: cluster.x-k8s.io/cluster-name}
  - {key: b, object: maashost, label: maas.cluster.x-k8s.io/zone}
  - {key: c, object: machine, label: foo}
",
            r#"spec.metaData.fromLabels[2]: Machine has no label "foo""#,
        ),
        (
            "fromAnnotations: [{key: a, object: maasmachine, annotation: x/y}]",
            r#"spec.metaData.fromAnnotations[0]: MaasMachine has no annotation "x/y""#,
        ),
        (
            "fromLabels: [{key: a, object: maashost, label: cluster.x-k8s.io/cluster-name}]",
            r#"spec.metaData.fromLabels[0]: MaasHost has no label "cluster.x-k8s.io/cluster-name""#,
        ),
    ] {
        assert_eq!(err(template, &fixture), message, "{template}");
    }
    fixture.machine = None;
    assert_eq!(
        err("objectNames: [{key: a, object: machine}]", &fixture),
        "spec.metaData.objectNames[0]: the Machine is not known yet"
    );
    assert_eq!(
        err(
            "fromLabels: [{key: a, object: machine, label: x}]",
            &fixture
        ),
        "spec.metaData.fromLabels[0]: the Machine is not known yet"
    );
    fixture.maas_machine = None;
    assert_eq!(
        err(
            "fromAnnotations: [{key: a, object: maasmachine, annotation: x}]",
            &fixture
        ),
        "spec.metaData.fromAnnotations[0]: the MaasMachine is not known yet"
    );
    let error = render_map(
        "fromAnnotations: [{key: a, object: maasmachine, annotation: x}]",
        &fixture,
    )
    .unwrap_err();
    assert_eq!(error.field, "spec.metaData.fromAnnotations[0]");
    assert_eq!(
        *error.problem,
        RenderProblem::MissingObject(DataObject::MaasMachine)
    );
}

#[test]
fn duplicate_keys_name_both_items() {
    let fixture = Fixture::example();
    assert_eq!(
        err(
            "strings: [{key: a, value: x}, {key: a, value: y}]",
            &fixture
        ),
        r#"spec.metaData.strings[1]: key "a" is already set by spec.metaData.strings[0]"#
    );
    assert_eq!(
        err(
            "strings: [{key: b, value: x}, {key: hostname, value: y}]\nobjectNames: [{key: hostname, object: maasmachine}]",
            &fixture
        ),
        r#"spec.metaData.objectNames[0]: key "hostname" is already set by spec.metaData.strings[1]"#
    );
    assert_eq!(
        err(
            "namespaces: [{key: k}]\nfromAnnotations: [{key: k, object: maashost, annotation: example.com/asset-tag}]",
            &fixture
        ),
        r#"spec.metaData.fromAnnotations[0]: key "k" is already set by spec.metaData.namespaces[0]"#
    );
}

#[test]
fn empty_meta_data_renders_an_empty_mapping() {
    let yaml = render_meta_data(&MetaData::default(), &Fixture::example().input()).unwrap();
    assert_eq!(yaml, "{}\n");
    let back: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
    assert!(back.is_empty());
}

/// Values a YAML 1.1 reader (PyYAML in cloud-init) would take for numbers, booleans, nulls or
/// dates are quoted; everything reads back as the same string.
#[test]
fn yaml_quotes_what_would_change_type() {
    let values = [
        "yes",
        "No",
        "on",
        "OFF",
        "y",
        "n",
        "true",
        "null",
        "~",
        "",
        "123",
        "0x1F",
        "017",
        "1e3",
        "1.5",
        ".inf",
        "52:54:00:12:34:56",
        "190:20:30",
        "2026-01-02",
        "- a",
        "a: b",
        "#c",
        "multi\nline",
        " lead",
        "trail ",
        "'q'",
        "\"dq\"",
        "[x]",
        "{y}",
        "&a",
        "*a",
        "!t",
        "%p",
        "@",
        "`",
        "|",
        ">",
        "é",
        "\t",
    ];
    let map: BTreeMap<String, String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("k{i:02}"), (*v).to_owned()))
        .collect();
    let yaml = to_yaml(&map).unwrap();
    let back: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, map, "{yaml}");
    for line in yaml.lines() {
        let (key, value) = line.split_once(": ").unwrap_or((line, ""));
        let index: usize = key[1..].parse().unwrap();
        let original = values[index];
        let plain_risky = matches!(
            original,
            "yes"
                | "No"
                | "on"
                | "OFF"
                | "y"
                | "n"
                | "true"
                | "null"
                | "~"
                | "123"
                | "0x1F"
                | "017"
                | "1e3"
                | "1.5"
                | ".inf"
                | "52:54:00:12:34:56"
                | "190:20:30"
                | "2026-01-02"
        );
        if plain_risky {
            assert!(
                value.starts_with('"') || value.starts_with('\''),
                "{original:?} must be quoted, got {line}"
            );
        }
    }
}

#[test]
fn yaml_quotes_keys_too() {
    let map: BTreeMap<String, String> = [("123", "a"), ("no", "b"), ("plain", "c")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(to_yaml(&map).unwrap(), "\"123\": a\n\"no\": b\nplain: c\n");
}

#[test]
fn render_meta_data_is_sorted_yaml() {
    let yaml = render_meta_data(
        &meta("strings: [{key: b, value: '2'}, {key: a, value: one}]"),
        &Fixture::example().input(),
    )
    .unwrap();
    assert_eq!(yaml, "a: one\nb: \"2\"\n");
}
