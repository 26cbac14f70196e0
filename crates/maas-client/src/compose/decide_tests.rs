use std::collections::BTreeMap;

use super::*;

/// `record`: `None` without one, `Some("")` pending, else the recorded system id.
fn facts(wanted: bool, record: Option<&str>, machine: Lookup) -> VmFacts {
    VmFacts {
        hostname: "vm-a-12345".into(),
        wanted,
        record: match record {
            None => Record::Absent,
            Some("") => Record::Pending,
            Some(id) => Record::Composed(id.into()),
        },
        machine,
        host: None,
    }
}

fn present(allocated: bool) -> Lookup {
    Lookup::Present {
        system_id: "abc123".into(),
        allocated,
    }
}

fn host(consumed: bool) -> VmHostObject {
    VmHostObject {
        name: "abc123".into(),
        consumed,
        version: ObjectVersion {
            uid: Some("u".into()),
            resource_version: Some("7".into()),
        },
    }
}

#[test]
fn a_new_entry_is_recorded_before_maas_is_asked() {
    assert!(!needs_lookup(true, &Record::Absent, false));
    assert_eq!(
        next_step(&facts(true, None, Lookup::NotLooked)),
        VmStep::Record
    );
}

#[test]
fn a_recorded_entry_is_composed_only_when_maas_has_no_such_hostname() {
    assert!(needs_lookup(true, &Record::Pending, false));
    assert_eq!(
        next_step(&facts(true, Some(""), Lookup::Absent)),
        VmStep::Compose
    );
    // Composed before (a lost answer, a restart): the MaasHost, then the system id.
    assert_eq!(
        next_step(&facts(true, Some(""), present(false))),
        VmStep::CreateHost {
            system_id: "abc123".into()
        }
    );
    let mut with_host = facts(true, Some(""), present(false));
    with_host.host = Some(host(false));
    assert_eq!(
        next_step(&with_host),
        VmStep::SetSystemId {
            system_id: "abc123".into()
        }
    );
    with_host.record = Record::Composed("abc123".into());
    assert_eq!(next_step(&with_host), VmStep::Done);
}

#[test]
fn a_settled_vm_costs_no_maas_call_and_a_released_one_is_not_composed_again() {
    assert!(!needs_lookup(
        true,
        &Record::Composed("abc123".into()),
        true
    ));
    let mut settled = facts(true, Some("abc123"), Lookup::NotLooked);
    settled.host = Some(host(true));
    assert_eq!(next_step(&settled), VmStep::Done);
    // Recorded with its id, host gone, machine gone: released and deleted by MAAS.
    assert!(needs_lookup(
        true,
        &Record::Composed("abc123".into()),
        false
    ));
    assert_eq!(
        next_step(&facts(true, Some("abc123"), Lookup::Absent)),
        VmStep::Done
    );
}

#[test]
fn an_entry_removed_deletes_an_unallocated_vm_then_its_host_then_the_record() {
    assert!(needs_lookup(
        false,
        &Record::Composed("abc123".into()),
        true
    ));
    assert_eq!(
        next_step(&facts(false, Some(""), present(false))),
        VmStep::DeleteMachine {
            system_id: "abc123".into()
        }
    );
    let mut gone = facts(false, Some("abc123"), Lookup::Absent);
    gone.host = Some(host(false));
    assert_eq!(
        next_step(&gone),
        VmStep::DeleteHost {
            name: "abc123".into(),
            version: host(false).version,
        }
    );
    gone.host = None;
    assert_eq!(next_step(&gone), VmStep::Drop);
    assert_eq!(next_step(&facts(false, None, Lookup::Absent)), VmStep::Done);
}

#[test]
fn an_allocated_or_claimed_vm_is_left_to_its_release() {
    assert_eq!(
        next_step(&facts(false, Some("abc123"), present(true))),
        VmStep::Wait
    );
    let mut claimed = facts(false, Some("abc123"), Lookup::Absent);
    claimed.host = Some(host(true));
    assert_eq!(next_step(&claimed), VmStep::Wait);
    let mut claimed_ready = facts(false, Some("abc123"), present(false));
    claimed_ready.host = Some(host(true));
    assert_eq!(next_step(&claimed_ready), VmStep::Wait);
}

#[test]
fn compose_failures_are_classified() {
    let exists = MaasError::BadRequest {
        fields: BTreeMap::from([(
            "hostname".to_owned(),
            vec!["Node with hostname \"vm-a\" already exists.".to_owned()],
        )]),
        message: String::new(),
    };
    assert_eq!(compose_failure("vm-a", exists).unwrap(), None);
    let refused = compose_failure(
        "vm-a",
        MaasError::ComposeRefused {
            message: "Unable to compose KVM instance in 'lxd1'. CPU ...".into(),
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(refused.reason, REASON_COMPOSE_REFUSED);
    assert!(
        refused.message.contains("vm-a") && refused.message.contains("Unable to compose"),
        "{}",
        refused.message
    );
    let forbidden = compose_failure(
        "vm-a",
        MaasError::Forbidden {
            message: String::new(),
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(forbidden.reason, REASON_COMPOSITION_FORBIDDEN);
    let unsupported = compose_failure(
        "vm-a",
        MaasError::VmHostsUnsupported {
            message: "Unknown API endpoint".into(),
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(unsupported.reason, REASON_VM_HOSTS_UNSUPPORTED);
    assert!(compose_failure("vm-a", MaasError::Timeout).is_err());
}

#[test]
fn a_refusal_waits_unless_the_spec_changed() {
    assert_eq!(refusal_wait(None, Some(1)), None);
    assert_eq!(
        refusal_wait(Some((Some(1), Duration::from_secs(10))), Some(1)),
        Some(Duration::from_secs(50))
    );
    assert_eq!(
        refusal_wait(Some((Some(1), Duration::from_secs(10))), Some(2)),
        None
    );
    assert_eq!(
        refusal_wait(Some((Some(1), Duration::from_secs(61))), Some(1)),
        None
    );
}

#[test]
fn the_condition_says_refused_composing_or_composed() {
    let refusal = Refusal {
        reason: REASON_COMPOSE_REFUSED,
        message: "no".into(),
    };
    assert_eq!(
        composed_condition(Some(&refusal), &["vm-a".into()], 1, None),
        Some((false, REASON_COMPOSE_REFUSED, "no".into()))
    );
    assert_eq!(
        composed_condition(None, &["vm-a".into()], 1, None).map(|c| c.1),
        Some(REASON_COMPOSING)
    );
    assert_eq!(
        composed_condition(None, &[], 2, None),
        Some((true, REASON_COMPOSED, "2 VM(s) composed".into()))
    );
    assert_eq!(composed_condition(None, &[], 0, None), None);
}

#[test]
fn the_host_controller_sends_nothing_of_the_composition() {
    let mut conditions = Vec::new();
    for type_ in [VMS_COMPOSED, "Ready"] {
        capmaas_runtime::conditions::set_condition(
            &mut conditions,
            capmaas_runtime::conditions::NewCondition::new(
                type_,
                capmaas_runtime::conditions::ConditionStatus::True,
                "R",
            ),
            &capmaas_runtime::status::now(),
        );
    }
    let status = MaasHostStatus {
        composed_vms: Some(vec![capmaas_api::lxd::ComposedVm {
            hostname: "vm".into(),
            system_id: None,
        }]),
        conditions: Some(conditions),
        ..MaasHostStatus::default()
    };
    let sent = without_composition(status);
    assert_eq!(sent.composed_vms, None);
    let types: Vec<_> = sent
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, ["Ready"]);
}
