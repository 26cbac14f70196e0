use super::*;
use capmaas_api::common::LocalObjectReference;
use capmaas_api::data::{MaasDataClaimSpec, MaasDataClaimStatus};

#[test]
fn a_claim_joins_the_trace_until_rendered() {
    let mut claim = MaasDataClaim::new(
        "m",
        MaasDataClaimSpec {
            template: LocalObjectReference::new("t"),
            host_ref: None,
        },
    );
    assert_eq!(trace_relation(&claim), Relation::Child);
    claim.status = Some(MaasDataClaimStatus {
        rendered_data: Some(LocalObjectReference::new("m-data")),
        ..MaasDataClaimStatus::default()
    });
    assert_eq!(trace_relation(&claim), Relation::Link);
}
