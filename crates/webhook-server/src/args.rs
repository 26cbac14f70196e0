//! Flags of the webhook server (besides the common ones).

use std::path::PathBuf;
use std::time::Duration;

use capmaas_runtime::http::Limits;

use crate::server::{AdmissionLimits, DEFAULT_BUFFERED_BYTES, DEFAULT_DECODING_BYTES};

/// What `--help` says the binary is.
pub const ABOUT: &str = "Defaulting and validation webhooks of the MAAS Cluster API provider.";
/// Binary name; also the field manager and Lease prefix of the runtime (unused: no leader).
pub const BINARY: &str = "webhook-server";

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

    /// Connections served at once; more wait in the listen backlog until one closes
    /// (`docs/webhook-server.md`, "Limits").
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Time for one review, from its request head to the answer (reading the body included).
    /// Keep it at least the webhooks' `timeoutSeconds` (5 s).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = capmaas_runtime::flags::parse_duration)]
    pub request_timeout: Duration,

    /// Bytes of review bodies held at once, over all requests (`16Mi`, `16777216`). A body
    /// waits for room before it is read.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_BUFFERED_BYTES, value_parser = parse_bytes)]
    pub max_buffered_bytes: usize,

    /// Estimated memory of reviews being decoded at once, over all requests (`64Mi`). A review
    /// that alone needs more is refused with 413.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DECODING_BYTES, value_parser = parse_bytes)]
    pub max_decoding_bytes: usize,

    /// The MAAS DNS domains a MaasCluster's `spec.dnsDomain` and a MaasDNSRecord's
    /// `spec.domain` may name, comma-separated; the same list as maas-client's (which publishes
    /// nowhere else). Empty: any domain.
    #[arg(
        long,
        env = "CAPMAAS_DNS_DOMAINS",
        value_name = "DOMAINS",
        default_value = ""
    )]
    pub dns_domains: String,
}

impl WebhookArgs {
    /// The accept loop's limits and the review limits these flags describe.
    pub fn limits(&self) -> (Limits, AdmissionLimits) {
        let connections = Limits {
            max_connections: self.max_connections as usize,
            request_timeout: self.request_timeout,
            ..Limits::default()
        };
        (
            connections,
            AdmissionLimits::new(self.max_buffered_bytes, self.max_decoding_bytes),
        )
    }
}

/// A byte count: digits, optionally followed by `Ki`, `Mi` or `Gi` (Kubernetes' binary
/// suffixes).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => s.split_at(at),
        None => (s, ""),
    };
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(format!("{s:?}: use a number of bytes, or Ki, Mi or Gi")),
    };
    let n: usize = digits.parse().map_err(|e| format!("{s:?}: {e}"))?;
    n.checked_mul(1 << shift)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?}: must be above 0 and fit in memory"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("16Mi").unwrap(), 16 << 20);
        assert_eq!(parse_bytes("512Ki").unwrap(), 512 << 10);
        assert_eq!(parse_bytes("1Gi").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        for bad in ["", "0", "16M", "Mi", "-1", "1.5Mi"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }
}
