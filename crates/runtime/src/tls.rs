//! A serving certificate: loaded from files (a mounted Secret, as cert-manager writes it) and
//! reloaded when the files change, without a restart and without dropping connections, or made
//! self-signed at startup when no files are given. The webhook server and the secure metrics
//! endpoint serve with it.
//!
//! Polling rather than inotify: Kubernetes updates a mounted Secret by swapping a symlink, which
//! file watchers report inconsistently, and comparing two small files every few seconds costs
//! nothing. A renewal that cannot be read (half-written, mismatched key) is logged and the
//! previous certificate stays in use.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::{Error, Result};

/// The certificate chain and key files (`tls.crt` and `tls.key` of a `kubernetes.io/tls` Secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertFiles {
    /// `tls.crt` and `tls.key` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    fn read(&self) -> Result<(Vec<u8>, Vec<u8>)> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Error::Certificate {
                path: path.to_owned(),
                message: e.to_string(),
            })
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

/// Hands rustls the current certificate; [`watch`] replaces it when the files change.
pub struct ReloadingCert {
    current: RwLock<Loaded>,
}

struct Loaded {
    key: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert").finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the files; an unreadable or mismatched pair is a startup error.
    pub fn load(files: &CertFiles) -> Result<Self> {
        let (cert_pem, key_pem) = files.read()?;
        let key = certified_key(files, &cert_pem, &key_pem)?;
        Ok(Self {
            current: RwLock::new(Loaded {
                key,
                cert_pem,
                key_pem,
            }),
        })
    }

    /// A certificate made and signed by itself for `names` (ECDSA P-256), held in memory only:
    /// what serves when no certificate is mounted, as controller-runtime's metrics server does.
    /// Clients cannot verify it; it encrypts, and the bearer token is checked all the same.
    pub fn self_signed(names: Vec<String>) -> Result<Self> {
        let made = |message: String| Error::Certificate {
            path: PathBuf::new(),
            message,
        };
        let key = rcgen::KeyPair::generate().map_err(|e| made(e.to_string()))?;
        let cert = rcgen::CertificateParams::new(names)
            .and_then(|params| params.self_signed(&key))
            .map_err(|e| made(e.to_string()))?;
        let (cert_pem, key_pem) = (cert.pem().into_bytes(), key.serialize_pem().into_bytes());
        let files = CertFiles {
            cert: PathBuf::new(),
            key: PathBuf::new(),
        };
        let key = certified_key(&files, &cert_pem, &key_pem)?;
        Ok(Self {
            current: RwLock::new(Loaded {
                key,
                cert_pem,
                key_pem,
            }),
        })
    }

    /// Reads the files again; swaps the certificate in when they changed and are valid.
    /// Returns whether a new certificate is now served.
    pub fn reload(&self, files: &CertFiles) -> Result<bool> {
        let (cert_pem, key_pem) = files.read()?;
        {
            let current = self.current.read().map_err(|_| poisoned(files))?;
            if current.cert_pem == cert_pem && current.key_pem == key_pem {
                return Ok(false);
            }
        }
        let key = certified_key(files, &cert_pem, &key_pem)?;
        let mut current = self.current.write().map_err(|_| poisoned(files))?;
        *current = Loaded {
            key,
            cert_pem,
            key_pem,
        };
        Ok(true)
    }

    /// A rustls server configuration serving this certificate (HTTP/2 and HTTP/1.1).
    pub fn server_config(self: &Arc<Self>) -> Arc<ServerConfig> {
        let mut config = ServerConfig::builder()
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.key.clone())
    }
}

fn poisoned(files: &CertFiles) -> Error {
    Error::Certificate {
        path: files.cert.clone(),
        message: "certificate lock poisoned".into(),
    }
}

fn certified_key(files: &CertFiles, cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>> {
    let cert_error = |message: String| Error::Certificate {
        path: files.cert.clone(),
        message,
    };
    let key_error = |message: String| Error::Certificate {
        path: files.key.clone(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_error(format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(cert_error("no certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| key_error(format!("not a PEM private key: {e}")))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| key_error(format!("unsupported private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| key_error(format!("does not belong to the certificate: {e}")))?;
    Ok(Arc::new(certified))
}

/// Checks the files every `interval` until `cancel`, swapping in a renewed certificate.
pub async fn watch(
    cert: Arc<ReloadingCert>,
    files: CertFiles,
    interval: Duration,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        match cert.reload(&files) {
            Ok(true) => info!(cert = %files.cert.display(), "serving certificate reloaded"),
            Ok(false) => {}
            // Mid-rotation the files may briefly disagree; the next check picks up the pair.
            Err(e) => {
                warn!(error = %e, "serving certificate not reloaded; keeping the current one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn write(dir: &Path, (cert, key): &(String, String)) -> CertFiles {
        let files = CertFiles::in_dir(dir);
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, key).unwrap();
        files
    }

    fn served(cert: &ReloadingCert) -> Vec<u8> {
        cert.current.read().unwrap().key.cert[0].to_vec()
    }

    #[test]
    fn a_changed_pair_is_swapped_in_and_a_broken_one_is_not() {
        crate::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let files = write(dir.path(), &pair("a"));
        let cert = ReloadingCert::load(&files).unwrap();
        let first = served(&cert);
        assert!(
            !cert.reload(&files).unwrap(),
            "unchanged files are not reloaded"
        );

        write(dir.path(), &pair("b"));
        assert!(cert.reload(&files).unwrap());
        let second = served(&cert);
        assert_ne!(first, second);

        // A key that does not belong to the certificate (a half-finished rotation) is refused
        // and the current certificate stays.
        let (new_cert, _) = pair("c");
        let (_, other_key) = pair("d");
        write(dir.path(), &(new_cert, other_key));
        let err = cert.reload(&files).unwrap_err().to_string();
        assert!(err.contains("tls.key"), "{err}");
        assert_eq!(served(&cert), second);
    }

    #[test]
    fn missing_or_garbage_files_name_the_file() {
        crate::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let files = CertFiles::in_dir(dir.path());
        assert!(
            ReloadingCert::load(&files)
                .unwrap_err()
                .to_string()
                .contains("tls.crt")
        );
        std::fs::write(&files.cert, "garbage").unwrap();
        std::fs::write(&files.key, "garbage").unwrap();
        assert!(
            ReloadingCert::load(&files)
                .unwrap_err()
                .to_string()
                .contains("tls.crt")
        );
    }
}
