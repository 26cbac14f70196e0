use super::*;
use crate::decide::failure_domains;
use crate::fixtures::{prod_cluster, prod_maas_cluster, t};
use crate::prober::ProbeState;
use crate::status::{StatusParts, api_server_condition, build_status, load_balancer_reason};
use capmaas_api::capi::{ClusterEndpoint, ClusterNetwork, ClusterSpec};
use capmaas_runtime::conditions::get_condition;
use serde_json::json;

fn reference(api_group: &str, kind: &str) -> ContractObjectReference {
    ContractObjectReference {
        api_group: api_group.into(),
        kind: kind.into(),
        name: "prod-cp".into(),
    }
}

fn annotated(value: &str) -> BTreeMap<String, String> {
    [(ANNOTATION_HOSTED_CONTROL_PLANE.to_owned(), value.to_owned())].into()
}

fn no_annotations() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn is_hosted(
    annotations: &BTreeMap<String, String>,
    cp: Option<&ContractObjectReference>,
    kinds: &HostedKinds,
) -> bool {
    matches!(hosting(annotations, cp, kinds).unwrap(), Hosting::Hosted(_))
}

#[test]
fn kinds_parse_as_kind_or_kind_dot_group() {
    let k = HostedKind::parse(" StandInControlPlane ").unwrap();
    assert_eq!((k.kind.as_str(), k.group), ("StandInControlPlane", None));
    let k = HostedKind::parse("KamajiControlPlane.controlplane.cluster.x-k8s.io").unwrap();
    assert_eq!(k.group.as_deref(), Some(CONTROL_PLANE_GROUP));
    assert_eq!(
        k.to_string(),
        "KamajiControlPlane.controlplane.cluster.x-k8s.io"
    );
    for bad in [
        "", "1Kind", "a kind", "Kind.", "Kind..io", ".group", "Kind_x",
    ] {
        assert!(HostedKind::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn built_in_kinds_match_in_the_control_plane_group_only() {
    let kinds = HostedKinds::default();
    for kind in [
        "KamajiControlPlane",
        "K0smotronControlPlane",
        "HostedControlPlane",
    ] {
        assert!(
            kinds.find(&reference(CONTROL_PLANE_GROUP, kind)).is_some(),
            "{kind}"
        );
    }
    // Control planes on machines, and HyperShift's kind of the same name in another group.
    for (group, kind) in [
        (CONTROL_PLANE_GROUP, "KubeadmControlPlane"),
        (CONTROL_PLANE_GROUP, "K0sControlPlane"),
        (CONTROL_PLANE_GROUP, "KamajiControlPlaneTemplate"),
        ("hypershift.openshift.io", "HostedControlPlane"),
        (CONTROL_PLANE_GROUP, "kamajicontrolplane"),
    ] {
        assert!(
            kinds.find(&reference(group, kind)).is_none(),
            "{kind}.{group}"
        );
    }
    // A flag entry without a group matches any group; with one, that group only.
    let kinds = HostedKinds::with_extra(&[
        HostedKind::parse("StandInControlPlane").unwrap(),
        HostedKind::parse("VClusterControlPlane.controlplane.example.com").unwrap(),
    ]);
    assert!(
        kinds
            .find(&reference("test.example", "StandInControlPlane"))
            .is_some()
    );
    assert!(
        kinds
            .find(&reference(
                "controlplane.example.com",
                "VClusterControlPlane"
            ))
            .is_some()
    );
    assert!(
        kinds
            .find(&reference("other.example", "VClusterControlPlane"))
            .is_none()
    );
    assert!(
        kinds
            .find(&reference(CONTROL_PLANE_GROUP, "KamajiControlPlane"))
            .is_some()
    );
}

#[test]
fn the_control_plane_ref_kind_decides_unless_the_annotation_does() {
    let kinds = HostedKinds::default();
    let kamaji = reference(CONTROL_PLANE_GROUP, "KamajiControlPlane");
    let kubeadm = reference(CONTROL_PLANE_GROUP, "KubeadmControlPlane");
    let stand_in = reference("test.example", "StandInControlPlane");
    let none = no_annotations();

    assert!(is_hosted(&none, Some(&kamaji), &kinds));
    assert!(!is_hosted(&none, Some(&kubeadm), &kinds));
    assert!(
        !is_hosted(&none, None, &kinds),
        "no controlPlaneRef: as today"
    );
    assert!(!is_hosted(&none, Some(&stand_in), &kinds), "unknown kind");
    let with_flag = HostedKinds::with_extra(&[HostedKind::parse("StandInControlPlane").unwrap()]);
    assert!(is_hosted(&none, Some(&stand_in), &with_flag));

    // The annotation overrules the kind either way.
    assert!(is_hosted(&annotated("true"), Some(&stand_in), &kinds));
    assert!(is_hosted(&annotated("true"), None, &kinds));
    assert!(!is_hosted(&annotated("false"), Some(&kamaji), &kinds));
    let err = hosting(&annotated("yes"), Some(&kamaji), &kinds).unwrap_err();
    assert!(
        err.contains(ANNOTATION_HOSTED_CONTROL_PLANE) && err.contains("\"true\" or \"false\""),
        "{err}"
    );

    let Hosting::Hosted(why) = hosting(&none, Some(&kamaji), &kinds).unwrap() else {
        panic!("hosted");
    };
    assert_eq!(
        why,
        "Cluster spec.controlPlaneRef is KamajiControlPlane prod-cp"
    );
}

#[test]
fn the_control_plane_ref_is_read_from_the_cluster_when_it_names_a_kind() {
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod"},
        "spec": {"controlPlaneRef": {
            "apiGroup": CONTROL_PLANE_GROUP, "kind": "KamajiControlPlane", "name": "prod-cp"
        }}
    }))
    .unwrap();
    assert_eq!(
        control_plane_ref(&cluster),
        Some(reference(CONTROL_PLANE_GROUP, "KamajiControlPlane"))
    );
    let without_kind: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod"},
        "spec": {"controlPlaneRef": {"name": "x"}}
    }))
    .unwrap();
    assert_eq!(control_plane_ref(&without_kind), None);
    assert_eq!(
        control_plane_ref(&prod_cluster(ClusterSpec::default())),
        None
    );
}

#[test]
fn control_planes_on_machines_settle_the_endpoint_exactly_as_before() {
    let specs = [
        json!({"dnsDomain": "maas"}),
        json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "prod.maas", "port": 6443}}),
        json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb.example.com", "port": 443}}),
    ];
    let clusters = [
        prod_cluster(ClusterSpec::default()),
        prod_cluster(ClusterSpec {
            control_plane_endpoint: Some(ClusterEndpoint {
                host: Some("10.0.0.100".into()),
                port: None,
            }),
            ..ClusterSpec::default()
        }),
    ];
    for spec in &specs {
        let mc = prod_maas_cluster(spec);
        for cluster in &clusters {
            let step = settle_endpoint("prod", &mc.spec, None, cluster, &Hosting::Machines);
            let before = plan_endpoint("prod", &mc.spec, None, cluster);
            assert_eq!(step, before.map(EndpointStep::Settled), "{spec}");
        }
    }
    // A name that is not a DNS label stays a spec error.
    let mc = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let cluster = prod_cluster(ClusterSpec::default());
    assert!(settle_endpoint("Prod.Team", &mc.spec, None, &cluster, &Hosting::Machines).is_err());
}

#[test]
fn a_hosted_control_plane_waits_for_its_providers_endpoint() {
    let hosted = Hosting::Hosted("KamajiControlPlane prod-cp".into());
    let bare = prod_cluster(ClusterSpec::default());
    let mc = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let step = settle_endpoint("prod", &mc.spec, None, &bare, &hosted).unwrap();
    assert_eq!(
        step,
        EndpointStep::WaitForProvider("KamajiControlPlane prod-cp".into())
    );
    // Even a cluster name that could not be a DNS label only waits: no name is generated.
    let step = settle_endpoint("Prod.Team", &mc.spec, None, &bare, &hosted).unwrap();
    assert!(matches!(step, EndpointStep::WaitForProvider(_)));
    // An empty host is no endpoint.
    let empty = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "", "port": 6443}}),
    );
    let step = settle_endpoint("prod", &empty.spec, None, &bare, &hosted).unwrap();
    assert!(matches!(step, EndpointStep::WaitForProvider(_)));

    // Set by the provider on the MaasCluster: kept, never served by a DNS record, even when it
    // happens to be the name this controller would have generated.
    for host in ["10.20.0.5", "prod.maas"] {
        let set = prod_maas_cluster(
            &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": host, "port": 6443}}),
        );
        let EndpointStep::Settled(plan) =
            settle_endpoint("prod", &set.spec, Some("prod.maas"), &bare, &hosted).unwrap()
        else {
            panic!("settled");
        };
        assert_eq!(plan.endpoint.host, host);
        assert!(
            !plan.patch_spec && plan.dns.is_none() && !plan.adopt,
            "{host}"
        );
    }

    // Set on the Cluster: copied, the port defaulting to apiServerPort, then 6443.
    let on_cluster = |port: Option<i32>, api_server_port: Option<i32>| {
        prod_cluster(ClusterSpec {
            control_plane_endpoint: Some(ClusterEndpoint {
                host: Some("tenant.kamaji.example".into()),
                port,
            }),
            cluster_network: Some(ClusterNetwork { api_server_port }),
            ..ClusterSpec::default()
        })
    };
    for (port, api_server_port, expected) in [
        (Some(443), Some(7443), 443),
        (None, Some(7443), 7443),
        (None, None, 6443),
    ] {
        let cluster = on_cluster(port, api_server_port);
        let EndpointStep::Settled(plan) =
            settle_endpoint("prod", &mc.spec, None, &cluster, &hosted).unwrap()
        else {
            panic!("settled");
        };
        assert_eq!(
            plan.endpoint,
            ApiEndpoint {
                host: "tenant.kamaji.example".into(),
                port: expected
            }
        );
        assert!(plan.patch_spec && plan.dns.is_none());
    }
    // The MaasCluster's own endpoint wins over the Cluster's.
    let own = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "10.20.0.5", "port": 6443}}),
    );
    let plan = provider_endpoint(&own.spec, &on_cluster(None, None)).unwrap();
    assert_eq!(plan.endpoint.host, "10.20.0.5");
    assert!(!plan.patch_spec);
    // A Cluster endpoint without a host is no endpoint.
    let hostless = prod_cluster(ClusterSpec {
        control_plane_endpoint: Some(ClusterEndpoint {
            host: None,
            port: Some(6443),
        }),
        ..ClusterSpec::default()
    });
    assert_eq!(provider_endpoint(&mc.spec, &hostless), None);
}

#[test]
fn while_waiting_failure_domains_are_published_and_nothing_is_provisioned() {
    let mc = prod_maas_cluster(&json!({"dnsDomain": "maas", "failureDomains": ["az1", "az2"]}));
    let waiting = waiting_condition("KamajiControlPlane prod-cp", "prod");
    assert_eq!(waiting.status, ConditionStatus::False);
    assert_eq!(waiting.reason, "WaitingForControlPlaneEndpoint");
    assert!(
        waiting.message.contains("spec.controlPlaneEndpoint")
            && waiting.message.contains("Cluster prod")
            && waiting.message.contains("KamajiControlPlane prod-cp"),
        "{}",
        waiting.message
    );
    let parts = StatusParts {
        provisioned: false,
        dns_name: None,
        failure_domains: failure_domains(&mc.spec),
        load_balancer: waiting,
        api_server: api_server_condition(&ProbeState::Pending),
        generation: Some(1),
    };
    let status = build_status(None, parts, &t(10));
    assert_eq!(status.ready, None);
    assert_eq!(status.initialization, None);
    assert_eq!(status.network, None);
    let names: Vec<_> = status
        .failure_domains
        .iter()
        .flatten()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["az1", "az2"], "workers still go to MAAS zones");
    let conditions = status.conditions.as_deref().unwrap();
    let ready = get_condition(conditions, cond::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "WaitingForControlPlaneEndpoint")
    );
    assert_eq!(
        load_balancer_reason(Some(&status)),
        Some(reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT)
    );
    assert_eq!(load_balancer_reason(None), None);
}
