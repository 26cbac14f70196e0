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
