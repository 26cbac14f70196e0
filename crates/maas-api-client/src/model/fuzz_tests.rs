//! Decoders on realistic fixtures, and property tests: arbitrary input never panics.

use proptest::prelude::*;
use serde_json::Value;

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

/// Runs every decoder; each must return Ok or Err, never panic.
fn decode_all(bytes: &[u8]) {
    let _ = decode::<Machine>("t", bytes);
    let _ = decode::<Vec<Machine>>("t", bytes);
    let _ = decode::<Option<Machine>>("t", bytes);
    let _ = decode::<PowerStateReport>("t", bytes);
    let _ = decode::<Interface>("t", bytes);
    let _ = decode::<Vec<Interface>>("t", bytes);
    let _ = decode::<Vec<Subnet>>("t", bytes);
    let _ = decode::<Subnet>("t", bytes);
    let _ = decode::<Vec<Zone>>("t", bytes);
    let _ = decode::<Vec<ResourcePool>>("t", bytes);
    let _ = decode::<Vec<Tag>>("t", bytes);
    let _ = decode::<Tag>("t", bytes);
    let _ = decode::<TagUpdateResult>("t", bytes);
    let _ = decode::<Vec<Domain>>("t", bytes);
    let _ = decode::<Domain>("t", bytes);
    let _ = decode::<Vec<DnsResource>>("t", bytes);
    let _ = decode::<DnsResource>("t", bytes);
    let _ = decode::<Vec<BootResource>>("t", bytes);
    let _ = decode::<Version>("t", bytes);
    let _ = crate::error::error_from_response(
        crate::error::ErrorContext::Other,
        http::StatusCode::BAD_REQUEST,
        &http::HeaderMap::new(),
        bytes,
    );
}

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
        let keys = prop_oneof![
            Just("system_id".to_owned()),
            Just("status".to_owned()),
            Just("cpu_count".to_owned()),
            Just("memory".to_owned()),
            Just("interface_set".to_owned()),
            Just("links".to_owned()),
            Just("subnet".to_owned()),
            Just("cidr".to_owned()),
            Just("ip_address".to_owned()),
            Just("id".to_owned()),
            Just("name".to_owned()),
            Just("state".to_owned()),
            "[a-z_]{1,8}",
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
