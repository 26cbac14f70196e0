use capmaas_api::capi_ipam::IPAddressSpec;

use super::*;

fn pool(kind: &str, name: &str) -> PoolReference {
    PoolReference {
        name: name.into(),
        api_group: "x".into(),
        kind: kind.into(),
    }
}

#[test]
fn claim_names_are_deterministic_and_kinds_do_not_collide() {
    assert_eq!(ip_claim_name("m1", &pool("MaasIPPool", "prov")), "m1-prov");
    assert_eq!(
        ip_claim_name("m1", &pool("InClusterIPPool", "prov")),
        "m1-inclusterippool-prov"
    );
}

#[test]
fn a_served_address_is_read_and_a_malformed_one_is_not() {
    let mut a = IPAddress::new(
        "p-10-0-0-5",
        IPAddressSpec {
            address: "10.0.0.5".into(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            ..IPAddressSpec::default()
        },
    );
    let got = allocated(&a, None).unwrap();
    assert_eq!(got.address.to_string(), "10.0.0.5");
    assert_eq!(
        (got.prefix, got.gateway.map(|g| g.to_string())),
        (24, Some("10.0.0.1".into()))
    );
    a.spec.address = "not-an-ip".into();
    assert!(allocated(&a, None).is_none());
    a.spec.address = "10.0.0.5".into();
    a.spec.prefix = -1;
    assert!(allocated(&a, None).is_none());
}

#[test]
fn an_ip_claim_names_its_machine_for_pre_allocations() {
    let mut claim = MaasDataClaim::new(
        "mm-0",
        capmaas_api::MaasDataClaimSpec {
            template: capmaas_api::common::LocalObjectReference { name: "t".into() },
            host_ref: None,
        },
    );
    claim.metadata.uid = Some("uid-1".into());
    let made = new_ip_claim(&claim, &pool("MaasIPPool", "net"), Some("m-0")).unwrap();
    assert_eq!(made.name_any(), "mm-0-net");
    assert_eq!(
        made.annotations()
            .get(ANNOTATION_MACHINE)
            .map(String::as_str),
        Some("m-0")
    );
    let made = new_ip_claim(&claim, &pool("MaasIPPool", "net"), None).unwrap();
    assert!(made.metadata.annotations.is_none());
}
