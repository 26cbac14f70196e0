//! CAPMAAS v0.9.0's LXD flavors (`templates/cluster-template-lxd.yaml` and
//! `cluster-template-hcp.yaml`, copied into `tests/fixtures/capmaas-v0.9.0`), their variables
//! filled in as a CAPMAAS user would, pass a server-side dry run unchanged against our CRDs, the
//! CAPI and kubeadm CRDs and webhook-server: no field unknown (strict field validation), none
//! refused, and the LXD fields kept as written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use capmaas_testenv::{TestEnv, cache_dir};
use serde_json::Value;

/// The variables of both templates, with plausible values.
const VARIABLES: [(&str, &str); 18] = [
    ("CLUSTER_NAME", "lxd-wlc"),
    ("DNS_DOMAIN", "maas"),
    ("CONTROL_PLANE_ZONE", "az1"),
    ("WORKER_ZONE", "az1"),
    ("KUBERNETES_VERSION", "v1.34.1"),
    ("MACHINE_IMAGE", "custom/u-2204-0-k-1341-0"),
    ("CONTROL_PLANE_MACHINE_COUNT", "3"),
    ("CONTROL_PLANE_MACHINE_MINCPU", "4"),
    ("CONTROL_PLANE_MACHINE_MINMEMORY", "8192"),
    ("CONTROL_PLANE_MACHINE_MINSTORAGE", "60"),
    ("LXD_RESOURCE_POOL", "lxd-hosts"),
    ("LXD_STORAGE_SIZE", "100"),
    ("WORKER_MACHINE_COUNT", "2"),
    ("WORKER_MACHINE_IMAGE", "custom/u-2204-0-k-1341-0"),
    ("WORKER_MACHINE_MINCPU", "2"),
    ("WORKER_MACHINE_MINMEMORY", "4096"),
    ("WORKER_MACHINE_MINSTORAGE", "40"),
    ("WORKER_MACHINE_RESOURCEPOOL", "workers"),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/capmaas-v0.9.0")
        .join(name)
}

/// The template with its `${VARIABLES}` replaced, as envsubst or clusterctl does.
fn rendered(name: &str) -> String {
    let mut text = std::fs::read_to_string(fixture(name)).unwrap();
    for (key, value) in VARIABLES {
        text = text.replace(&format!("${{{key}}}"), value);
    }
    assert!(!text.contains("${"), "{name}: a variable is left:\n{text}");
    text
}

/// `kubectl apply --server-side --dry-run=server --validate=strict` of `yaml`: the objects as the
/// API server would store them.
fn dry_run(env: &TestEnv, ns: &str, dir: &Path, name: &str, yaml: &str) -> Vec<Value> {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    let out = env
        .kubectl()
        .args([
            "apply",
            "--server-side",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-n",
            ns,
            "-f",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    match printed["kind"].as_str() {
        Some("List") => printed["items"].as_array().unwrap().clone(),
        _ => vec![printed],
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the dry run"))
}

#[tokio::test]
async fn capmaas_lxd_and_hcp_templates_pass_a_server_side_dry_run_unchanged() {
    let env = TestEnv::builder()
        .controller_manager(false)
        .crd_dir(cache_dir().join("kubeadm-crds"))
        .start()
        .await
        .unwrap();
    let served = common::serve_on(env).await;
    let env = &served.env;
    let ns = env.create_namespace("capmaas-lxd").await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    let lxd = dry_run(
        env,
        &ns,
        dir.path(),
        "lxd.yaml",
        &rendered("cluster-template-lxd.yaml"),
    );
    assert_eq!(lxd.len(), 7, "{lxd:?}");
    let cp = find(&lxd, "MaasMachineTemplate", "lxd-wlc-control-plane");
    assert_eq!(
        cp["spec"]["template"]["spec"]["lxd"],
        serde_json::json!({"enabled": true, "vmConfig": {"diskSize": 60, "autoStart": true}})
    );
    assert_eq!(
        cp["spec"]["template"]["spec"]["resourcePool"], "lxd-hosts",
        "{cp}"
    );

    let hcp = dry_run(
        env,
        &ns,
        dir.path(),
        "hcp.yaml",
        &rendered("cluster-template-hcp.yaml"),
    );
    assert_eq!(hcp.len(), 7, "{hcp:?}");
    let cluster = find(&hcp, "MaasCluster", "lxd-wlc");
    assert_eq!(
        cluster["spec"]["lxdConfig"],
        serde_json::json!({
            "enabled": true, "storageBackend": "zfs", "skipNetworkUpdate": true, "storageSize": "100"
        })
    );
    assert_eq!(
        find(&hcp, "MaasMachineTemplate", "lxd-wlc-md-0")["spec"]["template"]["spec"]["minDiskSize"],
        40
    );
}
