//! MaasData as the template's tests need them.

use std::sync::Arc;

use capmaas_api::common::LocalObjectReference;
use capmaas_api::data::MaasDataSpec;
use capmaas_api::{MaasData, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

pub(super) fn data(claim: &str, index: i32) -> Arc<MaasData> {
    Arc::new(MaasData::new(
        &format!("t-{index}"),
        MaasDataSpec {
            index,
            template: LocalObjectReference::new("t"),
            claim: LocalObjectReference::new(claim),
            meta_data: None,
            network_data: None,
        },
    ))
}

pub(super) fn t(s: i64) -> Time {
    Time(jiff::Timestamp::from_second(s).unwrap())
}

pub(super) fn owned(
    claim: &str,
    index: i32,
    uid: &str,
    deleting: bool,
    ours: bool,
) -> Arc<MaasData> {
    let mut d = data(claim, index).as_ref().clone();
    d.metadata.owner_references = Some(vec![OwnerReference {
        kind: "MaasDataClaim".into(),
        name: claim.into(),
        uid: uid.into(),
        api_version: capmaas_api::API_VERSION.into(),
        ..Default::default()
    }]);
    if deleting {
        d.metadata.deletion_timestamp = Some(t(1));
    }
    if ours {
        d.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_DATA.into()]);
    }
    Arc::new(d)
}
