//! Flags of the webhook server (besides the common ones).

use std::path::PathBuf;
use std::time::Duration;

/// `webhook-server` flags. CAPMAAS's manager takes `--webhook-port`; the cert dir flag and
/// file names are controller-runtime's, so cert-manager Secrets mount unchanged.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// Port the HTTPS admission endpoint listens on.
    #[arg(long, value_name = "PORT", default_value_t = 9443)]
    pub webhook_port: u16,

    /// Address the admission endpoint binds to.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    pub webhook_host: std::net::IpAddr,

    /// Folder holding the serving certificate as `tls.crt` and `tls.key` (a mounted
    /// `kubernetes.io/tls` Secret, e.g. written by cert-manager).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    pub webhook_cert_dir: PathBuf,

    /// How often the certificate files are checked for a renewal.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = capmaas_runtime::flags::parse_duration)]
    pub cert_reload_interval: Duration,
}
