use super::*;
use crate::fixtures::{machine, plan_prod, prod_cluster, prod_maas_cluster, record, t};
use crate::status::{load_balancer_condition, paused_condition};
use capmaas_api::capi::{ClusterEndpoint, ClusterNetwork, ClusterSpec};
use serde_json::json;

#[test]
fn owner_and_management_annotations() {
    let mut m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
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
    let mut m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let running = prod_cluster(ClusterSpec::default());
    let paused = prod_cluster(ClusterSpec {
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
fn a_deletion_cleans_up_waits_while_paused_and_lets_go_when_moved() {
    let mut m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    m.metadata.deletion_timestamp = Some(t(5));
    let paused = prod_cluster(ClusterSpec {
        paused: Some(true),
        ..ClusterSpec::default()
    });
    let observed = |m: &MaasCluster, c: Option<&Cluster>| {
        decide(&Observed {
            maas_cluster: m,
            cluster: c,
        })
    };
    assert!(matches!(observed(&m, None), Step::AwaitChange(_)));
    m.metadata.finalizers = Some(vec![FINALIZER_MAAS_CLUSTER.into()]);
    assert_eq!(observed(&m, None), Step::Cleanup);
    assert!(matches!(observed(&m, Some(&paused)), Step::Pause(_)));
    // clusterctl move: the MaasCluster lives on in the target with its DNS records.
    m.metadata.annotations = Some(
        [(
            capmaas_api::keys::ANNOTATION_DELETE_FOR_MOVE.to_owned(),
            String::new(),
        )]
        .into(),
    );
    assert_eq!(observed(&m, Some(&paused)), Step::MovedAway);
    assert_eq!(observed(&m, None), Step::MovedAway);
}

#[test]
fn endpoint_is_generated_deterministically() {
    let m = prod_maas_cluster(&json!({"dnsDomain": "maas."}));
    let plan = plan_prod(&m, None);
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
    let again = plan_prod(&m, None);
    assert_eq!(plan, again);
    // The Cluster's API server port is honoured.
    let c = prod_cluster(ClusterSpec {
        cluster_network: Some(ClusterNetwork {
            api_server_port: Some(7443),
        }),
        ..ClusterSpec::default()
    });
    assert_eq!(
        plan_endpoint("prod", &m.spec, None, &c)
            .unwrap()
            .endpoint
            .port,
        7443
    );
}

#[test]
fn endpoint_once_set_is_kept_and_still_served_when_ours() {
    let ours = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "prod.maas", "port": 6443}}),
    );
    let plan = plan_prod(&ours, None);
    assert!(!plan.patch_spec);
    assert!(
        plan.dns.is_some(),
        "the record keeps following the machines"
    );

    let users = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb.example.com", "port": 443}}),
    );
    let plan = plan_prod(&users, None);
    assert_eq!(plan.endpoint.host, "lb.example.com");
    assert_eq!(plan.endpoint.port, 443);
    assert!(!plan.patch_spec);
    assert_eq!(plan.dns, None, "a user endpoint gets no DNS record");
    let lb = load_balancer_condition(&plan, None);
    assert_eq!(lb.status, ConditionStatus::True);
    assert_eq!(lb.reason, reason::EXTERNAL_ENDPOINT);
}

/// `prod-maas` with the endpoint `host`, as CAPMAAS leaves it.
fn with_endpoint(host: &str) -> MaasCluster {
    prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": host, "port": 6443}}),
    )
}

#[test]
fn capmaas_generated_name_is_taken_over() {
    let plan = plan_prod(&with_endpoint("prod-1a2b3c.maas"), Some("prod-1a2b3c.maas"));
    assert_eq!(
        plan.dns,
        Some(DnsName {
            name: "prod-1a2b3c".into(),
            domain: "maas".into()
        })
    );
    assert!(plan.adopt);
    assert!(!plan.patch_spec, "CAPMAAS's endpoint stays");
    assert_eq!(plan.endpoint.host, "prod-1a2b3c.maas");

    // The status may differ in case and by a trailing dot; the endpoint's own dot is ignored.
    let plan = plan_prod(
        &with_endpoint("prod-0f9e8d.maas."),
        Some("PROD-0F9E8D.maas"),
    );
    assert!(plan.adopt);
    assert_eq!(plan.dns.unwrap().fqdn(), "prod-0f9e8d.maas");

    // Our own generated name is served but never adopted.
    let plan = plan_prod(&with_endpoint("prod.maas"), Some("prod.maas"));
    assert!(plan.dns.is_some() && !plan.adopt);
}

#[test]
fn capmaas_name_from_the_cluster_is_taken_over_too() {
    let m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let c = prod_cluster(ClusterSpec {
        control_plane_endpoint: Some(ClusterEndpoint {
            host: Some("prod-abcdef.maas".into()),
            port: Some(6443),
        }),
        ..ClusterSpec::default()
    });
    let plan = plan_endpoint("prod", &m.spec, Some("prod-abcdef.maas"), &c).unwrap();
    assert!(plan.adopt && plan.patch_spec);
    assert_eq!(plan.dns.unwrap().name, "prod-abcdef");
}

#[test]
fn names_of_capmaas_shape_are_external_unless_the_status_names_them() {
    let external = |host: &str, status: Option<&str>| {
        let plan = plan_prod(&with_endpoint(host), status);
        assert_eq!(plan.dns, None, "{host} with status {status:?}");
        assert!(!plan.adopt, "{host} with status {status:?}");
        assert_eq!(plan.endpoint.host, host, "the endpoint is kept as it is");
    };
    // The user chose a name of that shape: no status, or the status names something else.
    external("prod-1a2b3c.maas", None);
    external("prod-1a2b3c.maas", Some("prod-999999.maas"));
    external("prod-1a2b3c.maas", Some("prod-1a2b3c.other"));
    // Not CAPMAAS's shape, even when the status names it.
    external("prod-1a2b3.maas", Some("prod-1a2b3.maas"));
    external("prod-1a2b.maas", Some("prod-1a2b.maas"));
    external("prod-1a2b3c4.maas", Some("prod-1a2b3c4.maas"));
    external("prod-1a2g3c.maas", Some("prod-1a2g3c.maas"));
    external("prod-1A2B3C.maas", Some("prod-1A2B3C.maas"));
    external("PROD-1a2b3c.maas", Some("PROD-1a2b3c.maas"));
    external("prod-1a2b3c.MAAS", Some("prod-1a2b3c.MAAS"));
    external("prod-1a2b3c.other", Some("prod-1a2b3c.other"));
    external("prod-1a2b3c.maas.example", Some("prod-1a2b3c.maas.example"));
    external("prod1a2b3c.maas", Some("prod1a2b3c.maas"));
    external("staging-1a2b3c.maas", Some("staging-1a2b3c.maas"));
    external("prod-x-1a2b3c.maas", Some("prod-x-1a2b3c.maas"));
    external("10.0.0.100", Some("10.0.0.100"));
}

#[test]
fn capmaas_shape_needs_a_valid_label_and_domain() {
    assert_eq!(
        DnsName::capmaas("prod", "maas.", "prod-1a2b3c.maas"),
        Some(DnsName {
            name: "prod-1a2b3c".into(),
            domain: "maas".into()
        })
    );
    assert_eq!(DnsName::capmaas("prod", " ", "prod-1a2b3c."), None);
    assert_eq!(DnsName::capmaas("Prod", "maas", "Prod-1a2b3c.maas"), None);
    let long = "a".repeat(57);
    assert!(DnsName::capmaas(&long, "maas", &format!("{long}-1a2b3c.maas")).is_none());
    let longest = "a".repeat(56);
    assert!(DnsName::capmaas(&longest, "maas", &format!("{longest}-1a2b3c.maas")).is_some());
}

#[test]
fn endpoint_from_the_cluster_is_respected() {
    let m = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "", "port": 6443}}),
    );
    let c = prod_cluster(ClusterSpec {
        control_plane_endpoint: Some(ClusterEndpoint {
            host: Some("10.0.0.100".into()),
            port: None,
        }),
        ..ClusterSpec::default()
    });
    let plan = plan_endpoint("prod", &m.spec, None, &c).unwrap();
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
    let m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let err = plan_endpoint(
        "Prod.Team",
        &m.spec,
        None,
        &prod_cluster(ClusterSpec::default()),
    )
    .unwrap_err();
    assert!(err.contains("not a DNS label"), "{err}");
    assert!(DnsName::for_cluster(&"a".repeat(64), "maas").is_err());
    assert!(DnsName::for_cluster("-a", "maas").is_err());
    assert!(DnsName::for_cluster("a", " . ").is_err());
    // With an explicit endpoint the name does not matter.
    let m = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb", "port": 6443}}),
    );
    assert!(
        plan_endpoint(
            "Prod.Team",
            &m.spec,
            None,
            &prod_cluster(ClusterSpec::default())
        )
        .is_ok()
    );
}

#[test]
fn failure_domains_from_zones() {
    let m = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "failureDomains": ["az1", "az2", "az1", " "]}),
    );
    let fds = failure_domains(&m.spec).unwrap();
    let names: Vec<_> = fds.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["az1", "az2"]);
    assert!(fds.iter().all(|f| f.control_plane == Some(true)));
    assert_eq!(
        failure_domains(&prod_maas_cluster(&json!({"dnsDomain": "maas"})).spec),
        None
    );
    assert_eq!(
        failure_domains(
            &prod_maas_cluster(&json!({"dnsDomain": "maas", "failureDomains": []})).spec
        ),
        None
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

#[test]
fn decide_walks_the_contract_in_order() {
    let running = prod_cluster(ClusterSpec::default());
    let paused = prod_cluster(ClusterSpec {
        paused: Some(true),
        ..ClusterSpec::default()
    });
    let mut m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let step = |m: &MaasCluster, c: Option<&Cluster>| {
        decide(&Observed {
            maas_cluster: m,
            cluster: c,
        })
    };
    assert_eq!(step(&m, None), Step::WaitForCluster);
    assert_eq!(step(&m, Some(&running)), Step::AddFinalizer);
    assert!(matches!(step(&m, Some(&paused)), Step::Pause(_)));
    m.metadata.finalizers = Some(vec![FINALIZER_MAAS_CLUSTER.to_owned()]);
    assert_eq!(step(&m, Some(&running)), Step::Apply);

    let mut orphan = m.clone();
    orphan.metadata.owner_references = None;
    assert!(matches!(step(&orphan, None), Step::AwaitChange(_)));
    let mut managed = m.clone();
    managed
        .annotations_mut()
        .insert(ANNOTATION_MANAGED_BY.to_owned(), "other".to_owned());
    assert!(matches!(
        step(&managed, Some(&running)),
        Step::AwaitChange(_)
    ));

    m.metadata.deletion_timestamp = Some(t(5));
    assert_eq!(step(&m, None), Step::Cleanup, "deletion needs no Cluster");
    assert!(matches!(step(&m, Some(&paused)), Step::Pause(_)));
    m.metadata.finalizers = None;
    assert!(matches!(step(&m, Some(&running)), Step::AwaitChange(_)));
}
