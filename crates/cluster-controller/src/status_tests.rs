use super::*;
use crate::fixtures::{plan_prod, prod_maas_cluster, record, t};
use crate::prober::probe_reason;
use capmaas_api::MaasDNSRecordStatus;
use capmaas_api::conditions::DNS_RECORD_SYNCED;
use capmaas_runtime::conditions::get_condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::json;

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
    let m = prod_maas_cluster(&json!({"dnsDomain": "maas"}));
    let plan = plan_prod(&m, None);
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
fn capmaas_dns_name_is_kept_as_capmaas_wrote_it() {
    use capmaas_api::cluster::ClusterNetworkStatus;
    let with_dns_name = |name: &str| MaasClusterStatus {
        network: Some(ClusterNetworkStatus {
            dns_name: Some(name.to_owned()),
        }),
        ..MaasClusterStatus::default()
    };
    let capmaas = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "prod-1a2b3c.maas.", "port": 6443}}),
    );
    let previous = with_dns_name("PROD-1A2B3C.maas.");
    let plan = plan_prod(&capmaas, Some("PROD-1A2B3C.maas."));
    assert!(plan.adopt);
    assert_eq!(
        dns_name(&plan, Some(&previous)).as_deref(),
        Some("PROD-1A2B3C.maas."),
        "byte for byte"
    );
    let mut parts = parts(true, ConditionStatus::True, ConditionStatus::True);
    parts.dns_name = dns_name(&plan, Some(&previous));
    let status = build_status(Some(&previous), parts, &t(1));
    assert_eq!(status.network, previous.network, "reported, not rewritten");

    // Our generated name is reported as we build it; an external endpoint reports none.
    let ours = prod_maas_cluster(&json!({"dnsDomain": "maas."}));
    let plan = plan_prod(&ours, None);
    let stale = with_dns_name("old.maas");
    assert_eq!(dns_name(&plan, Some(&stale)).as_deref(), Some("prod.maas"));
    let external = prod_maas_cluster(
        &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "lb.example.com", "port": 443}}),
    );
    let plan = plan_prod(&external, Some("prod-1a2b3c.maas"));
    assert_eq!(
        dns_name(&plan, Some(&with_dns_name("prod-1a2b3c.maas"))),
        None
    );
}
