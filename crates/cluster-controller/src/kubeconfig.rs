//! The workload cluster's kubeconfig, as CAPI stores it: Secret `<cluster>-kubeconfig`, key
//! `value`.
//!
//! The Secret lives in the management cluster and anyone who can write Secrets there could
//! plant one. A kubeconfig may name files and commands (exec plugins, token files, certificate
//! paths): loading those would let such a Secret run programs in the controller's pod or send its
//! service-account token to a server of their choosing. Only inline credentials are accepted;
//! CAPI's generated kubeconfigs are always inline.

use k8s_openapi::api::core::v1::Secret;
use kube::config::Kubeconfig;

/// Key of the kubeconfig in the Secret (CAPI contract).
pub const KUBECONFIG_SECRET_KEY: &str = "value";

/// Name of the Secret holding a cluster's kubeconfig.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// The kubeconfig in `secret`, or why it cannot be used. Messages never quote the content.
pub fn from_secret(secret: &Secret) -> Result<Kubeconfig, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KUBECONFIG_SECRET_KEY))
        .map(|b| b.0.as_slice())
        .ok_or_else(|| format!("key {KUBECONFIG_SECRET_KEY} is missing"))?;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("key {KUBECONFIG_SECRET_KEY} is not UTF-8"))?;
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|_| format!("key {KUBECONFIG_SECRET_KEY} is not a kubeconfig"))?;
    check_inline_only(&kubeconfig)?;
    Ok(kubeconfig)
}

/// Refuses kubeconfigs that reference local files or run commands.
pub fn check_inline_only(kubeconfig: &Kubeconfig) -> Result<(), String> {
    for user in &kubeconfig.auth_infos {
        let Some(auth) = &user.auth_info else {
            continue;
        };
        let forbidden = [
            (auth.exec.is_some(), "exec credential plugin"),
            (auth.auth_provider.is_some(), "auth provider"),
            (auth.token_file.is_some(), "tokenFile"),
            (auth.client_certificate.is_some(), "client-certificate file"),
            (auth.client_key.is_some(), "client-key file"),
        ];
        if let Some((_, what)) = forbidden.iter().find(|(present, _)| *present) {
            return Err(format!(
                "user {:?} uses a {what}; only inline credentials are accepted",
                user.name
            ));
        }
    }
    for cluster in &kubeconfig.clusters {
        if cluster
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(format!(
                "cluster {:?} uses a certificate-authority file; only inline data is accepted",
                cluster.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn inline_kubeconfig_is_accepted() {
        let k = from_secret(&secret(INLINE.as_bytes())).unwrap();
        assert_eq!(k.clusters.len(), 1);
        assert_eq!(secret_name("prod"), "prod-kubeconfig");
    }

    #[test]
    fn files_and_commands_are_refused() {
        let exec = INLINE.replace(
            "    client-key-data: c2VjcmV0LWtleS1tYXRlcmlhbA==",
            "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}",
        );
        let err = from_secret(&secret(exec.as_bytes())).unwrap_err();
        assert!(err.contains("exec credential plugin"), "{err}");
        let token_file = INLINE.replace(
            "    client-key-data: c2VjcmV0LWtleS1tYXRlcmlhbA==",
            "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
        );
        assert!(
            from_secret(&secret(token_file.as_bytes()))
                .unwrap_err()
                .contains("tokenFile")
        );
        let ca_file = INLINE.replace(
            "certificate-authority-data: Zm9v",
            "certificate-authority: /etc/ca.pem",
        );
        assert!(
            from_secret(&secret(ca_file.as_bytes()))
                .unwrap_err()
                .contains("certificate-authority")
        );
    }

    #[test]
    fn broken_content_is_reported_without_quoting_it() {
        let err = from_secret(&secret(b"secret-key-material: [unclosed")).unwrap_err();
        assert!(!err.contains("secret-key-material"), "{err}");
        assert!(
            from_secret(&secret(&[0xff, 0xfe]))
                .unwrap_err()
                .contains("UTF-8")
        );
        assert!(
            from_secret(&Secret::default())
                .unwrap_err()
                .contains("missing")
        );
    }
}
