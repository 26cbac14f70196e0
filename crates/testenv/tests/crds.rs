//! Every kind of `capmaas-api` against the real API server: valid examples are accepted
//! (and defaulted), each validation rule rejects its invalid example with a message naming
//! the field, status is only writable through the status subresource, finalizers block
//! deletion, owner references are garbage-collected, and kubectl shows the printer columns.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmaas_api::examples::{defaulted_examples, invalid_examples, valid_examples};
use capmaas_testenv::TestEnv;
use capmaas_testenv::objects::{Answer, create_or_update, json_contains};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{ApiResource, pinned_kind};
use serde_json::{Value, json};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
const VERSION: &str = "v1beta1";

async fn api_for(client: &kube::Client, ns: &str, kind: &str) -> (Api<DynamicObject>, ApiResource) {
    let (resource, caps) = pinned_kind(client, &GroupVersionKind::gvk(GROUP, VERSION, kind))
        .await
        .unwrap_or_else(|e| panic!("kind {kind} is not served: {e}"));
    let api = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => Api::namespaced_with(client.clone(), ns, &resource),
    };
    (api, resource)
}

fn to_dynamic(value: &Value) -> DynamicObject {
    serde_json::from_value(value.clone()).unwrap()
}

#[tokio::test]
async fn every_valid_example_is_accepted_and_defaulted() {
    let env = TestEnv::our_crds_only().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("valid").await.unwrap();

    let examples = valid_examples();
    let kinds: std::collections::BTreeSet<&str> = examples.iter().map(|e| e.kind).collect();
    assert_eq!(kinds.len(), 14, "one example per kind at least: {kinds:?}");
    for example in &examples {
        let (api, _) = api_for(&client, &ns, example.kind).await;
        let created = api
            .create(&PostParams::default(), &to_dynamic(&example.object))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "valid example {} ({}) was rejected: {e}",
                    example.name, example.kind
                )
            });
        let stored = serde_json::to_value(&created).unwrap();
        assert!(
            json_contains(&stored["spec"], &example.object["spec"]),
            "{}: the API server changed the spec:\nsent {}\nstored {}",
            example.name,
            example.object["spec"],
            stored["spec"]
        );
    }

    for example in defaulted_examples() {
        let (api, _) = api_for(&client, &ns, example.kind).await;
        let created = api
            .create(&PostParams::default(), &to_dynamic(&example.object))
            .await
            .unwrap_or_else(|e| panic!("defaulting example {} was rejected: {e}", example.name));
        let stored = serde_json::to_value(&created).unwrap();
        assert!(
            json_contains(&stored["spec"], &example.defaulted["spec"]),
            "{}: defaults not applied:\nexpected {}\nstored {}",
            example.name,
            example.defaulted["spec"],
            stored["spec"]
        );
    }
}

#[tokio::test]
async fn every_validation_rule_rejects_its_example_naming_the_field() {
    let env = TestEnv::our_crds_only().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("invalid").await.unwrap();

    let cases = invalid_examples();
    assert!(
        cases.len() >= 30,
        "expected a case per rule, got {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let answer = create_or_update(&client, &ns, &case.object, case.update_from.as_ref()).await;
        match answer {
            Ok(Answer::Accepted(_)) => failures.push(format!(
                "{}: accepted, expected a rejection naming {}",
                case.name, case.expected_field
            )),
            Ok(Answer::Rejected(status)) => {
                if !(status.message.contains(case.expected_field)
                    && status.message.contains(case.expected_message))
                {
                    failures.push(format!(
                        "{}: message does not contain {:?} and {:?}: {}",
                        case.name, case.expected_field, case.expected_message, status.message
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn status_subresource_finalizers_and_garbage_collection() {
    let env = TestEnv::builder().capi_crds(false).start().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("lifecycle").await.unwrap();
    let examples = valid_examples();
    let host = examples.iter().find(|e| e.kind == "MaasHost").unwrap();
    let (hosts, _) = api_for(&client, &ns, "MaasHost").await;

    // A status sent with the main resource is dropped; the status subresource writes it.
    let mut with_status = host.object.clone();
    with_status["metadata"]["name"] = json!("status-host");
    with_status["status"] = json!({"hostname": "from-main-resource"});
    let created = hosts
        .create(&PostParams::default(), &to_dynamic(&with_status))
        .await
        .unwrap();
    assert!(
        created
            .data
            .get("status")
            .is_none_or(|s| s.get("hostname").is_none()),
        "status ignored on create"
    );
    let apply = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "MaasHost",
        "status": {"hostname": "node-1"}
    });
    let patched = hosts
        .patch_status(
            "status-host",
            &PatchParams::apply("testenv").force(),
            &Patch::Apply(&apply),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["hostname"], "node-1");
    let spec_patch =
        json!({"status": {"hostname": "sneaky"}, "metadata": {"labels": {"touched": "yes"}}});
    let after = hosts
        .patch(
            "status-host",
            &PatchParams::default(),
            &Patch::Merge(&spec_patch),
        )
        .await
        .unwrap();
    assert_eq!(
        after.data["status"]["hostname"], "node-1",
        "status is not writable through the main resource"
    );

    // A finalizer blocks deletion until it is removed.
    let mut guarded = host.object.clone();
    guarded["metadata"]["name"] = json!("guarded-host");
    guarded["metadata"]["finalizers"] = json!(["maashost.infrastructure.cluster.x-k8s.io"]);
    hosts
        .create(&PostParams::default(), &to_dynamic(&guarded))
        .await
        .unwrap();
    hosts
        .delete("guarded-host", &DeleteParams::default())
        .await
        .unwrap();
    let pending = hosts.get("guarded-host").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    let release = json!({"metadata": {"finalizers": null}});
    hosts
        .patch(
            "guarded-host",
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .unwrap();
    assert!(hosts.get_opt("guarded-host").await.unwrap().is_none());

    // Owner references: the dependent goes with its owner (kube-controller-manager's GC).
    let owner = hosts.get("status-host").await.unwrap();
    let mut dependent = examples
        .iter()
        .find(|e| e.kind == "MaasDNSRecord")
        .unwrap()
        .object
        .clone();
    dependent["metadata"]["name"] = json!("owned-record");
    dependent["metadata"]["ownerReferences"] = json!([{
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "MaasHost",
        "name": "status-host", "uid": owner.metadata.uid.clone().unwrap()
    }]);
    let (records, _) = api_for(&client, &ns, "MaasDNSRecord").await;
    records
        .create(&PostParams::default(), &to_dynamic(&dependent))
        .await
        .unwrap();
    hosts
        .delete("status-host", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while records.get_opt("owned-record").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the owned MaasDNSRecord was not garbage-collected"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn kubectl_shows_printer_columns_and_the_cluster_api_category() {
    let env = TestEnv::our_crds_only().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("kubectl").await.unwrap();
    for example in valid_examples()
        .iter()
        .filter(|e| e.kind == "MaasHost" || e.kind == "MaasMachine")
    {
        let (api, _) = api_for(&client, &ns, example.kind).await;
        api.create(&PostParams::default(), &to_dynamic(&example.object))
            .await
            .unwrap();
    }
    let run = |args: &[&str]| {
        let output = env
            .kubectl()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running kubectl: {e}"));
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };

    for (plural, kind) in [("maashosts", "MaasHost"), ("maasmachines", "MaasMachine")] {
        let crd_columns = env_columns(&client, plural).await;
        let table = run(&["get", plural, "-n", &ns]);
        let header = table.lines().next().unwrap_or_default();
        for column in &crd_columns {
            assert!(
                header.contains(&column.to_uppercase()),
                "{kind}: column {column} missing from kubectl's header: {header}"
            );
        }
        assert!(table.lines().count() >= 2, "{kind}: no rows:\n{table}");
    }
    let host_columns = env_columns(&client, "maashosts")
        .await
        .join(" ")
        .to_lowercase();
    for wanted in [
        "system", "status", "power", "consumer", "zone", "pool", "cpu", "memory", "age",
    ] {
        assert!(
            host_columns.contains(wanted),
            "MaasHost printer columns lack {wanted}: {host_columns}"
        );
    }

    let category = run(&["get", "cluster-api", "-n", &ns, "-o", "name"]);
    assert!(
        category.contains("maashost.infrastructure.cluster.x-k8s.io/"),
        "{category}"
    );
    assert!(
        category.contains("maasmachine.infrastructure.cluster.x-k8s.io/"),
        "{category}"
    );
}

/// Printer column names of a CRD, plus the implicit NAME.
async fn env_columns(client: &kube::Client, plural: &str) -> Vec<String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&format!("{plural}.{GROUP}"))
        .await
        .unwrap();
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == VERSION)
        .unwrap();
    let mut columns = vec!["Name".to_owned()];
    columns.extend(
        version
            .additional_printer_columns
            .iter()
            .flatten()
            .filter(|c| c.priority.unwrap_or(0) == 0)
            .map(|c| c.name.clone()),
    );
    columns
}
