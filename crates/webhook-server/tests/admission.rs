//! webhook-server against the real API server, registered with the webhook configurations that
//! ship in `deploy/`: valid objects pass and are defaulted, every rule CEL holds still holds,
//! the cross-object rules reject with the field named, warnings reach kubectl, and a renewed
//! certificate is served without a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

mod common;

use capmaas_api::examples::{defaulted_examples, invalid_examples, valid_examples};
use capmaas_testenv::objects::{
    Answer, create_or_update, json_contains, kind_api, load_yaml_documents,
};
use capmaas_testenv::{Authority, TestEnv, WebhookServing, repo_root};
use common::{API_VERSION, Served, object, serve};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use webhook_server::manifests::MANIFEST_PATH;

async fn accepted(env: &TestEnv, ns: &str, object: &Value) -> Value {
    match create_or_update(&env.client(), ns, object, None)
        .await
        .unwrap()
    {
        Answer::Accepted(stored) => serde_json::to_value(stored).unwrap(),
        Answer::Rejected(status) => panic!(
            "{} was rejected: {}",
            object["metadata"]["name"], status.message
        ),
    }
}

async fn rejected(env: &TestEnv, ns: &str, object: &Value, update_from: Option<&Value>) -> String {
    match create_or_update(&env.client(), ns, object, update_from)
        .await
        .unwrap()
    {
        Answer::Accepted(_) => panic!("{} was accepted", object["metadata"]["name"]),
        Answer::Rejected(status) => status.message,
    }
}

/// The webhook configuration reaches the API server's cache a moment after it is written.
async fn until_webhook_answers(env: &TestEnv, ns: &str) {
    let pool = object(
        "MaasIPPool",
        "probe",
        json!({"namePrefix": "probe", "pools": [{"start": "10.99.0.1", "end": "10.99.0.1", "gateway": "10.99.0.1"}]}),
    );
    for _ in 0..100 {
        if let Answer::Rejected(status) = create_or_update(&env.client(), ns, &pool, None)
            .await
            .unwrap()
            && status.message.contains("admission webhook")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the webhook was never called");
}

#[tokio::test]
async fn admission_through_the_api_server() {
    let served = serve().await;
    let env = &served.env;
    let ns = env.create_namespace("webhooks").await.unwrap();
    until_webhook_answers(env, &ns).await;

    valid_objects_pass_and_are_defaulted(env).await;
    every_schema_rule_still_rejects(env).await;
    cross_object_rules_name_the_field(env, &ns).await;
    updates_and_deletes_name_the_field(env, &ns).await;
    templates_change_only_in_clusterclass_dry_runs(env, &ns).await;
    warnings_reach_kubectl(env, &ns);
    a_renewed_certificate_is_served_without_a_restart(served, &ns).await;
}

async fn valid_objects_pass_and_are_defaulted(env: &TestEnv) {
    let ns = env.create_namespace("valid").await.unwrap();
    for example in valid_examples() {
        let stored = accepted(env, &ns, &example.object).await;
        assert!(
            json_contains(&stored["spec"], &example.object["spec"]),
            "{}: spec changed",
            example.name
        );
    }
    let ns = env.create_namespace("defaulted").await.unwrap();
    for example in defaulted_examples() {
        let stored = accepted(env, &ns, &example.object).await;
        assert!(
            json_contains(&stored["spec"], &example.defaulted["spec"]),
            "{}: {}",
            example.name,
            stored["spec"]
        );
    }
    // The webhook's own defaults (docs/crd-reference.md lists them beside the fields).
    let pool = accepted(
        env,
        &ns,
        &object(
            "MaasIPPool",
            "workers",
            json!({"clusterName": "prod", "pools": [{"subnet": "10.77.0.0/24"}]}),
        ),
    )
    .await;
    assert_eq!(pool["spec"]["namePrefix"], "workers");
    assert_eq!(
        pool["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        "prod"
    );
    let cluster = accepted(
        env,
        &ns,
        &object(
            "MaasCluster",
            "portless",
            json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "api.prod.maas"}}),
        ),
    )
    .await;
    assert_eq!(cluster["spec"]["controlPlaneEndpoint"]["port"], 6443);
}

/// Invalid examples the webhook legitimately lets through: it fills in what they leave out.
const DEFAULTED_BY_THE_WEBHOOK: [&str; 1] = ["ippool-nameprefix-missing"];

async fn every_schema_rule_still_rejects(env: &TestEnv) {
    let shared = env.create_namespace("invalid").await.unwrap();
    let mut failures = Vec::new();
    for case in invalid_examples() {
        // An update case leaves its original behind; alone in a namespace, it cannot collide
        // with the next case's (two pools with the same ranges, say).
        let ns = match case.update_from {
            Some(_) => env.create_namespace("invalid-update").await.unwrap(),
            None => shared.clone(),
        };
        let expect_accepted = DEFAULTED_BY_THE_WEBHOOK.contains(&case.name);
        match create_or_update(&env.client(), &ns, &case.object, case.update_from.as_ref()).await {
            Ok(Answer::Rejected(status))
                if !expect_accepted
                    && status.message.contains(case.expected_field)
                    && status.message.contains(case.expected_message) => {}
            Ok(Answer::Accepted(_)) if expect_accepted => {}
            Ok(Answer::Rejected(status)) => {
                failures.push(format!("{}: {}", case.name, status.message));
            }
            Ok(Answer::Accepted(_)) => failures.push(format!("{}: accepted", case.name)),
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// (object, objects created first, field the rejection names, text it contains)
fn cross_object_cases() -> Vec<(Value, Vec<Value>, &'static str, &'static str)> {
    let range = |start: &str, end: &str| json!({"start": start, "end": end, "prefix": 24, "gateway": "10.40.0.1"});
    vec![
        (
            object(
                "MaasIPPool",
                "ranges-overlap",
                json!({"namePrefix": "a", "pools": [range("10.40.0.10", "10.40.0.20"), range("10.40.0.15", "10.40.0.30")]}),
            ),
            vec![],
            "spec.pools[1]",
            "spec.pools[0]",
        ),
        (
            object(
                "MaasIPPool",
                "holds-gateway",
                json!({"namePrefix": "b", "pools": [range("10.40.0.1", "10.40.0.5")]}),
            ),
            vec![],
            "spec.pools[0]",
            "gateway",
        ),
        (
            object(
                "MaasIPPool",
                "exclusion-outside",
                json!({"namePrefix": "c", "pools": [range("10.40.0.100", "10.40.0.110")], "exclusions": ["10.41.0.7"]}),
            ),
            vec![],
            "spec.exclusions[0]",
            "10.41.0.7",
        ),
        (
            object(
                "MaasIPPool",
                "second-pool",
                json!({"namePrefix": "e", "pools": [range("10.40.0.150", "10.40.0.160")]}),
            ),
            vec![object(
                "MaasIPPool",
                "first-pool",
                json!({"namePrefix": "d", "pools": [range("10.40.0.140", "10.40.0.155")]}),
            )],
            "spec.pools[0]",
            "first-pool",
        ),
        (
            object(
                "MaasDataTemplate",
                "foreign-pool-kind",
                json!({"metaData": {"ipAddressesFromPool": [{"key": "ip", "name": "x", "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasHost"}]}}),
            ),
            vec![],
            "spec.metaData.ipAddressesFromPool[0].kind",
            "MaasHost",
        ),
        (
            object(
                "MaasMachine",
                "bad-selector",
                json!({"minCPU": 1, "minMemory": 1024, "image": "ubuntu/jammy", "hostSelector": {"matchLabels": {"rack a": "1"}}}),
            ),
            vec![],
            "spec.hostSelector.matchLabels[rack a]",
            "name part",
        ),
        (
            object(
                "MaasData",
                "wrong-name",
                json!({"index": 3, "template": {"name": "t"}, "claim": {"name": "c"}}),
            ),
            vec![],
            "metadata.name",
            "t-3",
        ),
    ]
}

async fn cross_object_rules_name_the_field(env: &TestEnv, ns: &str) {
    let mut failures = Vec::new();
    for (object, before, field, text) in cross_object_cases() {
        for other in &before {
            accepted(env, ns, other).await;
        }
        let message = rejected(env, ns, &object, None).await;
        if !(message.contains(field)
            && message.contains(text)
            && message.contains("admission webhook"))
        {
            failures.push(format!(
                "{}: expected {field:?} and {text:?} in: {message}",
                object["metadata"]["name"]
            ));
        }
    }
    // One MAAS resource pool, imported from two namespaces.
    let other_ns = env.create_namespace("team-b").await.unwrap();
    accepted(
        env,
        ns,
        &object(
            "MaasInventory",
            "racks",
            json!({"resourcePool": "webhook-racks"}),
        ),
    )
    .await;
    let message = rejected(
        env,
        &other_ns,
        &object(
            "MaasInventory",
            "racks",
            json!({"resourcePool": "webhook-racks", "zones": ["z1"]}),
        ),
        None,
    )
    .await;
    if !(message.contains("spec.resourcePool") && message.contains(&format!("{ns}/racks"))) {
        failures.push(format!("inventory double import: {message}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn updates_and_deletes_name_the_field(env: &TestEnv, ns: &str) {
    let client = env.client();
    // A machine whose host is claimed keeps the fields that chose it.
    let machine = object(
        "MaasMachine",
        "claimed",
        json!({"minCPU": 1, "minMemory": 1024, "image": "ubuntu/jammy", "tags": ["gpu"]}),
    );
    accepted(env, ns, &machine).await;
    let machines = kind_api(&client, ns, API_VERSION, "MaasMachine")
        .await
        .unwrap();
    machines
        .patch_status(
            "claimed",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"hostRef": {"name": "host-1"}}})),
        )
        .await
        .unwrap();
    let patch = machines
        .patch(
            "claimed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tags": ["ssd"]}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        patch.contains("spec.tags: Forbidden: immutable once a host is claimed (MaasHost host-1)"),
        "{patch}"
    );
    // Labels still change: metadata-only updates are never refused, and the API server does
    // not even ask (the match condition), while spec changes are asked about.
    let calls_before = machine_update_reviews(env).await;
    assert!(calls_before >= 1, "the refused spec change was reviewed");
    machines
        .patch(
            "claimed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    assert_eq!(machine_update_reviews(env).await, calls_before);
    machines
        .patch(
            "claimed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tags": ["nvme"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(machine_update_reviews(env).await, calls_before + 1);

    // A consumed host does not change hands, and is deleted only by `clusterctl move`.
    let consumer = |name: &str, uid: &str| json!({"apiVersion": API_VERSION, "kind": "MaasMachine", "name": name, "uid": uid});
    let host = object(
        "MaasHost",
        "host-1",
        json!({"systemID": "abc123", "consumerRef": consumer("claimed", "u1")}),
    );
    accepted(env, ns, &host).await;
    let hosts = kind_api(&client, ns, API_VERSION, "MaasHost")
        .await
        .unwrap();
    let switch = hosts
        .patch(
            "host-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"consumerRef": consumer("other", "u2")}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        switch.contains(
            "spec.consumerRef: Forbidden: the host is consumed by MaasMachine claimed (uid u1)"
        ),
        "{switch}"
    );
    let delete = hosts
        .delete("host-1", &DeleteParams::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(delete.contains("spec.consumerRef: Forbidden"), "{delete}");
    hosts
        .patch("host-1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"clusterctl.cluster.x-k8s.io/delete-for-move": ""}}})))
        .await
        .unwrap();
    hosts
        .delete("host-1", &DeleteParams::default())
        .await
        .unwrap();
}

/// A template's `spec.template` is frozen, except in the server-side-apply dry runs by which
/// ClusterClass's topology controller learns that a template would change (it then creates a
/// new one): those carry `topology.cluster.x-k8s.io/dry-run` and must not be refused.
async fn templates_change_only_in_clusterclass_dry_runs(env: &TestEnv, ns: &str) {
    let client = env.client();
    let spec =
        json!({"template": {"spec": {"minCPU": 1, "minMemory": 1024, "image": "ubuntu/jammy"}}});
    accepted(env, ns, &object("MaasMachineTemplate", "frozen", spec)).await;
    let templates = kind_api(&client, ns, API_VERSION, "MaasMachineTemplate")
        .await
        .unwrap();
    let changed = Patch::Merge(json!({"spec": {"template": {"spec": {"image": "ubuntu/noble"}}}}));
    let refused = templates
        .patch("frozen", &PatchParams::default(), &changed)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("spec.template: Forbidden: spec.template is immutable"),
        "{refused}"
    );
    let apply = |annotated: bool| {
        let mut metadata = json!({"name": "frozen"});
        if annotated {
            metadata["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
        }
        Patch::Apply(json!({
            "apiVersion": API_VERSION, "kind": "MaasMachineTemplate", "metadata": metadata,
            "spec": {"template": {"spec": {"minCPU": 1, "minMemory": 1024, "image": "ubuntu/noble"}}},
        }))
    };
    let mut dry_run = PatchParams::apply("capi-topology").force();
    dry_run.dry_run = true;
    let would_be = templates
        .patch("frozen", &dry_run, &apply(true))
        .await
        .unwrap();
    assert_eq!(
        would_be.data["spec"]["template"]["spec"]["image"],
        "ubuntu/noble"
    );
    // kubectl's --dry-run=server is judged as the update itself.
    let unannotated = templates
        .patch("frozen", &dry_run, &apply(false))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        unannotated.contains("spec.template is immutable"),
        "{unannotated}"
    );
    // Nothing was stored by the dry runs.
    let stored = templates.get("frozen").await.unwrap();
    assert_eq!(
        stored.data["spec"]["template"]["spec"]["image"],
        "ubuntu/jammy"
    );
}

/// UPDATE reviews the API server sent to the MaasMachine validating webhook so far
/// (`apiserver_admission_webhook_request_total`).
async fn machine_update_reviews(env: &TestEnv) -> u64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = env.client().request_text(request).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_admission_webhook_request_total{"))
        .filter(|l| l.contains("name=\"validation.maasmachine.infrastructure.cluster.x-k8s.io\""))
        .filter(|l| l.contains("operation=\"UPDATE\""))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<u64>().ok()))
        .sum()
}

fn warnings_reach_kubectl(env: &TestEnv, ns: &str) {
    let manifest = object(
        "MaasRemediationTemplate",
        "impatient",
        json!({"template": {"spec": {"strategy": {"type": "Reboot", "retryLimit": 1, "timeoutSeconds": 120}}}}),
    );
    let path = env.kubeconfig_path().with_file_name("impatient.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let output = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            &env.kubeconfig_path().display().to_string(),
            "-n",
            ns,
            "create",
            "-f",
            &path.display().to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: spec.template.spec.strategy.timeoutSeconds: 120s"),
        "{stderr}"
    );
}

async fn a_renewed_certificate_is_served_without_a_restart(mut served: Served, ns: &str) {
    let pid = served.process.pid();
    // A renewal from a new CA: only the renewed certificate satisfies the new caBundle.
    let ca = Authority::new("renewed-webhook-ca").unwrap();
    let renewed = WebhookServing {
        port: served.serving.port,
        serving: ca.serving_cert().unwrap(),
        ca_pem: ca.cert_pem().to_owned(),
    };
    renewed
        .write_files(&served.dir.path().join("certs"))
        .unwrap();
    let configurations = load_yaml_documents(&repo_root().join(MANIFEST_PATH)).unwrap();
    served
        .env
        .register_webhooks(&configurations, &renewed)
        .await
        .unwrap();
    let host = object(
        "MaasHost",
        "renewal-probe",
        json!({"systemID": "renew", "provisioning": {"image": "ubuntu/jammy", "hostname": "Bad_Name"}}),
    );
    let mut last = String::new();
    for _ in 0..150 {
        last = rejected(&served.env, ns, &host, None).await;
        if last.contains("spec.provisioning.hostname") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        last.contains("spec.provisioning.hostname"),
        "the renewed certificate was not served: {last}"
    );
    served.process.ensure_running().unwrap();
    assert_eq!(served.process.pid(), pid, "no restart");
    assert!(
        served
            .process
            .log_tail(200)
            .contains("serving certificate reloaded")
    );
}
