use super::*;

const TLS: Transport = Transport::Tls;

fn plain() -> Transport {
    Transport::PlainHttp {
        endpoint: "http://maas.lab:5240/MAAS/api/2.0/".into(),
    }
}

fn condition<'a>(
    status: &'a MaasInventoryStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
}

fn at(second: i64) -> Time {
    Time(jiff::Timestamp::from_second(1_000 + second).unwrap())
}

fn counts(available: i32) -> InventoryCounts {
    InventoryCounts {
        hosts: 10,
        available,
        ..InventoryCounts::default()
    }
}

fn synced_condition(
    status: &MaasInventoryStatus,
) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == cond::SYNCED)
        .unwrap()
}

#[test]
fn the_first_sync_writes_the_status_with_its_time() {
    let status = synced_status(None, &counts(10), String::new(), &TLS, Some(1), &at(0)).unwrap();
    assert_eq!(status.last_sync_time, Some(at(0)));
    assert_eq!(status.host_count, Some(10));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(synced_condition(&status).status, "True");
}

#[test]
fn an_idle_sync_writes_nothing() {
    let first = synced_status(None, &counts(10), "report".into(), &TLS, Some(1), &at(0)).unwrap();
    for later in [1, 30, 3_600] {
        assert_eq!(
            synced_status(
                Some(&first),
                &counts(10),
                "report".into(),
                &TLS,
                Some(1),
                &at(later)
            ),
            None,
            "nothing changed after {later} s"
        );
    }
}

#[test]
fn a_change_of_counts_message_or_generation_is_written_with_a_new_time() {
    let first = synced_status(None, &counts(10), String::new(), &TLS, Some(1), &at(0)).unwrap();
    let fewer = synced_status(
        Some(&first),
        &counts(9),
        String::new(),
        &TLS,
        Some(1),
        &at(30),
    )
    .unwrap();
    assert_eq!(fewer.available, Some(9));
    assert_eq!(fewer.last_sync_time, Some(at(30)));
    // Still Synced=True: the condition keeps its transition time.
    assert_eq!(
        synced_condition(&fewer).last_transition_time,
        synced_condition(&first).last_transition_time
    );
    let reported = synced_status(
        Some(&first),
        &counts(10),
        "1 skipped".into(),
        &TLS,
        Some(1),
        &at(30),
    )
    .unwrap();
    assert_eq!(synced_condition(&reported).message, "1 skipped");
    let respec = synced_status(
        Some(&first),
        &counts(10),
        String::new(),
        &TLS,
        Some(2),
        &at(30),
    )
    .unwrap();
    assert_eq!(respec.observed_generation, Some(2));
    assert_eq!(synced_condition(&respec).observed_generation, Some(2));
}

#[test]
fn a_failure_is_written_once_and_a_success_after_it_again() {
    let ok = synced_status(None, &counts(10), String::new(), &TLS, Some(1), &at(0)).unwrap();
    let failed = failed_status(Some(&ok), "MAAS down".into(), &TLS, Some(1), &at(10)).unwrap();
    assert_eq!(synced_condition(&failed).status, "False");
    assert_eq!(
        failed.available,
        Some(10),
        "counts of the last success kept"
    );
    assert_eq!(
        failed.last_sync_time,
        Some(at(0)),
        "no sync succeeded since"
    );
    assert_eq!(
        failed_status(Some(&failed), "MAAS down".into(), &TLS, Some(1), &at(20)),
        None,
        "the same failure again"
    );
    assert!(failed_status(Some(&failed), "MAAS refuses".into(), &TLS, Some(1), &at(20)).is_some());
    let back = synced_status(
        Some(&failed),
        &counts(10),
        String::new(),
        &TLS,
        Some(1),
        &at(30),
    )
    .unwrap();
    assert_eq!(synced_condition(&back).status, "True");
    assert_eq!(back.last_sync_time, Some(at(30)));
}

#[test]
fn plain_http_is_said_on_every_inventory_without_making_it_unready() {
    let status =
        synced_status(None, &counts(10), String::new(), &plain(), Some(1), &at(0)).unwrap();
    let secure = condition(&status, cond::MAAS_CONNECTION_SECURE);
    assert_eq!(
        (secure.status.as_str(), secure.reason.as_str()),
        ("False", reasons::PLAIN_HTTP)
    );
    assert!(
        secure
            .message
            .contains("http://maas.lab:5240/MAAS/api/2.0/ is plain http"),
        "{}",
        secure.message
    );
    assert_eq!(condition(&status, cond::READY).status, "True");
    // An idle sync still writes nothing; the condition is part of what it compares.
    assert_eq!(
        synced_status(
            Some(&status),
            &counts(10),
            String::new(),
            &plain(),
            Some(1),
            &at(30)
        ),
        None
    );
    // A failed sync keeps saying it.
    let failed = failed_status(
        Some(&status),
        "MAAS down".into(),
        &plain(),
        Some(1),
        &at(40),
    )
    .unwrap();
    assert_eq!(
        condition(&failed, cond::MAAS_CONNECTION_SECURE).status,
        "False"
    );
    // The gateway moved to https: the condition turns True with the next sync.
    let secured = synced_status(
        Some(&status),
        &counts(10),
        String::new(),
        &TLS,
        Some(1),
        &at(50),
    )
    .unwrap();
    let secure = condition(&secured, cond::MAAS_CONNECTION_SECURE);
    assert_eq!(
        (secure.status.as_str(), secure.reason.as_str()),
        ("True", reasons::TLS)
    );
}

#[test]
fn the_plain_http_warning_is_given_once_per_inventory() {
    assert!(TLS.warning(None).is_none());
    let warning = plain().warning(None).expect("a warning on the first sync");
    assert!(warning.contains("travel in clear"), "{warning}");
    let told = synced_status(None, &counts(10), String::new(), &plain(), Some(1), &at(0)).unwrap();
    assert_eq!(
        plain().warning(Some(&told)),
        None,
        "the condition already says it"
    );
    let was_secure =
        synced_status(None, &counts(10), String::new(), &TLS, Some(1), &at(0)).unwrap();
    assert!(plain().warning(Some(&was_secure)).is_some());
}
