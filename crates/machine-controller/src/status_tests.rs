use super::*;
use crate::test_support::{claimed, host, maas_machine};
use capmaas_api::common::SecretKeyReference;
use capmaas_api::host::ProvisioningState;
use capmaas_runtime::conditions::get_condition;
use jiff::Timestamp;

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

/// The status the reconciler writes after `step`, for `mm` with host `h`, at second `at`.
fn status_after(
    mm: &MaasMachine,
    h: &MaasHost,
    step: &Step,
    provisioned: bool,
    at: i64,
) -> MaasMachineStatus {
    next_status(
        mm,
        Some(h),
        step_conditions(step, Some(h)),
        provisioned,
        &t(at),
    )
}

#[test]
fn addresses_are_internal_external_only_when_global_then_hostname_and_fqdn() {
    let mut h = host("node-1", Some(ProvisioningState::Deployed));
    let status = h.status.as_mut().unwrap();
    status.addresses = Some(vec![
        "10.0.0.5".into(),
        String::new(),
        "fd00::5".into(),
        "203.0.113.7".into(),
        "2001:db8::7".into(),
        "not-an-ip".into(),
    ]);
    status.fqdn = Some("node-1.maas".into());
    let addresses = machine_addresses(&h);
    let rendered: Vec<(MachineAddressType, &str)> = addresses
        .iter()
        .map(|a| (a.type_, a.address.as_str()))
        .collect();
    assert_eq!(
        rendered,
        [
            (MachineAddressType::InternalIp, "10.0.0.5"),
            (MachineAddressType::InternalIp, "fd00::5"),
            (MachineAddressType::InternalIp, "203.0.113.7"),
            (MachineAddressType::ExternalIp, "203.0.113.7"),
            (MachineAddressType::InternalIp, "2001:db8::7"),
            (MachineAddressType::ExternalIp, "2001:db8::7"),
            (MachineAddressType::InternalIp, "not-an-ip"),
            (MachineAddressType::Hostname, "node-1"),
            (MachineAddressType::InternalDns, "node-1.maas"),
        ]
    );
    h.status.as_mut().unwrap().addresses = Some((0..100).map(|i| format!("10.0.1.{i}")).collect());
    assert_eq!(machine_addresses(&h).len(), MAX_ADDRESSES);
}

#[test]
fn only_global_addresses_are_external() {
    for internal in [
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "100.127.255.254",
        "127.0.0.1",
        "169.254.0.1",
        "fd12::1",
        "fe80::1",
        "::1",
        "::ffff:10.0.0.1",
    ] {
        assert!(!is_external(internal.parse().unwrap()), "{internal}");
    }
    for external in [
        "8.8.8.8",
        "100.128.0.1",
        "172.32.0.1",
        "2a00:1450::1",
        "::ffff:8.8.8.8",
    ] {
        assert!(is_external(external.parse().unwrap()), "{external}");
    }
}

#[test]
fn provisioning_request_uses_bootstrap_secret_and_host_hostname() {
    let mut mm = maas_machine("m");
    mm.spec.deploy_in_memory = true;
    mm.spec.hwe_kernel = Some("hwe-22.04".into());
    let h = host("node-7", Some(ProvisioningState::Available));
    let p = provisioning_request(&mm, SecretKeyReference::new("m-bootstrap"), &h, None, false);
    assert_eq!(p.image, "ubuntu/jammy");
    assert_eq!(p.hwe_kernel.as_deref(), Some("hwe-22.04"));
    assert_eq!(p.user_data_secret_ref.as_ref().unwrap().name, "m-bootstrap");
    assert_eq!(p.user_data_secret_ref.as_ref().unwrap().key, "value");
    assert_eq!(p.hostname.as_deref(), Some("node-7"));
    assert!(p.deploy_in_memory);
    let mut odd = h.clone();
    odd.status.as_mut().unwrap().hostname = Some("Not_A_Label".into());
    assert_eq!(
        provisioning_request(&mm, SecretKeyReference::new("s"), &odd, None, false).hostname,
        None
    );
}

#[test]
fn a_request_may_adopt_an_allocation_only_for_a_machine_that_recorded_the_host() {
    let mut mm = maas_machine("m");
    let h = host("node-7", Some(ProvisioningState::Deployed));
    let request = |mm: &MaasMachine| {
        provisioning_request(mm, SecretKeyReference::new("m-bootstrap"), &h, None, false)
            .adopt_allocation
    };
    assert_eq!(request(&mm), None, "a fresh machine adopts nothing");
    mm.spec.system_id = Some("some-other-machine".into());
    assert_eq!(request(&mm), None);
    mm.spec.system_id = Some(h.spec.system_id.clone());
    assert_eq!(
        request(&mm),
        Some(true),
        "CAPMAAS recorded this host's machine"
    );
    mm.spec.keep_powered_on = Some(false);
    let p = provisioning_request(&mm, SecretKeyReference::new("b"), &h, None, false);
    assert_eq!(p.keep_powered_on, Some(false));
}

#[test]
fn hosts_of_an_lxd_cluster_are_registered_as_vm_hosts_unless_deployed_to_memory() {
    let mut mm = maas_machine("m");
    let h = host("h", None);
    let request = |mm: &MaasMachine, vm_hosts| {
        provisioning_request(mm, SecretKeyReference::new("b"), &h, None, vm_hosts).register_vm_host
    };
    assert_eq!(request(&mm, false), None);
    assert_eq!(request(&mm, true), Some(true));
    mm.spec.deploy_in_memory = true;
    assert_eq!(
        request(&mm, true),
        None,
        "MAAS registers only a disk deployment"
    );
}

#[test]
fn claims_match_by_uid_not_name() {
    let mm = maas_machine("m");
    let h = claimed(host("h", None), &mm);
    assert!(claimed_by(&h, &mm));
    let mut recreated = mm.clone();
    recreated.metadata.uid = Some("other".into());
    assert!(!claimed_by(&h, &recreated));
    assert!(!claimed_by(&host("h", None), &mm));
}

#[test]
fn waiting_status_sets_reasons_and_ready_false() {
    let mm = maas_machine("m");
    let conditions = step_conditions(&Step::WaitForBootstrapData, None);
    let status = next_status(&mm, None, conditions, false, &t(10));
    let list = status.conditions.unwrap();
    let ready = get_condition(&list, cond::READY).unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, reasons::WAITING_FOR_BOOTSTRAP_DATA);
    assert_eq!(get_condition(&list, cond::PAUSED).unwrap().status, "False");
    assert_eq!(ready.observed_generation, Some(1));
    assert_eq!(status.ready, None);
}

#[test]
fn provisioned_status_reports_host_facts_and_stays_stable() {
    let mut mm = maas_machine("m");
    let mut h = claimed(host("node-1", Some(ProvisioningState::Deployed)), &mm);
    {
        let s = h.status.as_mut().unwrap();
        s.addresses = Some(vec!["10.0.0.5".into()]);
        s.maas_status_name = Some("Deployed".into());
        s.power_state = Some(PowerState::On);
    }
    let status = status_after(&mm, &h, &Step::Provisioned, true, 10);
    assert_eq!(status.ready, Some(true));
    assert_eq!(
        status.initialization.as_ref().unwrap().provisioned,
        Some(true)
    );
    assert_eq!(status.host_ref.as_ref().unwrap().name, "node-1");
    assert_eq!(status.system_id.as_deref(), Some("sys-node-1"));
    assert_eq!(status.failure_domain.as_deref(), Some("az1"));
    assert_eq!(status.machine_state.as_deref(), Some("Deployed"));
    assert_eq!(status.machine_powered, Some(true));
    // InternalIP (a private address is not external) and Hostname.
    assert_eq!(status.addresses.as_ref().unwrap().len(), 2);
    let list = status.conditions.clone().unwrap();
    assert_eq!(get_condition(&list, cond::READY).unwrap().status, "True");
    assert_eq!(
        get_condition(&list, cond::MACHINE_DEPLOYED).unwrap().status,
        "True"
    );

    // Applying the same step later changes nothing (no write, no self-triggering).
    mm.status = Some(status.clone());
    let again = status_after(&mm, &h, &Step::Provisioned, true, 99);
    assert_eq!(again, status);
    assert_eq!(owned_status(&mm), status);

    // A later release keeps the provisioning signals (never reset) but Ready drops.
    let releasing = status_after(&mm, &h, &Step::ClearProvisioning, false, 100);
    assert_eq!(releasing.ready, Some(true));
    let list = releasing.conditions.clone().unwrap();
    assert_eq!(get_condition(&list, cond::READY).unwrap().status, "False");
    assert_eq!(
        get_condition(&list, cond::READY).unwrap().reason,
        reasons::MACHINE_TERMINATED
    );

    // The wait that follows the withdrawal, the host unchanged, writes nothing.
    mm.status = Some(releasing.clone());
    let message = crate::decide::release_wait_message(&h);
    let waiting = status_after(&mm, &h, &Step::WaitForRelease { message }, false, 101);
    assert_eq!(waiting, releasing);
}

#[test]
fn foreign_conditions_are_not_owned_but_dns_attached_counts_for_ready() {
    let mut mm = maas_machine("m");
    let h = claimed(host("node-1", Some(ProvisioningState::Deployed)), &mm);
    let mut foreign = Vec::new();
    set_condition(
        &mut foreign,
        NewCondition::new(
            cond::DNS_ATTACHED,
            ConditionStatus::False,
            reasons::DNS_ATTACH_PENDING,
        ),
        &t(1),
    );
    set_condition(
        &mut foreign,
        NewCondition::new("SomethingElse", ConditionStatus::True, "X"),
        &t(1),
    );
    mm.status = Some(MaasMachineStatus {
        conditions: Some(foreign),
        dns_attached: Some(false),
        ..MaasMachineStatus::default()
    });
    let status = status_after(&mm, &h, &Step::Provisioned, true, 10);
    let list = status.conditions.unwrap();
    assert!(
        get_condition(&list, cond::DNS_ATTACHED).is_none(),
        "not ours to apply"
    );
    assert!(get_condition(&list, "SomethingElse").is_none());
    assert_eq!(status.dns_attached, None);
    let ready = get_condition(&list, cond::READY).unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, reasons::DNS_ATTACH_PENDING);
}

#[test]
fn paused_only_reports_paused() {
    let conditions = step_conditions(&Step::Paused, None);
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, cond::PAUSED);
    assert_eq!(conditions[0].status, ConditionStatus::True);
    assert!(step_conditions(&Step::ChooseHost, None).is_empty());
}

/// The claim's intent carries the status the next step would write after a won claim, so that
/// step finds nothing to write: the property that saves one status write per machine.
#[test]
fn the_intended_status_is_what_the_step_after_a_won_claim_would_write() {
    use crate::decide::{Observed, decide};
    use crate::test_support::{cluster, machine};
    let mm = maas_machine("m");
    let owner = machine("m", Some("bootstrap"));
    let capi_cluster = cluster(true, false);
    let mut expected = claimed(host("h1", Some(ProvisioningState::Available)), &mm);
    expected.spec.provisioning = Some(provisioning_request(
        &mm,
        SecretKeyReference {
            name: "bootstrap".into(),
            key: "value".into(),
        },
        &expected,
        None,
        false,
    ));
    let observed = |mm| Observed {
        maas_machine: mm,
        machine: Some(&owner),
        cluster: Some(&capi_cluster),
        host: Some(&expected),
        data_claim: None,
        data: None,
        system_host: None,
        vm_host: None,
        vm: None,
    };
    let intended = intended_status(&observed(&mm), &t(100));
    assert_eq!(intended.host_ref.as_ref().unwrap().name, "h1");
    assert_eq!(intended.system_id.as_deref(), Some("sys-h1"));
    let associated = get_condition(
        intended.conditions.as_deref().unwrap(),
        cond::HOST_ASSOCIATED,
    );
    assert_eq!(associated.unwrap().status, "True");

    let mut after = mm.clone();
    after.status = Some(intended);
    let step = decide(&observed(&after));
    assert!(matches!(step, Step::WaitForDeployment { .. }), "{step:?}");
    let next = status_after(&after, &expected, &step, false, 200);
    assert_eq!(next, owned_status(&after));
}

#[test]
fn host_facts_alone_wait_for_a_condition_change_until_the_machine_is_provisioned() {
    let mm = maas_machine("m");
    let mut h = claimed(host("h1", Some(ProvisioningState::Allocated)), &mm);
    h.status.as_mut().unwrap().maas_status_name = Some("Allocated".into());
    let step = Step::WaitForDeployment {
        reason: reasons::MACHINE_DEPLOY_STARTED,
        message: "deployment of host h1 requested".into(),
        failed: false,
    };
    let mut written = mm.clone();
    written.status = Some(status_after(&mm, &h, &step, false, 1));
    let current = owned_status(&written);

    // Allocated → Deploying in MAAS: the conditions stay (the machine still waits), only the
    // repeated state moves; written with the next condition change.
    h.status.as_mut().unwrap().maas_status_name = Some("Deploying".into());
    let next = status_after(&written, &h, &step, false, 2);
    assert_ne!(next, current);
    assert!(host_facts_only(&current, &next));

    let deploying = Step::WaitForDeployment {
        reason: reasons::MACHINE_DEPLOYING,
        message: "MAAS is deploying host h1".into(),
        failed: false,
    };
    let next = status_after(&written, &h, &deploying, false, 2);
    assert!(!host_facts_only(&current, &next), "a condition changed");
    assert_eq!(
        next.machine_state.as_deref(),
        Some("Deploying"),
        "and the state rides along"
    );

    // Provisioned: the power going off (a reboot) is written on its own.
    let mut provisioned = written.clone();
    provisioned.status = Some(status_after(&written, &h, &Step::Provisioned, true, 3));
    let current = owned_status(&provisioned);
    h.status.as_mut().unwrap().power_state = Some(capmaas_api::host::PowerState::Off);
    let next = status_after(&provisioned, &h, &Step::Provisioned, true, 4);
    assert_ne!(next, current);
    assert!(!host_facts_only(&current, &next));
}
