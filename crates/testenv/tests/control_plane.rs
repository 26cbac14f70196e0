//! The control plane itself: version, CAPI CRDs, RBAC for named users, garbage
//! collection, namespace deletion, webhooks, and two environments side by side.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmaas_testenv::{TestEnv, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn control_plane_serves_real_version_capi_crds_rbac_and_gc() {
    let env = TestEnv::builder().our_crds(false).start().await.unwrap();
    let client = env.client();

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        version.git_version, "v1.36.3",
        "the version ldflags were applied"
    );

    // CAPI core and IPAM kinds are served.
    for (group_version, plural) in [
        ("cluster.x-k8s.io/v1beta2", "clusters"),
        ("cluster.x-k8s.io/v1beta2", "machines"),
        ("cluster.x-k8s.io/v1beta2", "machinedeployments"),
        ("cluster.x-k8s.io/v1beta2", "machinehealthchecks"),
        ("ipam.cluster.x-k8s.io/v1beta2", "ipaddressclaims"),
    ] {
        let resources = client
            .list_api_group_resources(group_version)
            .await
            .unwrap();
        assert!(
            resources.resources.iter().any(|r| r.name == plural),
            "{group_version} {plural}"
        );
    }

    // A named user is subject to RBAC: no permissions, so a read is forbidden.
    let ns = env.create_namespace("rbac").await.unwrap();
    let alice = env.user_client("alice", &["devs"]).await.unwrap();
    let err = Api::<ConfigMap>::namespaced(alice, &ns)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
    let sa = env
        .service_account_client(&ns, "machine-controller")
        .await
        .unwrap();
    let err = Api::<ConfigMap>::namespaced(sa, &ns)
        .get("x")
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert!(
                s.message
                    .contains(&format!("system:serviceaccount:{ns}:machine-controller")),
                "{}",
                s.message
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    // Owner-reference garbage collection (kube-controller-manager).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "dependent", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
            ]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(
        "the dependent to be garbage-collected",
        Duration::from_secs(60),
        || {
            let cms = cms.clone();
            async move {
                cms.get_opt("dependent")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;

    // Namespace deletion completes (namespace controller).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(60),
        || {
            let namespaces = namespaces.clone();
            let ns = ns.clone();
            async move {
                namespaces
                    .get_opt(&ns)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn two_environments_run_side_by_side_and_clean_up() {
    let (management, workload) = tokio::join!(
        TestEnv::builder()
            .our_crds(false)
            .capi_crds(false)
            .controller_manager(false)
            .audit_log(true)
            .start(),
        TestEnv::api_server_only(),
    );
    let (management, workload) = (management.unwrap(), workload.unwrap());
    assert_ne!(management.server_url(), workload.server_url());

    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "only-here"}})).unwrap();
    Api::<ConfigMap>::namespaced(management.client(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let elsewhere = Api::<ConfigMap>::namespaced(workload.client(), "default")
        .get_opt("only-here")
        .await
        .unwrap();
    assert!(elsewhere.is_none(), "the two API servers share no state");

    // The audit log holds the write, with its user, and no read.
    Api::<ConfigMap>::namespaced(management.client(), "default")
        .get("only-here")
        .await
        .unwrap();
    assert!(workload.audit_log_path().is_none());
    let audit = management.audit_log_path().unwrap().to_path_buf();
    let events: Vec<serde_json::Value> = eventually(
        "the audit event of the write",
        Duration::from_secs(10),
        || {
            let audit = audit.clone();
            async move {
                let text = std::fs::read_to_string(&audit).ok()?;
                let events: Vec<serde_json::Value> = text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .filter(|e: &serde_json::Value| e["objectRef"]["name"] == "only-here")
                    .collect();
                (!events.is_empty()).then_some(events)
            }
        },
    )
    .await;
    let seen: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["user"]["username"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                e["stage"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(seen, [("admin", "create", "ResponseComplete")]);

    let dir = workload.dir().to_path_buf();
    let pids: Vec<u32> = workload
        .processes()
        .iter()
        .filter_map(capmaas_testenv::Process::pid)
        .collect();
    assert_eq!(pids.len(), 2);
    drop(workload);
    assert!(!dir.exists(), "files are removed on drop");
    tokio::time::sleep(Duration::from_millis(300)).await;
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
            "process {pid} stopped"
        );
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
}
