use super::*;
use crate::test_support::{claimed, cluster, deleting, host, maas_machine, machine};
use capmaas_api::common::{HostReference, LocalObjectReference};
use capmaas_api::host::HostProvisioning;
use capmaas_api::machine::MaasMachineStatus;

fn provisioning() -> HostProvisioning {
    HostProvisioning {
        image: "ubuntu/jammy".into(),
        user_data_secret_ref: None,
        network_data_secret_ref: None,
        meta_data_secret_ref: None,
        hostname: None,
        deploy_in_memory: false,
        hwe_kernel: None,
        release_policy: None,
        adopt_allocation: None,
        keep_powered_on: None,
        register_vm_host: None,
    }
}

fn recorded(mut mm: MaasMachine, host: &str) -> MaasMachine {
    mm.status = Some(MaasMachineStatus {
        host_ref: Some(HostReference::new(host, "ns", "ns")),
        ..MaasMachineStatus::default()
    });
    mm
}

fn decide_for(
    mm: &MaasMachine,
    m: Option<&Machine>,
    c: Option<&Cluster>,
    h: Option<&MaasHost>,
) -> Step {
    decide(&Observed {
        maas_machine: mm,
        machine: m,
        cluster: c,
        host: h,
        data_claim: None,
        data: None,
        system_host: None,
        vm_host: None,
        vm: None,
    })
}

/// Asserts `decide` gives each case's step, in order: (MaasMachine, Machine, Cluster, step),
/// no host.
#[track_caller]
fn assert_steps(cases: &[(&MaasMachine, Option<&Machine>, Option<&Cluster>, Step)]) {
    for (i, (mm, m, c, step)) in cases.iter().enumerate() {
        assert_eq!(decide_for(mm, *m, *c, None), *step, "case {i}");
    }
}

#[test]
fn waits_for_owner_cluster_then_honours_pause_before_finalizer() {
    let mut mm = maas_machine("m");
    mm.metadata.finalizers = None;
    let m = machine("m", Some("boot"));
    let ready = cluster(true, false);
    let paused = cluster(true, true);
    let mut annotated = mm.clone();
    annotated
        .annotations_mut()
        .insert(keys::ANNOTATION_PAUSED.into(), String::new());
    assert_steps(&[
        (&mm, None, Some(&ready), Step::WaitForOwner),
        (&mm, Some(&m), None, Step::WaitForCluster),
        (&mm, Some(&m), Some(&paused), Step::Paused),
        (&annotated, Some(&m), Some(&ready), Step::Paused),
        (&mm, Some(&m), Some(&ready), Step::AddFinalizer),
    ]);
}

#[test]
fn waits_for_infrastructure_then_bootstrap_data_then_chooses() {
    let mm = maas_machine("m");
    let with_data = machine("m", Some("boot"));
    let without = machine("m", None);
    let unprovisioned = cluster(false, false);
    let ready = cluster(true, false);
    // spec.userData replaces the bootstrap Secret.
    let mut own_data = mm.clone();
    own_data.spec.user_data = Some(capmaas_api::common::SecretKeyReference::new("custom"));
    assert_steps(&[
        (
            &mm,
            Some(&with_data),
            Some(&unprovisioned),
            Step::WaitForClusterInfrastructure,
        ),
        (
            &mm,
            Some(&without),
            Some(&ready),
            Step::WaitForBootstrapData,
        ),
        (&mm, Some(&with_data), Some(&ready), Step::ChooseHost),
        (&own_data, Some(&without), Some(&ready), Step::ChooseHost),
    ]);
    assert_eq!(
        bootstrap_secret(&own_data, &without).unwrap().name,
        "custom"
    );
    assert_eq!(bootstrap_secret(&mm, &with_data).unwrap().key, "value");
}

#[test]
fn an_lxd_machine_asks_for_a_vm_but_one_composed_earlier_is_kept() {
    let mut mm = maas_machine("m");
    mm.spec.lxd = Some(capmaas_api::lxd::MachineLxdConfig {
        enabled: true,
        vm_config: None,
    });
    let step = decide_for(
        &mm,
        Some(&machine("m", Some("b"))),
        Some(&cluster(true, false)),
        None,
    );
    assert_eq!(step, Step::RequestVm);
    // A VM CAPMAAS composed (taken over: its systemID recorded) is not this case.
    mm.spec.system_id = Some("vm1".into());
    let step = decide_for(
        &mm,
        Some(&machine("m", Some("b"))),
        Some(&cluster(true, false)),
        None,
    );
    assert_eq!(step, Step::HostLost);
    // Disabled: bare metal as usual.
    mm.spec.system_id = None;
    mm.spec.lxd = Some(capmaas_api::lxd::MachineLxdConfig::default());
    let step = decide_for(
        &mm,
        Some(&machine("m", Some("b"))),
        Some(&cluster(true, false)),
        None,
    );
    assert_eq!(step, Step::ChooseHost);
}

#[test]
fn a_machine_with_identity_never_chooses_again() {
    let mut mm = maas_machine("m");
    mm.spec.provider_id = Some("maas:///az1/abc".into());
    let step = decide_for(
        &mm,
        Some(&machine("m", Some("b"))),
        Some(&cluster(true, false)),
        None,
    );
    assert_eq!(step, Step::HostLost);
}

#[test]
fn a_machine_with_a_system_id_claims_the_free_host_of_it_again() {
    let mut mm = maas_machine("m");
    mm.spec.provider_id = Some("maas:///az1/sys-h1".into());
    mm.spec.system_id = Some("sys-h1".into());
    let m = machine("m", Some("b"));
    let c = cluster(true, false);
    let with_system_host = |h: Option<&MaasHost>| {
        decide(&Observed {
            maas_machine: &mm,
            machine: Some(&m),
            cluster: Some(&c),
            host: None,
            data_claim: None,
            data: None,
            system_host: h,
            vm_host: None,
            vm: None,
        })
    };
    // Moved here by clusterctl: the re-imported host is deployed, and nobody holds it.
    let imported = host("h1", Some(ProvisioningState::Deployed));
    assert_eq!(with_system_host(Some(&imported)), Step::ReclaimHost);
    // Someone else holds it, or it is not there (yet): never choose another.
    let other = claimed(imported.clone(), &maas_machine("other"));
    assert_eq!(with_system_host(Some(&other)), Step::HostLost);
    assert_eq!(with_system_host(None), Step::HostLost);
}

#[test]
fn claimed_host_is_recorded_then_deployment_requested() {
    let mm = maas_machine("m");
    let m = machine("m", Some("boot"));
    let c = cluster(true, false);
    let h = claimed(host("h1", Some(ProvisioningState::Available)), &mm);
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::RecordHost
    );
    let mm = recorded(mm, "h1");
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::RequestDeployment
    );
    // Recorded another host (stale): record the one we hold.
    let other = recorded(mm.clone(), "h0");
    assert_eq!(
        decide_for(&other, Some(&m), Some(&c), Some(&h)),
        Step::RecordHost
    );
}

#[test]
fn deployment_progress_maps_host_states() {
    let mm = recorded(maas_machine("m"), "h1");
    let m = machine("m", Some("boot"));
    let c = cluster(true, false);
    let step_for = |state: Option<ProvisioningState>, message: Option<&str>| {
        let mut h = claimed(host("h1", state), &mm);
        h.spec.provisioning = Some(provisioning());
        h.status.as_mut().unwrap().status_message = message.map(Into::into);
        decide_for(&mm, Some(&m), Some(&c), Some(&h))
    };
    let reason_of = |step: Step| match step {
        Step::WaitForDeployment {
            reason,
            failed,
            message,
        } => (reason, failed, message),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(
        reason_of(step_for(Some(ProvisioningState::Available), None)).0,
        reasons::MACHINE_DEPLOY_STARTED
    );
    assert_eq!(
        reason_of(step_for(None, None)).0,
        reasons::MACHINE_DEPLOY_STARTED
    );
    assert_eq!(
        reason_of(step_for(Some(ProvisioningState::Allocated), None)).0,
        reasons::MACHINE_DEPLOY_STARTED
    );
    assert_eq!(
        reason_of(step_for(Some(ProvisioningState::Deploying), None)).0,
        reasons::MACHINE_DEPLOYING
    );
    let (reason, failed, message) = reason_of(step_for(
        Some(ProvisioningState::Failed),
        Some("curtin failed"),
    ));
    assert_eq!(reason, reasons::MACHINE_DEPLOY_FAILED);
    assert!(failed);
    assert!(message.ends_with(": curtin failed"), "{message}");
    assert!(reason_of(step_for(Some(ProvisioningState::Broken), None)).1);
    assert_eq!(
        reason_of(step_for(Some(ProvisioningState::Missing), None)).0,
        reasons::HOST_MISSING
    );
    assert_eq!(
        reason_of(step_for(Some(ProvisioningState::Releasing), None)).0,
        reasons::MACHINE_STATE_UNDEFINED
    );
    assert_eq!(
        step_for(Some(ProvisioningState::Deployed), None),
        Step::SetProviderId
    );
}

#[test]
fn deployed_with_provider_id_is_provisioned() {
    let mut mm = recorded(maas_machine("m"), "h1");
    mm.spec.provider_id = Some("maas:///az1/sys-h1".into());
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    let m = machine("m", Some("boot"));
    let c = cluster(true, false);
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::SetProviderId,
        "systemID missing"
    );
    mm.spec.system_id = Some("sys-h1".into());
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::Provisioned
    );
}

#[test]
fn an_edited_release_policy_is_carried_to_the_host_and_then_left_alone() {
    use capmaas_api::common::{EraseMode, ReleasePolicy};
    let mut mm = recorded(maas_machine("m"), "h1");
    mm.spec.provider_id = Some("maas:///az1/sys-h1".into());
    mm.spec.system_id = Some("sys-h1".into());
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    let (m, c) = (machine("m", Some("boot")), cluster(true, false));
    mm.spec.release_policy = Some(ReleasePolicy {
        erase: EraseMode::Secure,
        force: false,
    });
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::UpdateLiveSettings
    );
    if let Some(p) = h.spec.provisioning.as_mut() {
        p.release_policy.clone_from(&mm.spec.release_policy);
    }
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::Provisioned
    );
    let deleting = deleting(mm.clone());
    if let Some(p) = h.spec.provisioning.as_mut() {
        p.release_policy = None;
    }
    assert_eq!(
        decide_for(&deleting, Some(&m), Some(&c), Some(&h)),
        Step::ClearProvisioning,
        "a deletion releases at once; an edit made while deleting is too late"
    );
}

#[test]
fn an_edited_power_rule_is_carried_to_the_host() {
    let mut mm = recorded(maas_machine("m"), "h1");
    mm.spec.provider_id = Some("maas:///az1/sys-h1".into());
    mm.spec.system_id = Some("sys-h1".into());
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    let (m, c) = (machine("m", Some("boot")), cluster(true, false));
    mm.spec.keep_powered_on = Some(false);
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::UpdateLiveSettings
    );
    if let Some(p) = h.spec.provisioning.as_mut() {
        p.keep_powered_on = Some(false);
    }
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&c), Some(&h)),
        Step::Provisioned
    );
}

#[test]
fn a_machine_moved_by_clusterctl_lets_go_without_releasing_its_host() {
    let mut mm = deleting(recorded(maas_machine("m"), "h1"));
    mm.metadata.annotations =
        Some([(keys::ANNOTATION_DELETE_FOR_MOVE.to_owned(), String::new())].into());
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    // Not even the pause of the (moving) Cluster holds it: the copy in the target owns the host.
    for c in [None, Some(cluster(true, true))] {
        assert_eq!(
            decide_for(&mm, None, c.as_ref(), Some(&h)),
            Step::RemoveFinalizer
        );
    }
    mm.metadata.finalizers = None;
    assert_eq!(decide_for(&mm, None, None, Some(&h)), Step::Done);
}

#[test]
fn a_move_annotation_on_a_running_clusters_machine_does_not_skip_the_release() {
    let mut mm = deleting(recorded(maas_machine("m"), "h1"));
    mm.metadata.annotations =
        Some([(keys::ANNOTATION_DELETE_FOR_MOVE.to_owned(), String::new())].into());
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    let running = cluster(true, false);
    let obs = Observed {
        maas_machine: &mm,
        machine: None,
        cluster: Some(&running),
        host: Some(&h),
        data_claim: None,
        data: None,
        system_host: None,
        vm_host: None,
        vm: None,
    };
    assert!(move_annotation_ignored(&obs));
    assert_eq!(decide(&obs), Step::ClearProvisioning);
}

#[test]
fn delete_clears_request_waits_for_release_then_releases() {
    let mm = deleting(recorded(maas_machine("m"), "h1"));
    let mut h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    h.spec.provisioning = Some(provisioning());
    assert_eq!(
        decide_for(&mm, None, None, Some(&h)),
        Step::ClearProvisioning
    );

    h.spec.provisioning = None;
    h.metadata.generation = Some(2);
    // The gateway has not seen the cleared request yet: still Deployed at generation 1.
    assert!(matches!(
        decide_for(&mm, None, None, Some(&h)),
        Step::WaitForRelease { .. }
    ));
    // It has seen it and is releasing.
    h.status.as_mut().unwrap().observed_generation = Some(2);
    h.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Releasing);
    let Step::WaitForRelease { message } = decide_for(&mm, None, None, Some(&h)) else {
        panic!("expected to wait");
    };
    assert!(message.contains("Releasing"), "{message}");
    h.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Available);
    assert_eq!(decide_for(&mm, None, None, Some(&h)), Step::ReleaseHost);
    // Available but observed an older spec: not yet.
    h.status.as_mut().unwrap().observed_generation = Some(1);
    assert!(matches!(
        decide_for(&mm, None, None, Some(&h)),
        Step::WaitForRelease { .. }
    ));
    // Reported gone from MAAS before the cleared request was seen: that proves nothing yet.
    h.status.as_mut().unwrap().missing = Some(true);
    assert!(matches!(
        decide_for(&mm, None, None, Some(&h)),
        Step::WaitForRelease { .. }
    ));
    // Gone (404) as seen after the request: nothing left to release.
    h.status.as_mut().unwrap().observed_generation = Some(2);
    h.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Missing);
    assert_eq!(decide_for(&mm, None, None, Some(&h)), Step::ReleaseHost);

    assert_eq!(decide_for(&mm, None, None, None), Step::RemoveFinalizer);
    let mut no_finalizer = mm.clone();
    no_finalizer.metadata.finalizers = None;
    assert_eq!(decide_for(&no_finalizer, None, None, Some(&h)), Step::Done);
    // Paused deletion waits.
    let m = machine("m", Some("boot"));
    assert_eq!(
        decide_for(&mm, Some(&m), Some(&cluster(true, true)), Some(&h)),
        Step::Paused
    );
}

#[test]
fn never_reported_hosts_count_as_released() {
    let mut h = host("h", None);
    assert!(is_released(&h));
    h.status = None;
    assert!(is_released(&h));
}

#[test]
fn a_missing_host_counts_as_released_only_when_reported_after_the_request() {
    let mut h = host("h", Some(ProvisioningState::Missing));
    assert!(is_released(&h), "MAAS said 404 after the release request");
    h.metadata.generation = Some(2);
    assert!(
        !is_released(&h),
        "a Missing written before the release request proves nothing"
    );
    let mut available = host("h", Some(ProvisioningState::Available));
    available.metadata.generation = Some(2);
    assert!(!is_released(&available));
}

#[test]
fn host_request_takes_machine_failure_domain_first() {
    let mut mm = maas_machine("m");
    mm.spec.failure_domain = Some("az2".into());
    mm.spec.tags = Some(vec!["gpu".into()]);
    mm.spec.resource_pool = Some(String::new());
    mm.spec.min_disk_size = Some(100);
    let mut m = machine("m", Some("b"));
    assert_eq!(
        host_request(&mm, Some(&m), None).failure_domain.as_deref(),
        Some("az2")
    );
    m.spec.failure_domain = Some("az3".into());
    let request = host_request(&mm, Some(&m), Some("owner".into()));
    assert_eq!(request.failure_domain.as_deref(), Some("az3"));
    assert_eq!(request.tags, ["gpu"]);
    assert_eq!(request.resource_pool, None, "empty pool means any");
    assert_eq!(request.min_disk_gib, Some(100));
    assert_eq!(request.min_memory_mib, 4096);
    assert_eq!(request.reuse_owner_uid.as_deref(), Some("owner"));
    m.spec.failure_domain = Some(String::new());
    mm.spec.failure_domain = None;
    assert_eq!(failure_domain(&mm, Some(&m)), None);
}

fn data_claim(rendered: Option<&str>, message: &str) -> capmaas_api::MaasDataClaim {
    let mut claim = capmaas_api::MaasDataClaim::new(
        "m",
        capmaas_api::data::MaasDataClaimSpec {
            template: LocalObjectReference::new("t"),
            host_ref: Some(HostReference::new("h1", "ns", "ns")),
        },
    );
    claim.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_MACHINE.to_owned()]);
    let condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: "DataReady".into(),
        status: if rendered.is_some() { "True" } else { "False" }.into(),
        reason: "WaitingForAddresses".into(),
        message: message.into(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ),
        observed_generation: None,
    };
    claim.status = Some(capmaas_api::data::MaasDataClaimStatus {
        rendered_data: rendered.map(LocalObjectReference::new),
        error_message: None,
        conditions: Some(vec![condition]),
    });
    claim
}

fn rendered_data(ready: bool) -> capmaas_api::MaasData {
    let mut data = capmaas_api::MaasData::new(
        "t-0",
        capmaas_api::data::MaasDataSpec {
            index: 0,
            template: LocalObjectReference::new("t"),
            claim: LocalObjectReference::new("m"),
            meta_data: Some(LocalObjectReference::new("t-0-metadata")),
            network_data: Some(LocalObjectReference::new("t-0-networkdata")),
        },
    );
    data.status = Some(capmaas_api::data::MaasDataStatus {
        ready: Some(ready),
        error_message: None,
        hostname: Some("node-0".into()),
    });
    data
}

#[test]
fn a_data_template_is_claimed_and_rendered_before_the_deployment_is_requested() {
    let mut mm = recorded(maas_machine("m"), "h1");
    mm.spec.data_template = Some(LocalObjectReference::new("t"));
    let m = machine("m", Some("boot"));
    let c = cluster(true, false);
    let h = claimed(host("h1", Some(ProvisioningState::Available)), &mm);
    let with = |claim: Option<&capmaas_api::MaasDataClaim>,
                data: Option<&capmaas_api::MaasData>| {
        decide(&Observed {
            maas_machine: &mm,
            machine: Some(&m),
            cluster: Some(&c),
            host: Some(&h),
            data_claim: claim,
            data,
            system_host: None,
            vm_host: None,
            vm: None,
        })
    };
    assert_eq!(with(None, None), Step::CreateDataClaim);
    let pending = data_claim(None, "MaasIPPool prov: PoolExhausted");
    let Step::WaitForData { message } = with(Some(&pending), None) else {
        panic!("expected to wait for data");
    };
    assert!(message.contains("PoolExhausted"), "{message}");
    let done = data_claim(Some("t-0"), "");
    assert!(matches!(
        with(Some(&done), Some(&rendered_data(false))),
        Step::WaitForData { .. }
    ));
    assert_eq!(
        with(Some(&done), Some(&rendered_data(true))),
        Step::RequestDeployment
    );

    // The request carries the rendered Secrets and the hostname the metadata names.
    let request = crate::status::provisioning_request(
        &mm,
        capmaas_api::common::SecretKeyReference::new("boot"),
        &h,
        Some(&rendered_data(true)),
        false,
    );
    let network = request.network_data_secret_ref.unwrap();
    assert_eq!(
        (network.name.as_str(), network.key.as_str()),
        ("t-0-networkdata", "networkData")
    );
    assert_eq!(request.meta_data_secret_ref.unwrap().key, "metaData");
    assert_eq!(request.hostname.as_deref(), Some("node-0"));
}

#[test]
fn the_data_claim_is_let_go_only_after_the_host_is_released() {
    let mut mm = deleting(recorded(maas_machine("m"), "h1"));
    mm.spec.data_template = Some(LocalObjectReference::new("t"));
    let h = claimed(host("h1", Some(ProvisioningState::Deployed)), &mm);
    let mut h = h;
    h.spec.provisioning = Some(provisioning());
    let claim = data_claim(Some("t-0"), "");
    let with = |host: Option<&MaasHost>, claim: Option<&capmaas_api::MaasDataClaim>| {
        decide(&Observed {
            maas_machine: &mm,
            machine: None,
            cluster: None,
            host,
            data_claim: claim,
            data: None,
            system_host: None,
            vm_host: None,
            vm: None,
        })
    };
    assert_eq!(with(Some(&h), Some(&claim)), Step::ClearProvisioning);
    assert_eq!(
        with(None, Some(&claim)),
        Step::ReleaseData,
        "host released and its claim cleared"
    );
    let mut let_go = claim.clone();
    let_go.metadata.finalizers = None;
    assert_eq!(with(None, Some(&let_go)), Step::RemoveFinalizer);
    assert_eq!(with(None, None), Step::RemoveFinalizer);
}
