use std::collections::BTreeMap;
use std::time::Duration;

use maas_api_client::{Machine, MachineStatus, PowerState};

use super::*;
use crate::host::annotations::{self, INSTALLATION};

fn machine(status: MachineStatus, power: PowerState) -> Machine {
    let mut m = crate::cache::tests::machine("abc", 4);
    m.status = status;
    m.power_state = power;
    m
}

fn ours(mut m: Machine, host: &HostFacts) -> Machine {
    m.owner = Some("admin".into());
    m.workload_annotations = host.annotations.clone();
    m.hostname = host.hostname.clone().unwrap_or_default();
    m
}

fn wanting() -> HostFacts {
    HostFacts {
        consumed: true,
        provisioning: true,
        allocation_recorded: true,
        allocated_for_other_consumer: false,
        allocation_known: true,
        reboot_requested: false,
        reboot: RebootState::Idle,
        deploy_failures: 0,
        max_deploy_retries: 2,
        hostname: Some("node-1".into()),
        original_hostname: None,
        unclaimed_for: None,
        release_unclaimed_after: None,
        annotations: annotations::desired_machine_annotations("capmaas-t", "ns", "abc", None, None),
        annotate: false,
        maas_busy: false,
        recorded_release: None,
        identified: false,
        finalizer: false,
        static_addresses: None,
        keep_powered_on: true,
        vm_host_guests: Vec::new(),
    }
}

fn with_addresses(host: HostFacts) -> HostFacts {
    HostFacts {
        static_addresses: Some(annotations::static_addresses("10.0.0.10")),
        ..host
    }
}

fn idle() -> HostFacts {
    HostFacts {
        consumed: false,
        provisioning: false,
        allocation_recorded: false,
        allocation_known: false,
        ..wanting()
    }
}

fn is_wait(step: &Step, expected: Wait) -> bool {
    matches!(step, Step::Wait { why, .. } if *why == expected)
}

#[test]
fn missing_machine_is_reported() {
    assert!(is_wait(&next_step(&wanting(), None), Wait::Missing));
}

#[test]
fn provisioning_sequence() {
    let host = wanting();
    let ready = machine(MachineStatus::Ready, PowerState::Off);
    assert_eq!(next_step(&host, Some(&ready)), Step::Allocate);
    assert_eq!(
        next_step(
            &HostFacts {
                consumed: false,
                ..wanting()
            },
            Some(&ready)
        ),
        Step::Wait {
            why: Wait::Idle,
            poll: None
        }
    );

    let mut allocated = machine(MachineStatus::Allocated, PowerState::Off);
    allocated.owner = Some("admin".into());
    // The allocation's identity is its agent_name: no annotation call before the deploy.
    allocated.hostname = "maas-given".into();
    // The MAAS name is recorded before the rename, so a release can give it back.
    assert_eq!(
        next_step(&host, Some(&allocated)),
        Step::RecordOriginalHostname("maas-given".into())
    );
    let mut host = host;
    host.original_hostname = Some("maas-given".into());
    assert_eq!(
        next_step(&host, Some(&allocated)),
        Step::SetHostname("node-1".into())
    );
    allocated.hostname = "node-1".into();
    assert_eq!(next_step(&host, Some(&allocated)), Step::Deploy);

    let deploying = ours(machine(MachineStatus::Deploying, PowerState::On), &host);
    assert_eq!(
        next_step(&host, Some(&deploying)),
        Step::Wait {
            why: Wait::Deploying,
            poll: Some(POLL)
        }
    );
    let deployed = ours(machine(MachineStatus::Deployed, PowerState::On), &host);
    assert_eq!(
        next_step(&host, Some(&deployed)),
        Step::Wait {
            why: Wait::Deployed,
            poll: None
        }
    );
}

#[test]
fn workload_annotations_when_asked_for_follow_the_deploy() {
    let host = HostFacts {
        annotate: true,
        ..wanting()
    };
    let mut allocated = machine(MachineStatus::Allocated, PowerState::Off);
    allocated.owner = Some("admin".into());
    allocated.hostname = "node-1".into();
    assert_eq!(next_step(&host, Some(&allocated)), Step::Deploy);
    let mut deploying = machine(MachineStatus::Deploying, PowerState::On);
    deploying.owner = Some("admin".into());
    assert_eq!(next_step(&host, Some(&deploying)), Step::SetAnnotations);
    assert!(is_wait(
        &next_step(&host, Some(&ours(deploying, &host))),
        Wait::Deploying
    ));
    // Deployed before they were sent (a fast deployment, a restart): sent then.
    let mut deployed = machine(MachineStatus::Deployed, PowerState::On);
    deployed.owner = Some("admin".into());
    assert_eq!(next_step(&host, Some(&deployed)), Step::SetAnnotations);
    assert!(is_wait(
        &next_step(&host, Some(&ours(deployed.clone(), &host))),
        Wait::Deployed
    ));
    // Off: never sent.
    assert!(is_wait(
        &next_step(&wanting(), Some(&deployed)),
        Wait::Deployed
    ));
    // While calls for machines wait in the MAAS queue: reported, and looked at again.
    let busy = HostFacts {
        maas_busy: true,
        ..host
    };
    assert_eq!(
        next_step(&busy, Some(&deployed)),
        Step::Wait {
            why: Wait::Deployed,
            poll: Some(POLL)
        }
    );
    let mut deploying = machine(MachineStatus::Deploying, PowerState::On);
    deploying.owner = Some("admin".into());
    assert!(is_wait(
        &next_step(&busy, Some(&deploying)),
        Wait::Deploying
    ));
}

#[test]
fn unrecorded_allocation_is_adopted_not_redone() {
    // Crash after allocate, before the status write: MAAS shows Allocated without our
    // annotations. The Allocate step looks the machine up by agent_name before allocating.
    let host = HostFacts {
        allocation_recorded: false,
        ..wanting()
    };
    let mut m = machine(MachineStatus::Allocated, PowerState::Off);
    m.owner = Some("admin".into());
    assert_eq!(next_step(&host, Some(&m)), Step::Allocate);
    // With our annotations but still no record (status lost): adopted, so that it is recorded.
    let m = ours(m, &host);
    assert_eq!(next_step(&host, Some(&m)), Step::Allocate);
    // Recorded: deployment continues.
    let host = HostFacts {
        allocation_recorded: true,
        ..host
    };
    assert_eq!(next_step(&host, Some(&m)), Step::Deploy);
    // Crash after deploy: Deploying is never deployed again.
    let mut d = ours(machine(MachineStatus::Deploying, PowerState::On), &host);
    assert!(is_wait(&next_step(&host, Some(&d)), Wait::Deploying));
    d.status = MachineStatus::Deployed;
    assert!(is_wait(&next_step(&host, Some(&d)), Wait::Deployed));
}

#[test]
fn failed_deployment_is_retried_a_bounded_number_of_times() {
    let host = wanting();
    let failed = ours(
        machine(MachineStatus::FailedDeployment, PowerState::Off),
        &host,
    );
    assert_eq!(next_step(&host, Some(&failed)), Step::RetryDeployment);
    let host1 = HostFacts {
        deploy_failures: 1,
        ..wanting()
    };
    assert_eq!(next_step(&host1, Some(&failed)), Step::RetryDeployment);
    let spent = HostFacts {
        deploy_failures: 2,
        ..wanting()
    };
    assert!(is_wait(
        &next_step(&spent, Some(&failed)),
        Wait::DeployFailedFinal
    ));
    // The consumer gives up: release, then forget the failures.
    let given_up = HostFacts {
        provisioning: false,
        ..spent.clone()
    };
    assert_eq!(next_step(&given_up, Some(&failed)), Step::Release);
    let ready = machine(MachineStatus::Ready, PowerState::Off);
    assert_eq!(
        next_step(
            &HostFacts {
                allocation_recorded: false,
                ..given_up
            },
            Some(&ready)
        ),
        Step::ResetFailures
    );
    // Success forgets them too.
    let deployed = ours(machine(MachineStatus::Deployed, PowerState::On), &host1);
    assert_eq!(next_step(&host1, Some(&deployed)), Step::ResetFailures);
}

#[test]
fn release_when_provisioning_is_cleared() {
    let mut host = wanting();
    host.provisioning = false;
    for status in [
        MachineStatus::Allocated,
        MachineStatus::Deploying,
        MachineStatus::Deployed,
        MachineStatus::Broken,
        MachineStatus::FailedDiskErasing,
    ] {
        let m = ours(machine(status, PowerState::On), &host);
        assert_eq!(next_step(&host, Some(&m)), Step::Release, "{status:?}");
    }
    let m = ours(machine(MachineStatus::Releasing, PowerState::On), &host);
    assert!(is_wait(&next_step(&host, Some(&m)), Wait::Releasing));
    let m = machine(MachineStatus::Ready, PowerState::Off);
    assert!(is_wait(&next_step(&idle(), Some(&m)), Wait::Idle));
}

#[test]
fn an_allocation_this_host_did_not_make_waits_unclaimed_for_its_machine() {
    // Imported after `clusterctl move` (or deleted and imported again): MAAS shows the machine
    // allocated to this installation for this host's namespace and name, deployed.
    let imported = idle();
    for status in [
        MachineStatus::Allocated,
        MachineStatus::Deploying,
        MachineStatus::Deployed,
        MachineStatus::FailedDeployment,
        MachineStatus::Broken,
    ] {
        let m = ours(machine(status, PowerState::On), &imported);
        assert!(
            is_wait(&next_step(&imported, Some(&m)), Wait::Unclaimed),
            "{status:?}"
        );
    }
    // Its machine claims it again: nothing until it asks for the deployment it has; then the
    // allocation is adopted (recorded), and the deployment is found done.
    let claimed = HostFacts {
        provisioning: false,
        allocation_recorded: false,
        allocation_known: false,
        ..wanting()
    };
    let deployed = ours(machine(MachineStatus::Deployed, PowerState::On), &claimed);
    assert!(is_wait(
        &next_step(&claimed, Some(&deployed)),
        Wait::Unclaimed
    ));
    let requested = HostFacts {
        provisioning: true,
        ..claimed
    };
    assert_eq!(next_step(&requested, Some(&deployed)), Step::Allocate);
    let adopted = HostFacts {
        allocation_recorded: true,
        allocation_known: true,
        ..requested
    };
    assert!(is_wait(
        &next_step(&adopted, Some(&deployed)),
        Wait::Deployed
    ));
    // A host that allocated the machine itself still releases it when let go.
    let let_go = HostFacts {
        consumed: false,
        provisioning: false,
        allocation_recorded: false,
        allocated_for_other_consumer: true,
        ..wanting()
    };
    assert_eq!(next_step(&let_go, Some(&deployed)), Step::Release);
}

#[test]
fn a_vm_host_running_composed_machines_is_released_only_once_they_are_gone() {
    let mut host = wanting();
    host.provisioning = false;
    host.vm_host_guests = vec!["vm1".into()];
    let m = ours(machine(MachineStatus::Deployed, PowerState::On), &host);
    let step = next_step(&host, Some(&m));
    assert!(is_wait(&step, Wait::VmHostInUse), "{step:?}");
    assert_eq!(
        step,
        Step::Wait {
            why: Wait::VmHostInUse,
            poll: Some(VM_HOST_IN_USE_POLL)
        },
        "looked at again, not only on a change"
    );
    // Deployed as asked: the guests change nothing.
    host.provisioning = true;
    assert!(is_wait(&next_step(&host, Some(&m)), Wait::Deployed));
    host.provisioning = false;
    host.vm_host_guests.clear();
    assert_eq!(next_step(&host, Some(&m)), Step::Release);
}

#[test]
fn a_new_consumer_gets_a_freshly_released_machine() {
    let host = HostFacts {
        allocated_for_other_consumer: true,
        ..wanting()
    };
    let m = ours(machine(MachineStatus::Deployed, PowerState::On), &host);
    assert_eq!(next_step(&host, Some(&m)), Step::Release);
}

#[test]
fn machines_of_others_are_never_touched() {
    let host = HostFacts {
        allocation_recorded: false,
        ..idle()
    };
    let mut m = machine(MachineStatus::Deployed, PowerState::On);
    m.owner = Some("someone".into());
    m.workload_annotations = BTreeMap::from([(INSTALLATION.to_owned(), "other".to_owned())]);
    assert!(is_wait(&next_step(&host, Some(&m)), Wait::HeldByOther));
    let reboot = HostFacts {
        reboot_requested: true,
        reboot: RebootState::PoweringOff,
        ..host
    };
    assert!(is_wait(&next_step(&reboot, Some(&m)), Wait::HeldByOther));
}

#[test]
fn reboot_powers_off_while_requested_then_on_once() {
    let requested = HostFacts {
        reboot_requested: true,
        ..wanting()
    };
    let on = ours(machine(MachineStatus::Deployed, PowerState::On), &requested);
    let off = ours(
        machine(MachineStatus::Deployed, PowerState::Off),
        &requested,
    );
    assert_eq!(next_step(&requested, Some(&on)), Step::BeginReboot);
    let powering_off = HostFacts {
        reboot: RebootState::PoweringOff,
        ..requested.clone()
    };
    assert_eq!(next_step(&powering_off, Some(&on)), Step::PowerOff);
    assert!(is_wait(
        &next_step(&powering_off, Some(&off)),
        Wait::RebootHeld
    ));
    let released = HostFacts {
        reboot_requested: false,
        ..powering_off.clone()
    };
    assert_eq!(next_step(&released, Some(&off)), Step::PowerOn);
    // A request removed before the power-off took effect still completes the cycle.
    assert_eq!(next_step(&released, Some(&on)), Step::PowerOff);

    let sent = HostFacts {
        reboot: RebootState::PoweringOn {
            since: Duration::from_secs(1),
        },
        ..released.clone()
    };
    assert!(
        is_wait(&next_step(&sent, Some(&off)), Wait::PowerTransition),
        "no second power-on"
    );
    assert_eq!(next_step(&sent, Some(&on)), Step::FinishReboot);
    let stale = HostFacts {
        reboot: RebootState::PoweringOn {
            since: POWER_ON_RETRY_AFTER,
        },
        ..released
    };
    assert_eq!(next_step(&stale, Some(&off)), Step::PowerOn);
}

#[test]
fn unknown_power_is_never_acted_upon() {
    for power in [PowerState::Error, PowerState::Unknown] {
        for reboot in [
            RebootState::PoweringOff,
            RebootState::PoweringOn {
                since: POWER_ON_RETRY_AFTER * 2,
            },
        ] {
            let host = HostFacts {
                reboot,
                ..wanting()
            };
            let m = ours(machine(MachineStatus::Deployed, power.clone()), &host);
            assert!(is_wait(&next_step(&host, Some(&m)), Wait::PowerUnknown));
        }
    }
    // A deployed host that is off without a reboot in progress, asked to stay as it is, is
    // reported, not powered on.
    let host = HostFacts {
        keep_powered_on: false,
        ..wanting()
    };
    let m = ours(machine(MachineStatus::Deployed, PowerState::Off), &host);
    assert!(is_wait(&next_step(&host, Some(&m)), Wait::Deployed));
}

#[test]
fn other_states_wait() {
    let host = wanting();
    let broken = ours(machine(MachineStatus::Broken, PowerState::Off), &host);
    assert!(is_wait(&next_step(&host, Some(&broken)), Wait::Broken));
    let failed_release = ours(
        machine(MachineStatus::FailedReleasing, PowerState::Off),
        &host,
    );
    assert!(is_wait(
        &next_step(&host, Some(&failed_release)),
        Wait::ReleaseFailed
    ));
    let erasing = ours(machine(MachineStatus::DiskErasing, PowerState::Off), &host);
    assert!(is_wait(&next_step(&host, Some(&erasing)), Wait::Releasing));
    let commissioning = machine(MachineStatus::Commissioning, PowerState::On);
    assert!(is_wait(
        &next_step(&host, Some(&commissioning)),
        Wait::Unavailable
    ));
}

#[test]
fn an_allocation_annotated_for_another_host_of_our_installation_is_never_touched() {
    // Same installation (agent_name and annotation), another MaasHost: that host's machine.
    let other = HostFacts {
        annotations: annotations::desired_machine_annotations(
            "capmaas-t",
            "team-b",
            "abc",
            None,
            None,
        ),
        ..wanting()
    };
    let idle_here = HostFacts {
        allocation_recorded: false,
        ..idle()
    };
    for status in [
        MachineStatus::Allocated,
        MachineStatus::Deploying,
        MachineStatus::Deployed,
        MachineStatus::FailedDeployment,
    ] {
        let m = ours(machine(status, PowerState::On), &other);
        assert!(!held_by_us(&idle_here, &m), "{status:?}");
        let step = next_step(&idle_here, Some(&m));
        assert!(
            matches!(step, Step::Wait { .. }),
            "{status:?}: never released or powered by a host it is not annotated for: {step:?}"
        );
    }
    // A host that wants to deploy goes through Allocate, which refuses the adoption.
    let wanting_here = HostFacts {
        allocation_recorded: false,
        ..wanting()
    };
    let m = ours(machine(MachineStatus::Allocated, PowerState::Off), &other);
    assert_eq!(next_step(&wanting_here, Some(&m)), Step::Allocate);
}

#[test]
fn static_addresses_are_unlinked_once_released_before_available() {
    let ready = machine(MachineStatus::Ready, PowerState::Off);
    // Released and nobody wants it: unlink first, whoever last held it.
    for host in [
        with_addresses(idle()),
        with_addresses(HostFacts {
            provisioning: false,
            ..wanting()
        }),
        HostFacts {
            static_addresses: Some(annotations::static_addresses("garbage")),
            ..idle()
        },
    ] {
        assert_eq!(
            next_step(&host, Some(&ready)),
            Step::UnlinkStaticAddresses,
            "{host:?}"
        );
    }
    // Failures are forgotten first, then the addresses; without a record the host is idle.
    let failed = HostFacts {
        deploy_failures: 1,
        ..with_addresses(idle())
    };
    assert_eq!(next_step(&failed, Some(&ready)), Step::ResetFailures);
    assert!(is_wait(&next_step(&idle(), Some(&ready)), Wait::Idle));
    // Never while MAAS still holds the machine: release first, wait for Ready.
    let releasing = HostFacts {
        provisioning: false,
        ..with_addresses(wanting())
    };
    let deployed = ours(machine(MachineStatus::Deployed, PowerState::On), &releasing);
    assert_eq!(next_step(&releasing, Some(&deployed)), Step::Release);
    for status in [MachineStatus::Releasing, MachineStatus::DiskErasing] {
        let m = ours(machine(status, PowerState::On), &releasing);
        assert!(is_wait(&next_step(&releasing, Some(&m)), Wait::Releasing));
    }
    // Nor on a machine someone else took meanwhile.
    let mut taken = machine(MachineStatus::Allocated, PowerState::Off);
    taken.owner = Some("someone".into());
    let idle_with = HostFacts {
        allocation_recorded: false,
        ..with_addresses(idle())
    };
    assert!(is_wait(
        &next_step(&idle_with, Some(&taken)),
        Wait::HeldByOther
    ));
}

#[test]
fn a_retried_deployment_keeps_the_addresses_it_needs() {
    // RetryDeployment releases; once Ready the host still wants a deployment: allocate again,
    // never unlink (applying the network data settles the record).
    let host = with_addresses(HostFacts {
        deploy_failures: 1,
        ..wanting()
    });
    let failed = ours(
        machine(MachineStatus::FailedDeployment, PowerState::Off),
        &host,
    );
    assert_eq!(next_step(&host, Some(&failed)), Step::RetryDeployment);
    let ready = machine(MachineStatus::Ready, PowerState::Off);
    let after_release = HostFacts {
        allocation_recorded: false,
        ..host
    };
    assert_eq!(next_step(&after_release, Some(&ready)), Step::Allocate);
    // A new consumer waiting for the old allocation's release does not unlink either.
    let new_consumer = HostFacts {
        allocated_for_other_consumer: true,
        ..with_addresses(wanting())
    };
    assert!(is_wait(&next_step(&new_consumer, Some(&ready)), Wait::Idle));
    // Deployed with the record: it stays.
    let deployed = ours(
        machine(MachineStatus::Deployed, PowerState::On),
        &with_addresses(wanting()),
    );
    assert!(is_wait(
        &next_step(&with_addresses(wanting()), Some(&deployed)),
        Wait::Deployed
    ));
}

#[test]
fn a_missing_machine_drops_the_record() {
    assert_eq!(
        next_step(&with_addresses(idle()), None),
        Step::ForgetStaticAddresses
    );
    assert_eq!(
        next_step(&with_addresses(wanting()), None),
        Step::ForgetStaticAddresses
    );
    assert!(is_wait(&next_step(&idle(), None), Wait::Missing));
}

#[test]
fn a_released_machine_gets_its_original_hostname_back_before_the_record_goes() {
    let mut host = wanting();
    host.provisioning = false;
    host.consumed = false;
    host.original_hostname = Some("maas-given".into());
    let mut released = machine(MachineStatus::Ready, PowerState::Off);
    released.hostname = "node-1".into();
    assert_eq!(
        next_step(&host, Some(&released)),
        Step::SetHostname("maas-given".into())
    );
    released.hostname = "maas-given".into();
    assert_eq!(
        next_step(&host, Some(&released)),
        Step::ForgetOriginalHostname
    );
    // Static addresses go first; a host that wants a deployment keeps the name.
    host.static_addresses = Some(annotations::static_addresses("10.0.0.9"));
    assert_eq!(
        next_step(&host, Some(&released)),
        Step::UnlinkStaticAddresses
    );
    host.static_addresses = None;
    host.provisioning = true;
    host.consumed = true;
    assert_ne!(
        next_step(&host, Some(&released)),
        Step::ForgetOriginalHostname
    );
}

fn traced_host(claimed: bool, state: Option<ProvisioningState>) -> MaasHost {
    let mut host: MaasHost = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "metadata": {"name": "h", "namespace": "ns"},
        "spec": {"systemID": "abc"},
    }))
    .unwrap();
    if claimed {
        host.spec.consumer_ref = Some(capmaas_api::common::ConsumerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
            kind: "MaasMachine".into(),
            name: "m".into(),
            uid: "u".into(),
            namespace: None,
        });
    }
    host.status = state.map(|s| capmaas_api::host::MaasHostStatus {
        provisioning_state: Some(s),
        ..Default::default()
    });
    host
}

#[test]
fn reconciles_join_the_request_trace_only_while_it_is_carried_out() {
    use ProvisioningState as S;
    for (claimed, state, relation) in [
        (true, Some(S::Available), Relation::Child),
        (true, Some(S::Allocating), Relation::Child),
        (true, Some(S::Deploying), Relation::Child),
        (true, Some(S::Deployed), Relation::Link),
        (false, Some(S::Deployed), Relation::Child),
        (false, Some(S::Releasing), Relation::Child),
        (false, Some(S::Available), Relation::Link),
        (false, None, Relation::Link),
        (true, Some(S::Failed), Relation::Link),
    ] {
        assert_eq!(
            trace_relation(&traced_host(claimed, state)),
            relation,
            "claimed {claimed}, {state:?}"
        );
    }
}

#[test]
fn a_provisioning_or_a_release_starts_later_only_behind_a_deep_maas_queue() {
    let deep = NEW_WORK_BACKLOG * 3;
    assert_eq!(
        starts_later(&Step::Allocate, deep),
        Some(deep / 2),
        "looks again when about half of the queue has gone"
    );
    assert_eq!(starts_later(&Step::Allocate, NEW_WORK_BACKLOG), None);
    assert_eq!(starts_later(&Step::Allocate, Duration::ZERO), None);
    // A release is new work too (a mass deletion must not take every slot), with the same
    // admission.
    for step in [Step::Release, Step::RetryDeployment] {
        assert_eq!(starts_later(&step, deep), Some(deep / 2), "{step:?}");
        assert_eq!(starts_later(&step, NEW_WORK_BACKLOG), None, "{step:?}");
    }
    // Work already under way goes on, whatever the queue: the deploy of an allocated machine,
    // and above all a report that needs no call at all.
    for step in [
        Step::Deploy,
        Step::Wait {
            why: Wait::Deployed,
            poll: None,
        },
    ] {
        assert_eq!(starts_later(&step, deep), None, "{step:?}");
    }
}

#[test]
fn a_release_policy_edited_after_deployment_is_recorded_on_the_machine() {
    use capmaas_api::common::{EraseMode, ReleasePolicy};
    let host = wanting();
    let deployed = ours(machine(MachineStatus::Deployed, PowerState::On), &host);
    let edited = HostFacts {
        annotations: annotations::desired_machine_annotations(
            "capmaas-t",
            "ns",
            "abc",
            None,
            Some(&ReleasePolicy {
                erase: EraseMode::Secure,
                force: false,
            }),
        ),
        ..wanting()
    };
    assert_eq!(next_step(&edited, Some(&deployed)), Step::SetAnnotations);
    let recorded = ours(deployed, &edited);
    assert!(is_wait(
        &next_step(&edited, Some(&recorded)),
        Wait::Deployed
    ));
    // Other drift (a consumer annotation edited in MAAS) does not cost a call per resync.
    let mut other = recorded;
    other
        .workload_annotations
        .insert(annotations::HOST.to_owned(), "ns/elsewhere".into());
    let step = next_step(&edited, Some(&other));
    assert!(!matches!(step, Step::SetAnnotations), "{step:?}");
}

#[test]
fn an_unclaimed_allocation_is_released_only_after_the_opted_in_period_and_never_when_claimed() {
    let deployed = |host: &HostFacts| ours(machine(MachineStatus::Deployed, PowerState::On), host);
    let hour = Duration::from_secs(3600);
    // Not opted in: kept for good, whatever its age.
    let kept = HostFacts {
        unclaimed_for: Some(100 * hour),
        ..idle()
    };
    assert_eq!(
        next_step(&kept, Some(&deployed(&kept))),
        Step::Wait {
            why: Wait::Unclaimed,
            poll: None
        }
    );
    // Opted in: waits out the rest of the period (the first report starts it), then releases.
    let opted = HostFacts {
        release_unclaimed_after: Some(24 * hour),
        ..idle()
    };
    assert_eq!(
        next_step(&opted, Some(&deployed(&opted))),
        Step::Wait {
            why: Wait::Unclaimed,
            poll: Some(24 * hour)
        },
        "not reported yet: a full period"
    );
    let young = HostFacts {
        unclaimed_for: Some(23 * hour),
        ..opted.clone()
    };
    assert_eq!(
        next_step(&young, Some(&deployed(&young))),
        Step::Wait {
            why: Wait::Unclaimed,
            poll: Some(hour)
        }
    );
    let old = HostFacts {
        unclaimed_for: Some(24 * hour),
        ..opted
    };
    assert_eq!(next_step(&old, Some(&deployed(&old))), Step::Release);
    // Claimed again (its consumer has not asked for the deployment yet): never released.
    let claimed = HostFacts {
        consumed: true,
        ..old
    };
    assert!(is_wait(
        &next_step(&claimed, Some(&deployed(&claimed))),
        Wait::Unclaimed
    ));
}

#[test]
fn a_release_policy_edited_after_allocation_goes_into_the_annotations_once() {
    use capmaas_api::common::{EraseMode, ReleasePolicy};
    let secure = ReleasePolicy {
        erase: EraseMode::Secure,
        force: false,
    };
    // Allocated with the default policy in its identity; the host now asks for Secure.
    let edited = HostFacts {
        recorded_release: Some(ReleasePolicy::default()),
        annotations: annotations::desired_machine_annotations(
            "capmaas-t",
            "ns",
            "abc",
            None,
            Some(&secure),
        ),
        ..wanting()
    };
    let mut deployed = machine(MachineStatus::Deployed, PowerState::On);
    deployed.owner = Some("admin".into());
    assert_eq!(next_step(&edited, Some(&deployed)), Step::SetAnnotations);
    // Recorded: no call on the next resync.
    let recorded = ours(deployed.clone(), &edited);
    assert!(is_wait(
        &next_step(&edited, Some(&recorded)),
        Wait::Deployed
    ));
    // Not edited: the identity says it all, nothing to send.
    let same = HostFacts {
        recorded_release: Some(secure),
        ..edited
    };
    assert!(is_wait(&next_step(&same, Some(&deployed)), Wait::Deployed));
}

#[test]
fn letting_go_of_an_unannotated_allocation_asks_maas_whose_it_is() {
    // The consumer let go: the status records the allocation for the old consumer only.
    let released = HostFacts {
        consumed: false,
        provisioning: false,
        allocation_recorded: false,
        ..wanting()
    };
    let mut deployed = machine(MachineStatus::Deployed, PowerState::On);
    deployed.owner = Some("admin".into());
    assert!(identity_lookup_needed(&released, &deployed));
    // Not found under our identity: someone else's, never released.
    assert!(is_wait(
        &next_step(&released, Some(&deployed)),
        Wait::HeldByOther
    ));
    let found = HostFacts {
        identified: true,
        ..released.clone()
    };
    assert_eq!(next_step(&found, Some(&deployed)), Step::Release);
    // Found, but this host object never recorded it (a move): kept for its consumer.
    let moved = HostFacts {
        allocation_known: false,
        ..found
    };
    assert!(is_wait(
        &next_step(&moved, Some(&deployed)),
        Wait::Unclaimed
    ));
    // No call where something else tells: annotated, recorded for the consumer, deploying.
    assert!(!identity_lookup_needed(
        &released,
        &ours(deployed.clone(), &released)
    ));
    assert!(!identity_lookup_needed(&wanting(), &deployed));
    let mut releasing = deployed;
    releasing.status = MachineStatus::Releasing;
    assert!(!identity_lookup_needed(&released, &releasing));
}

#[test]
fn an_unrecorded_allocation_goes_back_only_from_a_host_claimed_here_and_let_go() {
    let mut deployed = machine(MachineStatus::Deployed, PowerState::On);
    deployed.owner = Some("admin".into());
    // Ours by identity, not recorded (the record lost to a crash, or a move).
    let found = HostFacts {
        consumed: false,
        provisioning: false,
        allocation_recorded: false,
        allocation_known: false,
        identified: true,
        ..wanting()
    };
    // Imported here after a move (no finalizer): kept for its MaasMachine.
    assert!(is_wait(
        &next_step(&found, Some(&deployed)),
        Wait::Unclaimed
    ));
    // Claimed here (finalizer) and let go: released.
    let let_go = HostFacts {
        finalizer: true,
        ..found.clone()
    };
    assert_eq!(next_step(&let_go, Some(&deployed)), Step::Release);
    // Claimed again, its deployment not asked for yet: kept.
    let reclaimed = HostFacts {
        consumed: true,
        ..let_go
    };
    assert!(is_wait(
        &next_step(&reclaimed, Some(&deployed)),
        Wait::Unclaimed
    ));
}

#[test]
fn a_deployed_machine_found_off_is_powered_on_again_unless_the_request_says_not_to() {
    let host = wanting();
    let off = ours(machine(MachineStatus::Deployed, PowerState::Off), &host);
    assert_eq!(next_step(&host, Some(&off)), Step::RestorePower);
    // Once the power-on is recorded, the reboot's second half carries it through, once.
    let powering_on = HostFacts {
        reboot: RebootState::PoweringOn {
            since: Duration::from_secs(5),
        },
        ..host.clone()
    };
    assert!(is_wait(
        &next_step(&powering_on, Some(&off)),
        Wait::PowerTransition
    ));
    let on = ours(machine(MachineStatus::Deployed, PowerState::On), &host);
    assert_eq!(next_step(&powering_on, Some(&on)), Step::FinishReboot);
    assert!(is_wait(&next_step(&host, Some(&on)), Wait::Deployed));
    // Unknown or error readings are never acted upon.
    for reading in [PowerState::Unknown, PowerState::Error] {
        let unsure = ours(machine(MachineStatus::Deployed, reading), &host);
        assert!(is_wait(&next_step(&host, Some(&unsure)), Wait::Deployed));
    }
    let left_off = HostFacts {
        keep_powered_on: false,
        ..host.clone()
    };
    assert!(is_wait(&next_step(&left_off, Some(&off)), Wait::Deployed));
    // A machine still deploying, or someone else's, is not powered on.
    let deploying = ours(machine(MachineStatus::Deploying, PowerState::Off), &host);
    assert_ne!(next_step(&host, Some(&deploying)), Step::RestorePower);
    let mut foreign = machine(MachineStatus::Deployed, PowerState::Off);
    foreign.owner = Some("bob".into());
    let unrecorded = HostFacts {
        allocation_recorded: false,
        allocation_known: false,
        ..host
    };
    assert_ne!(next_step(&unrecorded, Some(&foreign)), Step::RestorePower);
}
