use super::*;
use k8s_openapi::ByteString;

fn secret(value: &[u8]) -> Secret {
    Secret {
        data: Some([(KUBECONFIG_SECRET_KEY.to_owned(), ByteString(value.to_vec()))].into()),
        ..Secret::default()
    }
}

const INLINE: &str = r"
apiVersion: v1
kind: Config
clusters:
- name: w
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Zm9v
users:
- name: admin
  user:
    client-certificate-data: Zm9v
    client-key-data: c2VjcmV0LWtleS1tYXRlcmlhbA==
contexts:
- name: w
  context: {cluster: w, user: admin}
current-context: w
";

fn with_user(line: &str) -> String {
    INLINE.replace("    client-key-data: c2VjcmV0LWtleS1tYXRlcmlhbA==", line)
}

#[test]
fn inline_kubeconfig_is_accepted() {
    let k = kubeconfig_from_secret(&secret(INLINE.as_bytes()), "ns/prod-kubeconfig").unwrap();
    assert_eq!(k.clusters.len(), 1);
    assert_eq!(secret_name("prod"), "prod-kubeconfig");
}

#[test]
fn commands_and_files_are_refused() {
    let cases = [
        (
            with_user("    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}"),
            "exec credential plugin",
        ),
        (
            with_user("    auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}"),
            "auth provider",
        ),
        (
            with_user("    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
            "tokenFile",
        ),
        (with_user("    client-key: /etc/key.pem"), "client-key file"),
        (
            INLINE.replace(
                "    client-certificate-data: Zm9v",
                "    client-certificate: /c.pem",
            ),
            "client-certificate file",
        ),
        (
            INLINE.replace(
                "certificate-authority-data: Zm9v",
                "certificate-authority: /ca.pem",
            ),
            "certificate-authority file",
        ),
    ];
    for (text, what) in cases {
        let err = kubeconfig_from_secret(&secret(text.as_bytes()), "ns/c-kubeconfig").unwrap_err();
        assert_eq!(err.reason(), reason::KUBECONFIG_REFUSED, "{what}");
        assert!(err.to_string().contains(what), "{err}");
        assert!(err.to_string().contains("ns/c-kubeconfig"), "{err}");
        assert!(err.is_spec_problem());
    }
}

#[test]
fn broken_content_is_reported_without_quoting_it() {
    let err = kubeconfig_from_secret(&secret(b"secret-key-material: [unclosed"), "s").unwrap_err();
    assert!(!err.to_string().contains("secret-key-material"), "{err}");
    assert_eq!(err.reason(), reason::KUBECONFIG_INVALID);
    let err = kubeconfig_from_secret(&secret(&[0xff, 0xfe]), "s").unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");
    let err = kubeconfig_from_secret(&Secret::default(), "s").unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

mod reconcile_error {
    use crate::ErrorCategory;
    use crate::error::failed;

    use super::super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("the object has been modified", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    fn kubeconfig(error: WorkloadError) -> ReconcileError {
        ReconcileError::WorkloadKubeconfig(error)
    }

    #[test]
    fn categories_are_variant_names_and_requeues_fit() {
        let refused = kubeconfig(WorkloadError::Refused {
            secret: "ns/c-kubeconfig".into(),
            problem: "user \"u\" uses an exec credential plugin".into(),
        });
        assert_eq!(refused.category(), "workload_kubeconfig");
        assert_eq!(
            refused.requeue(),
            Requeue::InvalidSpec,
            "a refused kubeconfig"
        );
        assert!(!refused.is_conflict() && !refused.quiet());
        assert!(
            refused.to_string().contains("exec credential plugin"),
            "{refused}"
        );
        let missing = kubeconfig(WorkloadError::Missing {
            secret: "ns/c-kubeconfig".into(),
        });
        assert_eq!(
            missing.requeue(),
            Requeue::Transient,
            "the Secret may appear"
        );
        let down = ReconcileError::workload("ns/c", "reading Node n")(api(503));
        assert_eq!(down.category(), "workload_api");
        assert_eq!(down.requeue(), Requeue::Transient, "an unreachable cluster");
        let metadata = ReconcileError::from(Failed::missing("uid"));
        assert_eq!(metadata.category(), "missing_metadata");
        assert_eq!(metadata.requeue(), Requeue::InvalidSpec);
        let stopped = ReconcileError::from(failed("writing the status")(
            crate::Error::LeaderElectionStopped,
        ));
        assert_eq!(stopped.category(), "leader_election_stopped");
        let encoding = ReconcileError::from(failed("encoding the Node backup")(
            serde_json::from_str::<u8>("x").unwrap_err(),
        ));
        assert_eq!(encoding.category(), "serialize");
    }

    #[test]
    fn lost_races_are_quiet_conflicts_and_other_failures_are_not() {
        let lost = ReconcileError::from(failed("adding the finalizer")(crate::Error::Conflict(
            "the finalizer list changed",
        )));
        assert!(lost.is_conflict() && lost.quiet());
        assert_eq!(lost.to_string(), "adding the finalizer");
        assert!(ReconcileError::from(Failed::conflict("claiming")).quiet());
        let gone = ReconcileError::from(failed("adding the finalizer")(crate::Error::Gone(
            "m".into(),
        )));
        assert!(gone.is_conflict(), "gone: read again (and find nothing)");
        assert!(ReconcileError::from(failed("writing the status")(api(409))).is_conflict());
        assert!(ReconcileError::workload("ns/c", "patching Node n")(api(409)).quiet());
        let not_found = ReconcileError::from(failed("reading the MaasMachine")(api(404)));
        assert!(!not_found.is_conflict(), "a 404 read is not a lost race");
        let failed_write = ReconcileError::from(failed("writing the status")(api(500)));
        assert!(!failed_write.is_conflict());
        assert_eq!(failed_write.category(), "kube_api");
    }
}
