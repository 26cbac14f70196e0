use super::*;
use crate::fixtures::{maas_cluster, machine};
use crate::prober::probe_reason;
use capmaas_api::MaasDNSRecordStatus;
use capmaas_api::capi::{ClusterEndpoint, ClusterNetwork, ClusterSpec};
use capmaas_api::conditions::DNS_RECORD_SYNCED;
use capmaas_runtime::conditions::get_condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::json;

fn t(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}

fn cluster(spec: ClusterSpec) -> Cluster {
    Cluster::new("prod", spec)
}

fn mc(spec: &serde_json::Value) -> MaasCluster {
    maas_cluster("prod-maas", "prod", spec)
}

#[test]
fn owner_and_management_annotations() {
    let mut m = mc(&json!({"dnsDomain": "maas"}));
    assert_eq!(owner_cluster_name(&m), Some("prod"));
    assert!(!is_externally_managed(&m));
    assert!(!has_finalizer(&m));
    m.metadata.owner_references.as_mut().unwrap()[0].api_version = "apps/v1".into();
    assert_eq!(owner_cluster_name(&m), None, "only a CAPI Cluster owns us");
    m.metadata.annotations = Some([(ANNOTATION_MANAGED_BY.to_owned(), String::new())].into());
    assert!(is_externally_managed(&m));
    m.metadata.finalizers = Some(vec![FINALIZER_MAAS_CLUSTER.into()]);
    assert!(has_finalizer(&m));
}

#[test]
fn pause_by_cluster_or_annotation() {
    let mut m = mc(&json!({"dnsDomain": "maas"}));
    let running = cluster(ClusterSpec::default());
    let paused = cluster(ClusterSpec {
        paused: Some(true),
        ..ClusterSpec::default()
    });
    assert_eq!(pause_reason(&m, Some(&running)), None);
    assert_eq!(pause_reason(&m, None), None);
    assert!(
        pause_reason(&m, Some(&paused))
            .unwrap()
            .contains("spec.paused")
    );
    m.metadata.annotations = Some([(ANNOTATION_PAUSED.to_owned(), "true".to_owned())].into());
    assert!(
        pause_reason(&m, Some(&running))
            .unwrap()
            .contains(ANNOTATION_PAUSED)
    );
    let c = paused_condition(Some("why"));
    assert_eq!(
        (c.type_.as_str(), c.status, c.reason.as_str()),
        ("Paused", ConditionStatus::True, "Paused")
    );
    assert_eq!(paused_condition(None).status, ConditionStatus::False);
}

#[test]
fn endpoint_is_generated_deterministically() {
    let m = mc(&json!({"dnsDomain": "maas."}));
    let plan = plan_endpoint("prod", &m.spec, &cluster(ClusterSpec::default())).unwrap();
    assert_eq!(
        plan.endpoint,
        ApiEndpoint {
            host: "prod.maas".into(),
            port: 6443
        }
    );
    assert!(plan.patch_spec);
    assert_eq!(plan.dns.as_ref().unwrap().name, "prod");
    assert_eq!(plan.dns.as_ref().unwrap().fqdn(), "prod.maas");
    let again = plan_endpoint("prod", &m.spec, &cluster(ClusterSpec::default())).unwrap();
    assert_eq!(plan, again);
    // The Cluster's API server port is honoured.
    let c = cluster(ClusterSpec {
        cluster_network: Some(ClusterNetwork {
            api_server_port: Some(7443),
        }),
        ..ClusterSpec::default()
    });
    assert_eq!(
        plan_endpoint("prod", &m.spec, &c).unwrap().endpoint.port,
        7443
    );
}

#[test]
fn endpoint_once_set_is_kept_and_still_served_when_ours() {
    let ours = mc(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "prod.maas", "port": 6443}}),
    );
    let plan = plan_endpoint("prod", &ours.spec, &cluster(ClusterSpec::default())).unwrap();
    assert!(!plan.patch_spec);
    assert!(
        plan.dns.is_some(),
        "the record keeps following the machines"
    );

    let users = mc(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb.example.com", "port": 443}}),
    );
    let plan = plan_endpoint("prod", &users.spec, &cluster(ClusterSpec::default())).unwrap();
    assert_eq!(plan.endpoint.host, "lb.example.com");
    assert_eq!(plan.endpoint.port, 443);
    assert!(!plan.patch_spec);
    assert_eq!(plan.dns, None, "a user endpoint gets no DNS record");
    let lb = load_balancer_condition(&plan, None);
    assert_eq!(lb.status, ConditionStatus::True);
    assert_eq!(lb.reason, reason::EXTERNAL_ENDPOINT);
}

#[test]
fn endpoint_from_the_cluster_is_respected() {
    let m = mc(&json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "", "port": 6443}}));
    let c = cluster(ClusterSpec {
        control_plane_endpoint: Some(ClusterEndpoint {
            host: Some("10.0.0.100".into()),
            port: None,
        }),
        ..ClusterSpec::default()
    });
    let plan = plan_endpoint("prod", &m.spec, &c).unwrap();
    assert_eq!(
        plan.endpoint,
        ApiEndpoint {
            host: "10.0.0.100".into(),
            port: 6443
        }
    );
    assert!(plan.patch_spec);
    assert_eq!(plan.dns, None);
}

#[test]
fn cluster_names_that_are_not_dns_labels_are_a_spec_error() {
    let m = mc(&json!({"dnsDomain": "maas"}));
    let err = plan_endpoint("Prod.Team", &m.spec, &cluster(ClusterSpec::default())).unwrap_err();
    assert!(err.contains("not a DNS label"), "{err}");
    assert!(DnsName::for_cluster(&"a".repeat(64), "maas").is_err());
    assert!(DnsName::for_cluster("-a", "maas").is_err());
    assert!(DnsName::for_cluster("a", " . ").is_err());
    // With an explicit endpoint the name does not matter.
    let m = mc(&json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb", "port": 6443}}));
    assert!(plan_endpoint("Prod.Team", &m.spec, &cluster(ClusterSpec::default())).is_ok());
}

#[test]
fn failure_domains_from_zones() {
    let m = mc(&json!({"dnsDomain": "maas", "failureDomains": ["az1", "az2", "az1", " "]}));
    let fds = failure_domains(&m.spec).unwrap();
    let names: Vec<_> = fds.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["az1", "az2"]);
    assert!(fds.iter().all(|f| f.control_plane == Some(true)));
    assert_eq!(
        failure_domains(&mc(&json!({"dnsDomain": "maas"})).spec),
        None
    );
    assert_eq!(
        failure_domains(&mc(&json!({"dnsDomain": "maas", "failureDomains": []})).spec),
        None
    );
}

fn record(
    spec_addresses: &[&str],
    status: Option<MaasDNSRecordStatus>,
    generation: i64,
) -> MaasDNSRecord {
    let mut r = MaasDNSRecord::new(
        "prod",
        capmaas_api::MaasDNSRecordSpec {
            name: "prod".into(),
            domain: "maas".into(),
            addresses: Some(spec_addresses.iter().map(|s| (*s).to_owned()).collect()),
            ttl: None,
        },
    );
    r.metadata.generation = Some(generation);
    r.status = status;
    r
}

fn synced(observed: &[&str], generation: i64) -> MaasDNSRecordStatus {
    MaasDNSRecordStatus {
        observed_addresses: Some(observed.iter().map(|s| (*s).to_owned()).collect()),
        ready: Some(true),
        observed_generation: Some(generation),
        ..MaasDNSRecordStatus::default()
    }
}

#[test]
fn load_balancer_follows_the_record() {
    let m = mc(&json!({"dnsDomain": "maas"}));
    let plan = plan_endpoint("prod", &m.spec, &cluster(ClusterSpec::default())).unwrap();
    let c = load_balancer_condition(&plan, None);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "WaitForDNSName")
    );

    let c = load_balancer_condition(&plan, Some(&record(&[], Some(synced(&[], 1)), 1)));
    assert_eq!(c.status, ConditionStatus::False);
    assert!(
        c.message.contains("no control-plane address"),
        "{}",
        c.message
    );

    let c = load_balancer_condition(&plan, Some(&record(&["10.0.0.1"], None, 2)));
    assert_eq!(c.status, ConditionStatus::False);
    assert!(c.message.contains("waiting for MAAS"), "{}", c.message);

    let c = load_balancer_condition(
        &plan,
        Some(&record(&["10.0.0.1"], Some(synced(&["10.0.0.1"], 2)), 2)),
    );
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::True, "LoadBalancerReady")
    );
    assert_eq!(c.message, "prod.maas resolves to 10.0.0.1");

    // A changed set the gateway has not synced yet: the name still answers.
    let c = load_balancer_condition(
        &plan,
        Some(&record(
            &["10.0.0.1", "10.0.0.2"],
            Some(synced(&["10.0.0.1"], 2)),
            3,
        )),
    );
    assert_eq!(c.status, ConditionStatus::True);
    assert!(c.message.ends_with("update pending"), "{}", c.message);

    let mut failing = synced(&["10.0.0.1"], 3);
    failing.ready = Some(false);
    failing.conditions = Some(vec![Condition {
        type_: DNS_RECORD_SYNCED.into(),
        status: "False".into(),
        reason: "LoadBalancerFailed".into(),
        message: "MAAS holds other addresses".into(),
        observed_generation: Some(3),
        last_transition_time: t(1),
    }]);
    let c = load_balancer_condition(&plan, Some(&record(&["10.0.0.2"], Some(failing), 3)));
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "LoadBalancerFailed")
    );
    assert!(c.message.contains("MAAS holds other addresses"));
}

#[test]
fn api_server_condition_from_probe() {
    let c = api_server_condition(&ProbeState::Pending);
    assert_eq!(c.status, ConditionStatus::Unknown);
    let c = api_server_condition(&ProbeState::Available {
        version: "v1.36.3".into(),
    });
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::True, "APIServerAvailable")
    );
    let c = api_server_condition(&ProbeState::Unavailable {
        reason: probe_reason::KUBECONFIG_MISSING,
        message: "Secret prod-kubeconfig not found".into(),
    });
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "KubeconfigMissing")
    );
}

fn parts(provisioned: bool, lb: ConditionStatus, api: ConditionStatus) -> StatusParts {
    StatusParts {
        provisioned,
        dns_name: Some("prod.maas".into()),
        failure_domains: None,
        load_balancer: NewCondition::new(cond::LOAD_BALANCER_READY, lb, "R"),
        api_server: NewCondition::new(cond::API_SERVER_AVAILABLE, api, "R"),
        generation: Some(1),
    }
}

#[test]
fn status_is_provisioned_once_and_deterministic() {
    let first = build_status(
        None,
        parts(true, ConditionStatus::False, ConditionStatus::Unknown),
        &t(10),
    );
    assert_eq!(first.ready, Some(true));
    assert_eq!(
        first.initialization.as_ref().unwrap().provisioned,
        Some(true)
    );
    assert_eq!(
        first.network.as_ref().unwrap().dns_name.as_deref(),
        Some("prod.maas")
    );
    let conditions = first.conditions.as_deref().unwrap();
    let types: Vec<_> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["Paused", "LoadBalancerReady", "APIServerAvailable", "Ready"]
    );
    assert_eq!(get_condition(conditions, "Ready").unwrap().status, "False");

    // Same world later: identical status, so no write.
    let again = build_status(
        Some(&first),
        parts(true, ConditionStatus::False, ConditionStatus::Unknown),
        &t(99),
    );
    assert_eq!(again, first);

    // Never taken back, even if a later pass could not settle the endpoint.
    let later = build_status(
        Some(&first),
        parts(false, ConditionStatus::True, ConditionStatus::True),
        &t(100),
    );
    assert_eq!(later.ready, Some(true));
    let ready = get_condition(later.conditions.as_deref().unwrap(), "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), &ready.last_transition_time),
        ("True", &t(100))
    );

    let unsettled = build_status(
        None,
        parts(false, ConditionStatus::False, ConditionStatus::False),
        &t(1),
    );
    assert_eq!(unsettled.ready, None);
    assert_eq!(unsettled.initialization, None);
}

#[test]
fn pause_keeps_everything_else() {
    let first = build_status(
        None,
        parts(true, ConditionStatus::True, ConditionStatus::True),
        &t(10),
    );
    let paused = status_with(
        Some(&first),
        paused_condition(Some("Cluster spec.paused is true")),
        &t(20),
    );
    assert_eq!(paused.ready, first.ready);
    assert_eq!(paused.network, first.network);
    let conditions = paused.conditions.as_deref().unwrap();
    assert_eq!(get_condition(conditions, "Paused").unwrap().status, "True");
    assert_eq!(get_condition(conditions, "Ready").unwrap().status, "True");
    // Unpaused: the normal status flips Paused back.
    let resumed = build_status(
        Some(&paused),
        parts(true, ConditionStatus::True, ConditionStatus::True),
        &t(30),
    );
    assert_eq!(
        get_condition(resumed.conditions.as_deref().unwrap(), "Paused")
            .unwrap()
            .status,
        "False"
    );
}

#[test]
fn deletion_waits_for_machines_then_the_record() {
    let machines = vec![
        machine("w-1", "prod", false, &[]),
        machine("cp-0", "prod", true, &[]),
    ];
    let live = record(&["10.0.0.1"], None, 1);
    let mut deleting = record(&["10.0.0.1"], None, 1);
    deleting.metadata.deletion_timestamp = Some(t(5));

    let step = deletion_step(&machines, std::slice::from_ref(&live));
    assert_eq!(
        step,
        DeletionStep::WaitForMachines(vec!["cp-0".into(), "w-1".into()])
    );
    let c = deletion_condition(&step, Some(2)).unwrap();
    assert_eq!(
        (c.type_.as_str(), c.status, c.reason.as_str()),
        ("Ready", ConditionStatus::False, "WaitingForMachineDeletion")
    );
    assert!(c.message.contains("2 MaasMachine(s)"), "{}", c.message);

    assert_eq!(
        deletion_step(&[], std::slice::from_ref(&live)),
        DeletionStep::DeleteDnsRecords(vec!["prod".into()])
    );
    assert_eq!(
        deletion_step(&[], std::slice::from_ref(&deleting)),
        DeletionStep::WaitForDnsRecords(vec!["prod".into()])
    );
    assert_eq!(deletion_step(&[], &[]), DeletionStep::RemoveFinalizer);
    assert_eq!(
        deletion_condition(&DeletionStep::RemoveFinalizer, None),
        None
    );
}

#[test]
fn long_machine_lists_are_shortened() {
    let machines: Vec<_> = (0..8)
        .map(|i| machine(&format!("m-{i}"), "prod", false, &[]))
        .collect();
    let step = deletion_step(&machines, &[]);
    let c = deletion_condition(&step, None).unwrap();
    assert!(
        c.message.ends_with("m-0, m-1, m-2, m-3, m-4 and 3 more"),
        "{}",
        c.message
    );
}

#[test]
fn record_ownership_by_uid() {
    let mut r = record(&[], None, 1);
    assert!(!owned_by(&r, "mc-uid"));
    r.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
            kind: "MaasCluster".into(),
            name: "prod-maas".into(),
            uid: "mc-uid".into(),
            ..Default::default()
        },
    ]);
    assert!(owned_by(&r, "mc-uid"));
    assert!(!owned_by(&r, "other"));
}
