//! The control plane's own small PKI: a serving CA, a client CA, serving and client
//! certificates, and the service-account signing key (as controller-runtime's envtest does).

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::error::Result;

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct CertPair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertPair")
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A certificate authority able to sign leaf certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A fresh self-signed CA with the given common name.
    pub fn new(common_name: &str) -> Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A serving certificate for `localhost` and 127.0.0.1.
    pub fn serving_cert(&self) -> Result<CertPair> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into()?),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.sign(&params)
    }

    /// A client certificate: the API server reads the user from the common name and the
    /// groups from the organizations.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<CertPair> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Result<CertPair> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The key pair the API server signs service-account tokens with.
pub(crate) struct ServiceAccountKey {
    pub(crate) private_pem: String,
    pub(crate) public_pem: String,
}

impl ServiceAccountKey {
    pub(crate) fn generate() -> Result<Self> {
        let key = KeyPair::generate()?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_certificates_are_pem_and_distinct() {
        let ca = Authority::new("test-ca").unwrap();
        let serving = ca.serving_cert().unwrap();
        let client = ca.client_cert("admin", &["system:masters"]).unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(serving.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(client.key_pem.contains("PRIVATE KEY"));
        assert_ne!(serving.cert_pem, client.cert_pem);
        assert!(!format!("{client:?}").contains("PRIVATE"));
    }
}
