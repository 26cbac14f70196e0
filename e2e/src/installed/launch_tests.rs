use super::*;
use serde_json::json;

fn deployment(value: serde_json::Value) -> Deployment {
    serde_json::from_value(value).unwrap()
}

fn ports_from(start: u16) -> impl FnMut() -> Result<u16> {
    let mut next = start;
    move || {
        next += 1;
        Ok(next)
    }
}

/// Our maas-client as clusterctl installs it: flags binding container ports, the key as a
/// mounted Secret file, the endpoint from the Secret, the namespace from the downward API.
fn gateway() -> Deployment {
    deployment(json!({
        "metadata": {"name": "capmaas-maas-client", "namespace": "capmaas-system"},
        "spec": {"selector": {}, "template": {"spec": {
            "serviceAccountName": "capmaas-maas-client",
            "containers": [{
                "name": "manager", "image": "ghcr.io/capmaas-rs/maas-client:v0.10.0",
                "args": ["--metrics-bind-addr=:8080", "--health-addr=:9440", "--maas-api-key-file=/etc/capmaas/maas/api-key"],
                "ports": [{"name": "metrics", "containerPort": 8080}, {"name": "health", "containerPort": 9440}],
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"}},
                "env": [
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "MAAS_ENDPOINT", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "MAAS_ENDPOINT"}}},
                    {"name": "MAAS_CA_FILE", "value": "/etc/capmaas/maas/ca.crt"},
                    {"name": "RUST_LOG", "value": "info"}
                ],
                "volumeMounts": [{"name": "maas", "mountPath": "/etc/capmaas/maas"}, {"name": "tmp", "mountPath": "/tmp"}]
            }],
            "volumes": [
                {"name": "maas", "secret": {"secretName": "creds", "items": [{"key": "MAAS_API_KEY", "path": "api-key"}, {"key": "MAAS_CA_CERT", "path": "ca.crt"}]}},
                {"name": "tmp", "emptyDir": {}}
            ]
        }}}
    }))
}

fn credentials() -> Sources {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "stringData": {"MAAS_ENDPOINT": "http://127.0.0.1:5240/MAAS", "MAAS_API_KEY": "a:b:c"},
        "data": {"MAAS_CA_CERT": ""}
    }))
    .unwrap();
    Sources {
        secrets: BTreeMap::from([("creds".to_owned(), secret)]),
        ..Sources::default()
    }
}

#[test]
fn a_deployment_runs_with_its_args_env_files_and_ports_moved_to_loopback() {
    let dir = Path::new("/run/e2e/gw");
    let launch = plan(&gateway(), &credentials(), dir, ports_from(40000)).unwrap();
    assert_eq!(
        launch.args,
        [
            "--metrics-bind-addr=127.0.0.1:40001",
            "--health-addr=127.0.0.1:40002",
            "--maas-api-key-file=/etc/capmaas/maas/api-key",
        ]
    );
    assert_eq!(
        launch.readiness_url.as_deref(),
        Some("http://127.0.0.1:40002/readyz")
    );
    let env: BTreeMap<_, _> = launch.env.iter().cloned().collect();
    assert_eq!(env["POD_NAMESPACE"], "capmaas-system");
    assert_eq!(env["MAAS_ENDPOINT"], "http://127.0.0.1:5240/MAAS");
    assert_eq!(env["MAAS_CA_FILE"], "/etc/capmaas/maas/ca.crt");
    assert_eq!(
        launch.mounts,
        [
            (PathBuf::from("/run/e2e/gw/root/tmp"), "/tmp".to_owned()),
            (
                PathBuf::from("/run/e2e/gw/root/etc/capmaas/maas"),
                "/etc/capmaas/maas".to_owned()
            ),
        ]
    );
    assert_eq!(
        launch.files,
        [
            (
                PathBuf::from("/run/e2e/gw/root/etc/capmaas/maas/api-key"),
                b"a:b:c".to_vec()
            ),
            (
                PathBuf::from("/run/e2e/gw/root/etc/capmaas/maas/ca.crt"),
                Vec::new()
            ),
        ]
    );
    assert_eq!(launch.service_account, "capmaas-maas-client");
    assert_eq!(launch.image, "ghcr.io/capmaas-rs/maas-client:v0.10.0");
}

#[test]
fn ports_a_binary_binds_by_default_get_their_flag() {
    // CAPI's managers: the diagnostics address in the args, health and webhook ports by default.
    let capi = deployment(json!({
        "metadata": {"name": "capi-controller-manager", "namespace": "capi-system"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{
            "name": "manager", "image": "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2",
            "command": ["/manager"],
            "args": ["--leader-elect", "--diagnostics-address=:8443"],
            "ports": [
                {"name": "webhook-server", "containerPort": 9443},
                {"name": "healthz", "containerPort": 9440},
                {"name": "metrics", "containerPort": 8443}
            ],
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "healthz"}}
        }]}}}
    }));
    let launch = plan(&capi, &Sources::default(), Path::new("/x"), ports_from(100)).unwrap();
    assert_eq!(
        launch.args,
        [
            "--leader-elect",
            "--diagnostics-address=127.0.0.1:103",
            "--webhook-port=101",
            "--health-addr=127.0.0.1:102",
        ]
    );
    assert_eq!(
        launch.readiness_url.as_deref(),
        Some("http://127.0.0.1:102/readyz")
    );
    assert_eq!(launch.service_account, "default");
}

#[test]
fn a_missing_secret_key_is_an_error_naming_it() {
    let mut sources = credentials();
    sources.secrets.clear();
    let err = plan(&gateway(), &sources, Path::new("/x"), ports_from(1)).unwrap_err();
    assert!(err.to_string().contains("creds"), "{err}");
}

#[test]
fn the_pod_script_stages_the_sources_mounts_parents_first_then_files_then_execs_the_program() {
    let script = crate::installed::pod_script(
        &[
            (
                PathBuf::from("/tmp/w/sa"),
                crate::installed::SERVICE_ACCOUNT_DIR.to_owned(),
            ),
            (PathBuf::from("/tmp/w/root/tmp"), "/tmp".to_owned()),
            (PathBuf::from("/tmp/w/it's"), "/etc/x".to_owned()),
        ],
        &[(PathBuf::from("/tmp/w/hosts"), "/etc/hosts".to_owned())],
        Path::new("/tmp/clone/target/debug/maas-client"),
    );
    let stage = crate::installed::STAGE;
    let expected = format!(
        "set -e\nmkdir -p {stage}\nmount -t tmpfs capmaas-e2e-pod {stage}\n\
         mkdir -p {stage}/bin\nmount --bind '/tmp/clone/target/debug' {stage}/bin\n\
         mkdir -p {stage}/0\nmount --bind '/tmp/w/sa' {stage}/0\n\
         mkdir -p {stage}/1\nmount --bind '/tmp/w/root/tmp' {stage}/1\n\
         mkdir -p {stage}/2\nmount --bind '/tmp/w/it'\\''s' {stage}/2\n\
         touch {stage}/file-0\nmount --bind '/tmp/w/hosts' {stage}/file-0\n\
         mkdir -p '/var/run/secrets/kubernetes.io/serviceaccount'\nmount --bind {stage}/0 '/var/run/secrets/kubernetes.io/serviceaccount'\n\
         mkdir -p '/tmp'\nmount --bind {stage}/1 '/tmp'\n\
         mkdir -p '/etc/x'\nmount --bind {stage}/2 '/etc/x'\n\
         [ -e '/etc/hosts' ] || touch '/etc/hosts'\nmount --bind {stage}/file-0 '/etc/hosts'\n\
         exec {stage}/bin/'maas-client' \"$@\"\n"
    );
    assert_eq!(script, expected);
}
