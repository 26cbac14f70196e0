use std::collections::BTreeMap;
use std::net::IpAddr;

use capmaas_api::common::{LocalObjectReference, PoolReference};
use capmaas_api::data::{MaasDataClaimSpec, MaasDataClaimStatus, MaasDataSpec, MaasDataStatus};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::render::AllocatedAddress;

fn claim() -> MaasDataClaim {
    let mut c = MaasDataClaim::new(
        "m1",
        MaasDataClaimSpec {
            template: LocalObjectReference::new("t"),
            host_ref: Some(capmaas_api::common::HostReference::new("h1", "ns", "ns")),
        },
    );
    c.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_DATA_CLAIM.to_owned()]);
    c
}

fn template() -> MaasDataTemplate {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasDataTemplate",
        "metadata": {"name": "t"},
        "spec": {}
    }))
    .unwrap()
}

fn data(ready: bool) -> MaasData {
    let mut d = MaasData::new(
        "t-0",
        MaasDataSpec {
            index: 0,
            template: LocalObjectReference::new("t"),
            claim: LocalObjectReference::new("m1"),
            meta_data: None,
            network_data: None,
        },
    );
    d.status = Some(MaasDataStatus {
        ready: Some(ready),
        error_message: None,
        hostname: None,
    });
    d
}

fn pool(name: &str) -> PoolReference {
    PoolReference {
        name: name.into(),
        api_group: "infrastructure.cluster.x-k8s.io".into(),
        kind: "MaasIPPool".into(),
    }
}

fn bound() -> AddressState {
    AddressState::Bound(AllocatedAddress {
        address: "10.0.0.5".parse::<IpAddr>().unwrap(),
        prefix: 24,
        gateway: None,
        dns_servers: Vec::new(),
    })
}

fn step(
    claim: &MaasDataClaim,
    data: Option<&MaasData>,
    addresses: &BTreeMap<PoolReference, AddressState>,
) -> Step {
    let t = template();
    decide(&Observed {
        claim,
        template: Some(&t),
        paused: false,
        data,
        addresses,
    })
}

#[test]
fn addresses_come_before_the_index_and_the_rendering() {
    let c = claim();
    let mut addresses = BTreeMap::from([
        (pool("a"), AddressState::Missing),
        (
            pool("b"),
            AddressState::Pending("MaasIPPool b is exhausted".into()),
        ),
    ]);
    assert_eq!(
        step(&c, None, &addresses),
        Step::ClaimAddresses(vec![pool("a")])
    );
    addresses.insert(pool("a"), bound());
    match step(&c, None, &addresses) {
        Step::WaitForAddresses(message) => {
            assert!(
                message.contains("MaasIPPool b: MaasIPPool b is exhausted"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    addresses.insert(pool("b"), bound());
    assert_eq!(step(&c, None, &addresses), Step::Render);
    assert_eq!(
        step(&c, None, &BTreeMap::new()),
        Step::Render,
        "no pools at all"
    );
}

#[test]
fn rendered_data_is_never_rendered_again() {
    let mut c = claim();
    c.status = Some(MaasDataClaimStatus {
        rendered_data: Some(LocalObjectReference::new("t-0")),
        ..MaasDataClaimStatus::default()
    });
    let none = BTreeMap::new();
    assert_eq!(step(&c, Some(&data(true)), &none), Step::Rendered);
    assert_eq!(
        step(&c, Some(&data(false)), &none),
        Step::Render,
        "a failed rendering is retried"
    );
    // A MaasData the claim does not record is not its rendering.
    c.status = None;
    assert_eq!(step(&c, Some(&data(true)), &none), Step::Render);
}

#[test]
fn finalizer_pause_template_and_deletion() {
    let none = BTreeMap::new();
    let mut c = claim();
    c.metadata.finalizers = None;
    assert_eq!(step(&c, None, &none), Step::AddFinalizer);
    let c = claim();
    assert_eq!(
        decide(&Observed {
            claim: &c,
            template: None,
            paused: false,
            data: None,
            addresses: &none
        }),
        Step::WaitForTemplate
    );
    let t = template();
    assert_eq!(
        decide(&Observed {
            claim: &c,
            template: Some(&t),
            paused: true,
            data: None,
            addresses: &none
        }),
        Step::Paused
    );
    let mut deleting = claim();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    assert_eq!(step(&deleting, None, &none), Step::Cleanup);
    let mut held = deleting.clone();
    held.metadata.finalizers = Some(vec![
        keys::FINALIZER_MAAS_MACHINE.to_owned(),
        keys::FINALIZER_MAAS_DATA_CLAIM.to_owned(),
    ]);
    assert_eq!(
        step(&held, None, &none),
        Step::HeldByConsumer,
        "nothing released while held"
    );
    deleting.metadata.finalizers = None;
    assert_eq!(step(&deleting, None, &none), Step::Done);
}

#[test]
fn held_addresses_are_taken_over_before_anything_is_claimed() {
    let c = claim();
    let addresses = BTreeMap::from([
        (pool("a"), AddressState::Missing),
        (pool("b"), AddressState::Held("mm-old-b".into())),
        (pool("c"), bound()),
    ]);
    assert_eq!(
        step(&c, None, &addresses),
        Step::AdoptAddresses(vec![(pool("b"), "mm-old-b".into())])
    );
    // Then the pools without a hold are claimed as usual.
    let addresses = BTreeMap::from([(pool("a"), AddressState::Missing), (pool("c"), bound())]);
    assert_eq!(
        step(&c, None, &addresses),
        Step::ClaimAddresses(vec![pool("a")])
    );
}

#[test]
fn a_claim_waits_for_the_previous_claim_on_its_host_to_hand_over() {
    let c = claim();
    let addresses = BTreeMap::from([(pool("a"), AddressState::AwaitingHandover("mm-old".into()))]);
    let Step::WaitForHandover(why) = step(&c, None, &addresses) else {
        panic!("expected to wait for the handover")
    };
    assert_eq!(
        why,
        "MaasIPPool a: waiting for MaasDataClaim mm-old, which had this host before, to hand \
         its address over"
    );
}
