//! The controller kit against a real kube-apiserver (capmaas-testenv): guarded finalizer
//! patches, the resourceVersion-guarded status apply, and guarded workload clients.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_runtime::apply_status_at;
use capmaas_runtime::controller::workload::{WorkloadClients, WorkloadError, reason};
use capmaas_runtime::controller::{Events, finalizer};
use capmaas_testenv::TestEnv;
use capmaas_testenv::objects::kubeconfig_secret;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const MANAGER: &str = "capmaas-kit-test";

/// Creates the empty ConfigMap `name`.
async fn create_config_map(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap()
}

/// Adding tests the list that was read: a stale object loses against a concurrent writer
/// instead of overwriting its finalizer; removal of the last finalizer of a deleted object
/// reports the object as gone.
async fn finalizers(client: &Client, ns: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let stale = create_config_map(&api, "f").await;
    let ours = finalizer::add(&api, &stale, "example.com/ours", MANAGER)
        .await
        .unwrap();
    assert!(finalizer::has(&ours, "example.com/ours"));
    let err = finalizer::add(&api, &stale, "example.com/other", MANAGER)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let both = finalizer::add(&api, &ours, "example.com/other", MANAGER)
        .await
        .unwrap();
    assert_eq!(
        both.finalizers(),
        [
            "example.com/ours".to_owned(),
            "example.com/other".to_owned()
        ]
    );
    let again = finalizer::add(&api, &both, "example.com/ours", MANAGER)
        .await
        .unwrap();
    assert_eq!(
        again.resource_version(),
        both.resource_version(),
        "no write"
    );

    api.delete("f", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("f").await.unwrap();
    let left = finalizer::remove(&api, &deleting, "example.com/other", MANAGER)
        .await
        .unwrap()
        .expect("one finalizer left");
    assert!(!finalizer::has(&left, "example.com/other"));
    let err = finalizer::remove(&api, &deleting, "example.com/other", MANAGER)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "a stale read removes nothing: {err}");
    finalizer::remove(&api, &left, "example.com/ours", MANAGER)
        .await
        .unwrap();
    assert!(api.get_opt("f").await.unwrap().is_none(), "deleted");
    let gone = finalizer::remove(&api, &left, "example.com/ours", MANAGER)
        .await
        .unwrap();
    assert!(gone.is_none(), "an object already gone is not an error");
}

/// `apply_status_at` refuses to write a status computed from an outdated object.
async fn guarded_status(client: &Client) {
    let api: Api<Namespace> = Api::all(client.clone());
    let name = "kit-status";
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let created = api.create(&PostParams::default(), &ns).await.unwrap();
    let rv = created.resource_version().unwrap();
    let status = json!({"phase": "Active"});
    let fresh = apply_status_at(&api, name, MANAGER, &status, &rv)
        .await
        .unwrap();
    let err = apply_status_at(&api, name, MANAGER, &status, &rv)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    apply_status_at(
        &api,
        name,
        MANAGER,
        &status,
        &fresh.resource_version().unwrap(),
    )
    .await
    .unwrap();
}

/// A usable kubeconfig gives a working client; a rotated Secret is checked again (an exec
/// plugin is refused and never runs); a deleted one is missing.
async fn workload_clients(client: &Client, ns: &str, env: &TestEnv) {
    let dir = tempfile::tempdir().unwrap();
    let (exec, marker) = env.exec_plugin_kubeconfig_yaml(dir.path()).unwrap();
    let good = env.kubeconfig_yaml().unwrap();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let clients = WorkloadClients::new(client.clone());
    let Err(missing) = clients.client(ns, "w").await else {
        panic!("no Secret yet")
    };
    assert!(
        matches!(missing, WorkloadError::Missing { .. }),
        "{missing}"
    );

    secrets
        .create(
            &PostParams::default(),
            &kubeconfig_secret("w", good.as_bytes()),
        )
        .await
        .unwrap();
    let workload = clients.client(ns, "w").await.unwrap();
    workload.apiserver_version().await.unwrap();
    clients
        .client(ns, "w")
        .await
        .unwrap()
        .apiserver_version()
        .await
        .unwrap();

    let mut rotated = secrets.get("w-kubeconfig").await.unwrap();
    rotated.data = kubeconfig_secret("w", exec.as_bytes()).data;
    secrets
        .replace("w-kubeconfig", &PostParams::default(), &rotated)
        .await
        .unwrap();
    let Err(refused) = clients.client(ns, "w").await else {
        panic!("an exec plugin must be refused")
    };
    assert_eq!(refused.reason(), reason::KUBECONFIG_REFUSED, "{refused}");
    assert!(
        refused.to_string().contains("exec credential plugin"),
        "{refused}"
    );
    assert!(!marker.exists(), "the exec plugin must never run");
}

/// The same Event again is the next of its series; the same reason with another note is an
/// Event of its own, showing that note (kube's recorder folded it into the first one).
async fn event_series(client: &Client, ns: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = create_config_map(&api, "watched").await;
    let events = Events::new(client.clone(), "kit-test");
    let copy = events.clone();
    events.warning(&cm, "MachinesSkipped", "skipped abc").await;
    copy.warning(&cm, "MachinesSkipped", "skipped abc").await;
    events
        .warning(&cm, "MachinesSkipped", "skipped abc, def")
        .await;
    events.warning(&cm, "MachinesSkipped", "skipped abc").await;
    events.normal(&cm, "MachinesSkipped", "skipped abc").await;
    let listed = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut seen: Vec<(String, String, i32)> = listed
        .items
        .iter()
        .map(|e| {
            assert_eq!(e.reporting_controller.as_deref(), Some("capmaas-kit-test"));
            assert_eq!(e.regarding.as_ref().and_then(|r| r.uid.clone()), cm.uid());
            (
                e.type_.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
                e.series.as_ref().map_or(1, |s| s.count),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("Normal".to_owned(), "skipped abc".to_owned(), 1),
            ("Warning".to_owned(), "skipped abc".to_owned(), 3),
            ("Warning".to_owned(), "skipped abc, def".to_owned(), 1),
        ]
    );
}

#[tokio::test]
async fn kit_against_a_real_api_server() {
    let env = TestEnv::api_server_only().await.unwrap();
    let client = env.client();
    let (a, b, c) = (
        env.create_namespace("kit-finalizer").await.unwrap(),
        env.create_namespace("kit-workload").await.unwrap(),
        env.create_namespace("kit-events").await.unwrap(),
    );
    tokio::join!(
        finalizers(&client, &a),
        guarded_status(&client),
        workload_clients(&client, &b, &env),
        event_series(&client, &c),
    );
}
