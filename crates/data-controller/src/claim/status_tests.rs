use capmaas_runtime::conditions::get_condition;

use super::*;

fn t(s: i64) -> Time {
    Time(jiff::Timestamp::from_second(s).unwrap())
}

#[test]
fn a_claim_no_longer_paused_says_so() {
    let paused = paused_status(None, Some(1), &t(1));
    let paused_condition = |s: &MaasDataClaimStatus| {
        get_condition(s.conditions.as_deref().unwrap_or_default(), cond::PAUSED)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(
        paused_condition(&paused),
        Some(("True".to_owned(), REASON_PAUSED.to_owned()))
    );
    let resumed = claim_status(
        Some(&paused),
        &Outcome::AddressesPending("waiting".into()),
        Some(1),
        &t(2),
    );
    assert_eq!(
        paused_condition(&resumed),
        Some(("False".to_owned(), reasons::NOT_PAUSED.to_owned()))
    );
}

#[test]
fn pending_then_rendered() {
    let pending = claim_status(
        None,
        &Outcome::AddressesPending("MaasIPPool p: PoolExhausted".into()),
        Some(1),
        &t(1),
    );
    let conditions = pending.conditions.clone().unwrap();
    let ready = get_condition(&conditions, cond::READY).unwrap();
    assert_eq!(ready.status, "False");
    let addresses = get_condition(&conditions, cond::ADDRESSES_ALLOCATED).unwrap();
    assert!(addresses.message.contains("PoolExhausted"));
    assert_eq!(
        claim_status(
            Some(&pending),
            &Outcome::AddressesPending("MaasIPPool p: PoolExhausted".into()),
            Some(1),
            &t(2)
        ),
        pending,
        "same outcome, same status"
    );
    let done = claim_status(
        Some(&pending),
        &Outcome::Rendered("t-3".into()),
        Some(1),
        &t(3),
    );
    assert_eq!(done.rendered_data.unwrap().name, "t-3");
    assert_eq!(done.error_message, None);
    let conditions = done.conditions.unwrap();
    assert_eq!(
        get_condition(&conditions, cond::READY).unwrap().status,
        "True"
    );
}

#[test]
fn a_render_failure_names_the_field() {
    let why = "spec.metaData.fromLabels[0]: Machine has no label \"rack\"";
    let failed = claim_status(None, &Outcome::RenderFailed(why.into()), None, &t(1));
    assert_eq!(failed.error_message.as_deref(), Some(why));
    let conditions = failed.conditions.unwrap();
    let data = get_condition(&conditions, cond::DATA_READY).unwrap();
    assert_eq!(
        (data.reason.as_str(), data.message.as_str()),
        (REASON_RENDER_FAILED, why)
    );
    let missing = claim_status(None, &Outcome::TemplateMissing("t".into()), None, &t(1));
    let conditions = missing.conditions.unwrap();
    assert!(
        get_condition(&conditions, cond::DATA_READY)
            .unwrap()
            .message
            .contains("MaasDataTemplate t")
    );
}
