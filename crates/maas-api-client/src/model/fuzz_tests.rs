//! Decoders on realistic fixtures, and property tests: arbitrary input never panics, near
//! misses of a real machine decode or fail cleanly, and the lenient list agrees with the
//! strict one. Case counts are explicit to keep the run at a few seconds.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::transport::decode;

const MACHINE: &str = include_str!("fixtures/machine.json");
const OTHERS: &str = include_str!("fixtures/others.json");

fn others() -> Value {
    serde_json::from_str(OTHERS).unwrap()
}

#[test]
fn decodes_machine_fixture() {
    let machine: Machine = decode("test", MACHINE.as_bytes()).unwrap();
    assert_eq!(machine.system_id, "d8n3re");
    assert_eq!(machine.fqdn, "node-01.maas");
    assert_eq!(machine.status, MachineStatus::Deploying);
    assert_eq!(machine.status_message.as_deref(), Some("Installing OS"));
    assert_eq!(machine.power_state, PowerState::On);
    assert_eq!(machine.cpu_count, 8);
    assert_eq!(machine.memory, 16384);
    assert!(machine.storage > 500_000.0);
    assert_eq!(machine.zone_name(), "default");
    assert_eq!(machine.pool_name(), "default");
    assert_eq!(machine.tag_names, vec!["gpu", "ssd"]);
    assert_eq!(machine.annotations()["cluster"], "c1");
    assert_eq!(
        machine.ip_addresses,
        vec!["10.0.0.21".parse::<std::net::IpAddr>().unwrap()]
    );
    let boot = machine.boot_interface.as_ref().unwrap();
    assert_eq!(boot.mac_address, "52:54:00:aa:bb:01");
    assert_eq!(boot.links[0].mode, LinkMode::Static);
    let subnet = boot.links[0].subnet.as_ref().unwrap();
    assert_eq!(subnet.cidr.to_string(), "10.0.0.0/24");
    assert_eq!(subnet.gateway_ip, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(machine.interface_set.len(), 2);
    assert_eq!(machine.interface_set[1].links[0].mode, LinkMode::LinkUp);
    assert_eq!(machine.interface_set[0].ip_addresses().count(), 1);
    assert_eq!(machine.agent_name, None);
    assert_eq!(machine.resource_uri, "/MAAS/api/2.0/machines/d8n3re/");
}

#[test]
fn decodes_other_fixtures() {
    let all = others();
    let zones: Vec<Zone> = serde_json::from_value(all["zones"].clone()).unwrap();
    assert_eq!(zones[0].name, "default");
    let pools: Vec<ResourcePool> = serde_json::from_value(all["pools"].clone()).unwrap();
    assert_eq!(pools[0].id, 0);
    let tags: Vec<Tag> = serde_json::from_value(all["tags"].clone()).unwrap();
    assert_eq!(tags[0].comment, "has a GPU");
    let domains: Vec<Domain> = serde_json::from_value(all["domains"].clone()).unwrap();
    assert!(domains[0].is_default);
    let dns: Vec<DnsResource> = serde_json::from_value(all["dnsresources"].clone()).unwrap();
    assert_eq!(
        dns[0].ips(),
        vec!["10.0.0.50".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(dns[0].resource_records[0].rrtype, "TXT");
    let subnets: Vec<Subnet> = serde_json::from_value(all["subnets"].clone()).unwrap();
    assert_eq!(subnets[0].dns_servers.len(), 2);
    let boot: Vec<BootResource> = serde_json::from_value(all["boot_resources"].clone()).unwrap();
    assert_eq!(boot[1].kind, "Uploaded");
    assert_eq!(boot[1].base_image.as_deref(), Some("ubuntu/jammy"));
    let version: Version = serde_json::from_value(all["version"].clone()).unwrap();
    assert_eq!(version.version, "3.7.3");
}

#[test]
fn wrong_types_are_decode_errors() {
    let mut machine: Value = serde_json::from_str(MACHINE).unwrap();
    machine["cpu_count"] = Value::String("eight".into());
    let err = decode::<Machine>("machines.get", machine.to_string().as_bytes()).unwrap_err();
    assert_eq!(err.category(), "decode");
    let mut machine: Value = serde_json::from_str(MACHINE).unwrap();
    machine["ip_addresses"] = serde_json::json!(["not-an-ip"]);
    assert!(decode::<Machine>("machines.get", machine.to_string().as_bytes()).is_err());
    let mut machine: Value = serde_json::from_str(MACHINE).unwrap();
    machine.as_object_mut().unwrap().remove("system_id");
    assert!(decode::<Machine>("machines.get", machine.to_string().as_bytes()).is_err());
}

#[test]
fn minimal_machine_decodes_with_defaults() {
    let machine: Machine = decode(
        "t",
        br#"{"system_id": "x", "status": 4, "owner_data": null, "hostname": null}"#,
    )
    .unwrap();
    assert_eq!(machine.status, MachineStatus::Ready);
    assert!(machine.hostname.is_empty());
    assert!(machine.interface_set.is_empty());
    assert_eq!(machine.power_state, PowerState::Unknown);
}

/// Decodes `bytes` as one `T` and as a list of them, as the get and list calls do.
fn decode_one_and_list<T: serde::de::DeserializeOwned>(bytes: &[u8]) {
    let _ = decode::<T>("t", bytes);
    let _ = decode::<Vec<T>>("t", bytes);
}

/// Runs every public decoder of the model (machine, list, inventory, DNS, network, status);
/// each must return Ok or Err, never panic.
fn decode_all(bytes: &[u8]) {
    // Machines and the listing.
    decode_one_and_list::<Machine>(bytes);
    let _ = decode::<Option<Machine>>("t", bytes);
    let _ = decode::<PowerStateReport>("t", bytes);
    check_list(bytes);
    // Network.
    decode_one_and_list::<Interface>(bytes);
    decode_one_and_list::<Subnet>(bytes);
    decode_one_and_list::<Vlan>(bytes);
    let _ = decode::<Link>("t", bytes);
    let _ = decode::<LinkMode>("t", bytes);
    decode_one_and_list::<IpRange>(bytes);
    // Inventory objects.
    decode_one_and_list::<Zone>(bytes);
    decode_one_and_list::<ResourcePool>(bytes);
    decode_one_and_list::<Tag>(bytes);
    let _ = decode::<TagUpdateResult>("t", bytes);
    decode_one_and_list::<BootResource>(bytes);
    let _ = decode::<Version>("t", bytes);
    // DNS.
    decode_one_and_list::<Domain>(bytes);
    decode_one_and_list::<DnsResource>(bytes);
    let _ = decode::<DnsIpAddress>("t", bytes);
    let _ = decode::<ResourceRecord>("t", bytes);
    // VM hosts.
    decode_one_and_list::<VmHost>(bytes);
    let _ = decode::<ComposedMachine>("t", bytes);
    // Status values.
    let _ = decode::<MachineStatus>("t", bytes);
    let _ = decode::<PowerState>("t", bytes);
    let _ = crate::error::error_from_response(
        crate::error::ErrorContext::LinkSubnet,
        http::StatusCode::NOT_FOUND,
        &http::HeaderMap::new(),
        bytes,
    );
    let _ = crate::error::error_from_response(
        crate::error::ErrorContext::Other,
        http::StatusCode::BAD_REQUEST,
        &http::HeaderMap::new(),
        bytes,
    );
    let _ = crate::error::error_from_response(
        crate::error::ErrorContext::Compose,
        http::StatusCode::SERVICE_UNAVAILABLE,
        &http::HeaderMap::new(),
        bytes,
    );
}

/// The lenient listing agrees with the strict one: it accounts for every element (in order),
/// returns exactly the elements that decode on their own, and succeeds whenever the strict
/// listing does, with the same machines.
fn check_list(bytes: &[u8]) {
    let lenient = decode::<MachineList>("t", bytes);
    let strict = decode::<Vec<Machine>>("t", bytes);
    match (&lenient, &strict) {
        (Ok(list), Ok(machines)) => {
            assert!(list.is_complete(), "{:?}", list.skipped);
            assert_eq!(&list.machines, machines);
        }
        (Ok(list), Err(_)) => {
            assert!(!list.is_complete());
            let elements: Vec<Value> = serde_json::from_slice(bytes).unwrap();
            assert_eq!(list.machines.len() + list.skipped.len(), elements.len());
            for skipped in &list.skipped {
                let element = &elements[skipped.index];
                assert!(serde_json::from_value::<Machine>(element.clone()).is_err());
                assert!(skipped.error.len() <= MAX_SKIP_ERROR + 3);
                assert!(
                    skipped
                        .system_id
                        .as_ref()
                        .is_none_or(|id| element["system_id"] == Value::String(id.clone()))
                );
            }
            let indexes: Vec<usize> = list.skipped.iter().map(|s| s.index).collect();
            assert!(indexes.windows(2).all(|w| w[0] < w[1]), "{indexes:?}");
        }
        (Err(_), Ok(machines)) => {
            panic!("strict decoded {} machines, lenient failed", machines.len())
        }
        (Err(_), Err(_)) => {}
    }
}

/// Values a MAAS field should never hold: nulls, wrong types, extreme numbers, odd unicode,
/// almost-addresses, large strings.
fn near_miss() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(-1)),
        Just(json!(4_294_967_296_u64)),
        Just(json!(9_007_199_254_740_993_u64)),
        Just(json!(1e308)),
        Just(json!(-1e-308)),
        Just(json!(0.5)),
        Just(json!("")),
        Just(json!("é💥\u{202e}\u{0}\u{feff}")),
        any::<String>().prop_map(Value::String),
        Just(json!("999.1.1.1")),
        Just(json!("10.0.0.0/33")),
        Just(json!("::g")),
        Just(json!("fe80::1%eth0")),
        Just(json!("16384")),
        Just(json!({})),
        Just(json!([])),
        Just(json!([null])),
        Just(json!({"id": "x", "name": 1})),
        Just(Value::String("9".repeat(4096))),
    ]
}

/// Every JSON pointer of `value` (the root included).
fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    out.push(at.to_owned());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                pointers(child, &format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn machine_value() -> Value {
    serde_json::from_str(MACHINE).unwrap()
}

/// The fixture with the value at one path, at any depth, replaced by a near miss.
fn near_miss_machine() -> impl Strategy<Value = (String, Value)> {
    let base = machine_value();
    let mut paths = Vec::new();
    pointers(&base, "", &mut paths);
    paths.retain(|p| !p.is_empty());
    (prop::sample::select(paths), near_miss()).prop_map(move |(path, value)| {
        let mut machine = base.clone();
        *machine.pointer_mut(&path).unwrap() = value;
        (path, machine)
    })
}

/// Raw tokens that are not valid JSON numbers, or numbers out of every field's range.
fn raw_number() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "1e400",
        "-1e400",
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "NaN",
        "Infinity",
        "-",
        "01",
        "0x10",
        "1.",
        ".5",
        "1e",
        "\"\\ud800\"",
        "\"\\u0000\"",
        "\"\u{ff}\"",
    ])
}

/// Keys the model decodes, so generated objects reach past the first field.
static MODEL_KEYS: [&str; 12] = [
    "system_id",
    "status",
    "cpu_count",
    "memory",
    "interface_set",
    "links",
    "subnet",
    "cidr",
    "ip_address",
    "id",
    "name",
    "state",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z0-9:./ -]{0,12}".prop_map(Value::String),
        Just(Value::String("10.0.0.1".into())),
        Just(Value::String("10.0.0.0/24".into())),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        // The names the model reads, weighted as a branch each, and now and then another.
        let keys = prop_oneof![
            12 => prop::sample::select(&MODEL_KEYS[..]).prop_map(str::to_owned),
            1 => "[a-z_]{1,8}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A fixture with one field replaced by an arbitrary value.
fn mutated_machine() -> impl Strategy<Value = Value> {
    let base: Value = serde_json::from_str(MACHINE).unwrap();
    let keys: Vec<String> = base.as_object().unwrap().keys().cloned().collect();
    (prop::sample::select(keys), arb_json()).prop_map(move |(key, value)| {
        let mut machine = base.clone();
        machine[key.as_str()] = value;
        machine
    })
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    decode_all(deep.as_bytes());
    let objects = format!("{}1{}", "{\"a\":".repeat(50_000), "}".repeat(50_000));
    decode_all(objects.as_bytes());
    // One deep element in an otherwise good listing: the whole answer is unreadable JSON for
    // serde_json's recursion limit, so the listing fails rather than guessing.
    let list = format!("[{MACHINE}, {deep}]");
    assert_eq!(
        decode::<MachineList>("t", list.as_bytes())
            .unwrap_err()
            .category(),
        "decode"
    );
    // Nested within the limit: that element is skipped, the machine kept.
    let shallow = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let list: MachineList = decode("t", format!("[{MACHINE}, {shallow}]").as_bytes()).unwrap();
    assert_eq!(list.machines.len(), 1);
    assert_eq!(list.skipped[0].index, 1);
}

#[test]
fn a_truncated_machine_is_always_an_error() {
    let text = MACHINE.trim();
    // Every third cut: a few seconds less, and still every kind of place in the text.
    for cut in (0..text.len())
        .step_by(3)
        .filter(|&i| text.is_char_boundary(i))
    {
        let prefix = &text[..cut];
        assert!(
            decode::<Machine>("t", prefix.as_bytes()).is_err(),
            "cut at {cut}"
        );
        let list = format!("[{prefix}");
        assert!(
            decode::<MachineList>("t", list.as_bytes()).is_err(),
            "cut at {cut}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    #[test]
    fn arbitrary_json_never_panics(value in arb_json()) {
        decode_all(value.to_string().as_bytes());
    }

    #[test]
    fn mutated_machines_never_panic(machine in mutated_machine()) {
        let bytes = machine.to_string();
        decode_all(bytes.as_bytes());
        let list = format!("[{bytes}]");
        decode_all(list.as_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A real machine with any field, at any depth, replaced by a near miss decodes or fails
    /// cleanly; in a listing it is either kept or skipped with its system id, and its good
    /// neighbours are always kept.
    #[test]
    fn near_miss_machines_decode_or_fail_cleanly((path, machine) in near_miss_machine()) {
        let bytes = machine.to_string();
        decode_all(bytes.as_bytes());
        let alone = decode::<Machine>("t", bytes.as_bytes());
        let mut first = machine_value();
        first["system_id"] = json!("good01");
        let mut last = machine_value();
        last["system_id"] = json!("good02");
        let listing = Value::Array(vec![first, machine, last]).to_string();
        let list: MachineList = decode("t", listing.as_bytes()).unwrap();
        prop_assert_eq!(&list.machines[0].system_id, "good01");
        prop_assert_eq!(&list.machines.last().unwrap().system_id, "good02");
        match alone {
            Ok(decoded) => {
                prop_assert!(list.is_complete());
                prop_assert_eq!(&list.machines[1], &decoded);
            }
            Err(err) => {
                prop_assert_eq!(err.category(), "decode");
                prop_assert_eq!(list.machines.len(), 2);
                prop_assert_eq!(list.skipped.len(), 1);
                prop_assert_eq!(list.skipped[0].index, 1);
                if !path.starts_with("/system_id") {
                    prop_assert_eq!(list.skipped[0].system_id.as_deref(), Some("d8n3re"));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Lists of arbitrary elements and mutated machines: the lenient listing agrees with the
    /// strict one (checked in `decode_all`).
    #[test]
    fn lenient_listing_accounts_for_every_element(
        elements in prop::collection::vec(
            prop_oneof![arb_json(), mutated_machine(), near_miss_machine().prop_map(|(_, m)| m)],
            0..6,
        )
    ) {
        decode_all(Value::Array(elements).to_string().as_bytes());
    }

    /// Raw number-like tokens JSON cannot hold (or no field can) in place of a numeric field.
    #[test]
    fn raw_out_of_range_numbers_never_panic(
        field in prop::sample::select(vec!["\"memory\": 16384", "\"cpu_count\": 8", "\"status\": 9", "\"storage\": 500107.862016", "\"id\": 12"]),
        token in raw_number(),
    ) {
        let key = field.split(':').next().unwrap();
        let text = MACHINE.replacen(field, &format!("{key}: {token}"), 1);
        prop_assert_ne!(&text, MACHINE);
        decode_all(text.as_bytes());
        decode_all(format!("[{text}]").as_bytes());
    }
}
