//! The certificates kubeadm makes on a control-plane node (`kubeadm init phase certs`), signed by
//! the cluster's CAs that the bootstrap provider wrote into the user data, and a client
//! certificate for the stand-ins that act on the node (kubelet, kubeadm's uploads).

use std::net::IpAddr;

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair").finish_non_exhaustive()
    }
}

/// One of the cluster's CAs, able to sign.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM, as written in the user data.
    pub cert: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// The CA of `cert_pem` and `key_pem` (Cluster API writes RSA keys as PKCS #1).
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Self, String> {
        let key = parse_key(key_pem)?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| format!("CA certificate: {e}"))?;
        Ok(Self {
            issuer,
            cert: cert_pem.to_owned(),
        })
    }

    /// A leaf certificate: `common_name`, `organization` (groups), the SANs, and its usages.
    pub fn sign(
        &self,
        common_name: &str,
        organization: Option<&str>,
        dns_names: &[&str],
        ips: &[IpAddr],
        usages: &[ExtendedKeyUsagePurpose],
    ) -> Result<Pair, String> {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        if let Some(organization) = organization {
            params
                .distinguished_name
                .push(DnType::OrganizationName, organization);
        }
        for name in dns_names {
            params.subject_alt_names.push(SanType::DnsName(
                (*name).try_into().map_err(|e| format!("{name}: {e}"))?,
            ));
        }
        params
            .subject_alt_names
            .extend(ips.iter().copied().map(SanType::IpAddress));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages.to_vec();
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| format!("signing {common_name}: {e}"))?;
        Ok(Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A private key of PEM type `PRIVATE KEY` (PKCS #8) or `RSA PRIVATE KEY` (PKCS #1).
fn parse_key(pem: &str) -> Result<KeyPair, String> {
    if !pem.contains("BEGIN RSA PRIVATE KEY") {
        return KeyPair::from_pem(pem).map_err(|e| format!("private key: {e}"));
    }
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    let pkcs1 = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, body)
        .map_err(|e| format!("RSA private key: {e}"))?;
    let pkcs8 = rustls_pki_types::PrivatePkcs8KeyDer::from(pkcs1_to_pkcs8(&pkcs1));
    KeyPair::try_from(&rustls_pki_types::PrivateKeyDer::Pkcs8(pkcs8))
        .map_err(|e| format!("RSA private key: {e}"))
}

/// Wraps an RSA PKCS #1 key in PKCS #8 (RFC 5208: version 0, the rsaEncryption algorithm, the
/// key as an octet string): rcgen's ring backend reads only PKCS #8, and this one DER
/// structure is all it takes.
fn pkcs1_to_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    const VERSION_0: &[u8] = &[0x02, 0x01, 0x00];
    // SEQUENCE { OID 1.2.840.113549.1.1.1, NULL }
    const RSA_ENCRYPTION: &[u8] = &[
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];
    let key = der(0x04, pkcs1);
    let mut body = Vec::with_capacity(VERSION_0.len() + RSA_ENCRYPTION.len() + key.len());
    body.extend_from_slice(VERSION_0);
    body.extend_from_slice(RSA_ENCRYPTION);
    body.extend_from_slice(&key);
    der(0x30, &body)
}

/// One DER element: tag, definite length, content.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(u8::try_from(len).unwrap_or(0));
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | u8::try_from(bytes.len()).unwrap_or(0));
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn der_lengths_use_the_long_form_from_128_bytes() {
        assert_eq!(der(0x04, &[1, 2]), [0x04, 0x02, 1, 2]);
        let long = der(0x04, &[0; 300]);
        assert_eq!(long[..4], [0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(long.len(), 304);
    }

    #[test]
    fn a_pkcs8_ca_signs_leaves() {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "kubernetes");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        let ca = Ca::load(&cert.pem(), &key.serialize_pem()).unwrap();
        let leaf = ca
            .sign(
                "kube-apiserver",
                None,
                &["t.maas.domain"],
                &["127.20.0.11".parse().unwrap()],
                &[ExtendedKeyUsagePurpose::ServerAuth],
            )
            .unwrap();
        assert!(leaf.cert.contains("BEGIN CERTIFICATE"));
        assert!(
            Ca::load(
                &cert.pem(),
                "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"
            )
            .is_err()
        );
    }
}
