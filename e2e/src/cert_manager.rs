//! cert-manager's issuing, for the two issuer kinds the shipped manifests use, modelled from
//! its documented behaviour: a `selfSigned` Issuer signs a Certificate with the Certificate's
//! own key (so its `ca.crt` is the certificate itself); a `ca` Issuer signs with the key pair in
//! its `secretName` (and `ca.crt` is that CA). Each issue is a renewal: a new key
//! (`rotationPolicy: Always`, the default since cert-manager 1.18) and a new certificate.
//! The CA injector hands webhook clients the `ca.crt` of the Certificate it is pointed at.

use std::collections::BTreeMap;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;

use crate::error::{Error, Result};

/// What cert-manager writes into a Certificate's Secret.
#[derive(Clone)]
pub struct Issued {
    /// `tls.crt`.
    pub cert_pem: String,
    /// `tls.key`.
    pub key_pem: String,
    /// `ca.crt`: what the CA injector hands webhook clients.
    pub ca_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// The Issuers and Certificates of a set of manifests, and the Secrets issued so far.
#[derive(Debug, Default)]
pub struct CertManager {
    issuers: BTreeMap<(String, String), Value>,
    certificates: BTreeMap<(String, String), Value>,
    secrets: BTreeMap<(String, String), Issued>,
    serve_locally: bool,
}

fn key_of(document: &Value) -> (String, String) {
    let meta = &document["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_owned(),
        meta["name"].as_str().unwrap_or_default().to_owned(),
    )
}

fn invalid(what: &str, message: impl std::fmt::Display) -> Error {
    Error::Manifest {
        name: what.to_owned(),
        message: message.to_string(),
    }
}

impl CertManager {
    /// The cert-manager objects among `documents` (rendered manifests).
    pub fn from_documents(documents: &[Value]) -> Self {
        let mut this = Self::default();
        for document in documents {
            if !document["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("cert-manager.io/"))
            {
                continue;
            }
            match document["kind"].as_str() {
                Some("Issuer") => {
                    this.issuers.insert(key_of(document), document.clone());
                }
                Some("Certificate") => {
                    this.certificates.insert(key_of(document), document.clone());
                }
                _ => {}
            }
        }
        this
    }

    /// Serving (non-CA) certificates also name `localhost` and `127.0.0.1`, where a test routes
    /// the webhook Services.
    #[must_use]
    pub fn serving_locally(mut self) -> Self {
        self.serve_locally = true;
        self
    }

    /// Every Certificate, `(namespace, name)`.
    pub fn certificates(&self) -> Vec<(String, String)> {
        self.certificates.keys().cloned().collect()
    }

    /// What was last issued into the Secret of the Certificate `namespace/name`, if anything.
    pub fn issued(&self, namespace: &str, name: &str) -> Option<&Issued> {
        let certificate = self
            .certificates
            .get(&(namespace.to_owned(), name.to_owned()))?;
        let secret = certificate["spec"]["secretName"].as_str()?;
        self.secrets.get(&(namespace.to_owned(), secret.to_owned()))
    }

    /// Issues (or renews) the Certificate `namespace/name`, first issuing the CA it is signed
    /// with when that has not been issued yet, and returns its Secret's content.
    pub fn issue(&mut self, namespace: &str, name: &str) -> Result<Issued> {
        let what = format!("Certificate {namespace}/{name}");
        let certificate = self
            .certificates
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
            .ok_or_else(|| invalid(&what, "not in the manifests"))?;
        let spec = &certificate["spec"];
        let issuer_name = spec["issuerRef"]["name"].as_str().unwrap_or_default();
        let issuer = self
            .issuers
            .get(&(namespace.to_owned(), issuer_name.to_owned()))
            .cloned()
            .ok_or_else(|| invalid(&what, format!("its Issuer {issuer_name} is missing")))?;
        let params = params_of(spec, self.serve_locally).map_err(|e| invalid(&what, e))?;
        let key = KeyPair::generate().map_err(|e| invalid(&what, e))?;
        let pair = if issuer["spec"].get("selfSigned").is_some() {
            let cert = params.self_signed(&key).map_err(|e| invalid(&what, e))?;
            Issued {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                ca_pem: cert.pem(),
            }
        } else if let Some(ca_secret) = issuer["spec"]["ca"]["secretName"].as_str() {
            let ca = self.ca_secret(namespace, ca_secret)?;
            let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| invalid(&what, e))?;
            let signer =
                Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(|e| invalid(&what, e))?;
            let cert = params
                .signed_by(&key, &signer)
                .map_err(|e| invalid(&what, e))?;
            Issued {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                ca_pem: ca.cert_pem,
            }
        } else {
            return Err(invalid(&what, "an Issuer kind this model does not know"));
        };
        let secret = spec["secretName"].as_str().unwrap_or(name).to_owned();
        self.secrets
            .insert((namespace.to_owned(), secret), pair.clone());
        Ok(pair)
    }

    /// The Secret `secret` of `namespace`, issuing the Certificate that writes it first.
    fn ca_secret(&mut self, namespace: &str, secret: &str) -> Result<Issued> {
        if let Some(issued) = self.secrets.get(&(namespace.to_owned(), secret.to_owned())) {
            return Ok(issued.clone());
        }
        let writer = self
            .certificates
            .iter()
            .find(|((ns, _), c)| ns == namespace && c["spec"]["secretName"] == secret)
            .map(|((_, name), _)| name.clone())
            .ok_or_else(|| invalid(secret, "no Certificate writes this CA Secret"))?;
        self.issue(namespace, &writer)
    }
}

/// The certificate a Certificate's spec asks for: its DNS names (and the local ones when
/// `serve_locally`), or a CA.
fn params_of(
    spec: &Value,
    serve_locally: bool,
) -> std::result::Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::default();
    let names: Vec<&str> = spec["dnsNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(common_name) = spec["commonName"].as_str().or(names.first().copied()) {
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
    }
    for name in names {
        params
            .subject_alt_names
            .push(SanType::DnsName(name.try_into()?));
    }
    if spec["isCA"].as_bool() == Some(true) {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
    } else {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if serve_locally {
            params
                .subject_alt_names
                .push(SanType::DnsName("localhost".try_into()?));
            params
                .subject_alt_names
                .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        }
    }
    Ok(params)
}

/// Whether a TLS client trusting `ca_bundle_pem` (the API server, with the injected
/// `caBundle`) accepts `cert_pem` served for `server_name`; the error says why not.
pub fn trusted(ca_bundle_pem: &str, cert_pem: &str, server_name: &str) -> Result<()> {
    let what = format!("certificate for {server_name}");
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_bundle_pem.as_bytes()) {
        roots
            .add(ca.map_err(|e| invalid(&what, e))?)
            .map_err(|e| invalid(&what, e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| invalid(&what, e))?;
    let served =
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| invalid(&what, e))?;
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| invalid(&what, e))?;
    verifier
        .verify_server_cert(&served, &[], &name, &[], UnixTime::now())
        .map(drop)
        .map_err(|e| invalid(&what, e))
}
