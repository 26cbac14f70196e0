//! Command-line flags and the MAAS credentials, resolved into a [`GatewayConfig`].
//!
//! The API key is read from `MAAS_API_KEY` or from the file given with `--maas-api-key-file`,
//! never from a flag value (command lines are visible in `ps` and in pod specs). Every failure
//! names the variable or flag at fault and shows an example; none shows the key.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capmaas_api::dns::AllowedDomains;
use capmaas_runtime::flags::{leader_namespace_from_env, parse_duration};
use maas_api_client::{ApiKey, Config as MaasConfig, RetryPolicy};

/// What `--help` says the binary is: the package description.
pub const ABOUT: &str = env!("CARGO_PKG_DESCRIPTION");
/// Binary name; the field manager is `capmaas-maas-client`.
pub const BINARY: &str = "maas-client";
/// `--concurrency` default: objects of each kind reconciled in parallel. MAAS traffic is
/// bounded separately (`--maas-max-concurrency`, `--maas-rate-limit`), and a host reconcile
/// that calls MAAS spends most of its time waiting its turn there: with 8 slots, a burst of
/// claims filled them all with allocations waiting for the rate limit, and a host whose
/// deployment had finished waited behind them just to write its status (docs/maas-client.md
/// has the figures).
pub const DEFAULT_CONCURRENCY: u16 = 64;

/// Environment variable holding the MAAS URL.
pub const ENV_MAAS_ENDPOINT: &str = "MAAS_ENDPOINT";
/// Environment variable equivalent of `--maas-allow-insecure-http` (`true`).
pub const ENV_MAAS_ALLOW_INSECURE_HTTP: &str = "MAAS_ALLOW_INSECURE_HTTP";
/// Environment variable holding the MAAS API key.
pub const ENV_MAAS_API_KEY: &str = "MAAS_API_KEY";
/// Environment variable equivalent of `--maas-ca-file`.
pub const ENV_MAAS_CA_FILE: &str = "MAAS_CA_FILE";
/// Environment variable equivalent of `--installation-id` (empty: the default).
pub const ENV_INSTALLATION_ID: &str = "CAPMAAS_INSTALLATION_ID";
/// Environment variable equivalent of `--maas-rate-limit`.
pub const ENV_MAAS_RATE_LIMIT: &str = "MAAS_RATE_LIMIT";
/// Environment variable equivalent of `--maas-workload-annotations` (`true` or `false`), set by
/// the clusterctl variable `MAAS_WORKLOAD_ANNOTATIONS`.
pub const ENV_MAAS_WORKLOAD_ANNOTATIONS: &str = "MAAS_WORKLOAD_ANNOTATIONS";

/// The gateway's own flags (the shared ones are [`CommonArgs`](capmaas_runtime::CommonArgs)).
/// The binary's `about` is the package description.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Environment: MAAS_ENDPOINT (e.g. https://maas.example:5443/MAAS/) and \
                  MAAS_API_KEY (consumer_key:token_key:token_secret) unless --maas-api-key-file is given."
)]
pub struct GatewayArgs {
    /// MAAS URL, e.g. `https://maas.example:5443/MAAS/`.
    #[arg(long, env = ENV_MAAS_ENDPOINT, value_name = "URL")]
    pub maas_endpoint: Option<String>,

    /// File holding the MAAS API key (`consumer_key:token_key:token_secret`), e.g. a mounted
    /// Secret. Takes precedence over MAAS_API_KEY.
    #[arg(long, value_name = "PATH")]
    pub maas_api_key_file: Option<PathBuf>,

    /// PEM bundle of the CA that signed the MAAS certificate (default: platform roots). An
    /// empty file counts as none given, so a Secret key can always be mounted.
    #[arg(long, env = ENV_MAAS_CA_FILE, value_name = "PATH")]
    pub maas_ca_file: Option<PathBuf>,

    /// Accept an `http://` MAAS endpoint. The MAAS key then travels in clear in every request
    /// (OAuth PLAINTEXT); only for a lab or a MAAS reached over a trusted network. Takes an
    /// optional value (`--maas-allow-insecure-http=false`), so a clusterctl variable can set it.
    #[arg(
        long,
        env = ENV_MAAS_ALLOW_INSECURE_HTTP,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub maas_allow_insecure_http: bool,

    /// Identifies this installation in MAAS: the first part of every allocation's `agent_name`
    /// (`<installation>;<namespace>/<host>;<release policy>`). Default:
    /// `capmaas-<namespace of this pod>` (also when the variable is empty).
    #[arg(long, env = ENV_INSTALLATION_ID, value_name = "ID")]
    pub installation_id: Option<String>,

    /// Namespace of the host bindings (one Lease per MAAS machine naming the one MaasHost
    /// that may use it). Every gateway of one installation must use the same. Default: the
    /// namespace of this pod.
    #[arg(long, value_name = "NAMESPACE")]
    pub host_binding_namespace: Option<String>,

    /// Interval between two MAAS syncs of every MaasInventory. Without it each inventory uses
    /// its `spec.syncIntervalSeconds` (default 30 s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub inventory_sync_interval: Option<Duration>,

    /// Maximum number of MAAS requests in flight.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub maas_max_concurrency: u32,

    /// Maximum MAAS requests per second (token bucket; bursts up to the same number).
    #[arg(long, env = ENV_MAAS_RATE_LIMIT, value_name = "PER_SECOND", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub maas_rate_limit: u32,

    /// How often the machines MAAS is changing (deploying, releasing, erasing, powering) are
    /// read, all of them with one list call (one per 400 machines) whatever their number.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub maas_observe_interval: Duration,

    /// How often MAAS machines allocated with our agent_name are checked for orphans.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub orphan_sweep_interval: Duration,

    /// How long an allocation of ours may stay unclaimed by a consumed MaasHost before it is
    /// released.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub orphan_grace_period: Duration,

    /// Release an allocation of this installation that a MaasHost reports `Unclaimed` (allocated
    /// by another MaasHost object, e.g. a management cluster this namespace was moved from, and
    /// claimed by no consumer here) once it has been so this long. Unset: such allocations are
    /// kept until claimed, and only reported (`capmaas_host_unclaimed_allocations`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub release_unclaimed_after: Option<Duration>,

    /// Deployments retried after a Failed deployment before the host is left failed for its
    /// consumer to decide.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub deploy_retries: u32,

    /// Give each allocation MAAS workload annotations naming its MaasHost, consumer and release
    /// policy, for people reading MAAS (one more MAAS call per machine, sent after the deploy at
    /// the lowest priority). Nothing depends on them: an allocation is recognised by its
    /// `agent_name`.
    #[arg(
        long,
        env = ENV_MAAS_WORKLOAD_ANNOTATIONS,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub maas_workload_annotations: bool,

    /// The MAAS DNS domains MaasDNSRecords may publish names in, comma-separated
    /// (`maas,example.com`). A record in another domain is refused (`DNSDomainNotAllowed`) and
    /// nothing is written to MAAS. Empty: every domain the MAAS key writes.
    #[arg(
        long,
        env = "CAPMAAS_DNS_DOMAINS",
        value_name = "DOMAINS",
        default_value = ""
    )]
    pub dns_domains: String,
}

/// Why the gateway cannot start. The messages name the variable and show an example; they
/// never contain the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `MAAS_ENDPOINT` is unset or empty.
    #[error(
        "{ENV_MAAS_ENDPOINT} is not set: set it (or --maas-endpoint) to the MAAS URL, e.g. {ENV_MAAS_ENDPOINT}=https://maas.example:5443/MAAS/"
    )]
    MissingEndpoint,
    /// The endpoint is not a usable URL.
    #[error(
        "{ENV_MAAS_ENDPOINT} is invalid ({reason}); expected a URL such as https://maas.example:5443/MAAS/"
    )]
    InvalidEndpoint {
        /// What is wrong with it.
        reason: String,
    },
    /// Neither `MAAS_API_KEY` nor `--maas-api-key-file` is given.
    #[error(
        "{ENV_MAAS_API_KEY} is not set: set it to the MAAS API key, e.g. {ENV_MAAS_API_KEY}=consumer_key:token_key:token_secret, or pass --maas-api-key-file=/etc/maas/api-key"
    )]
    MissingApiKey,
    /// The key does not have the MAAS shape.
    #[error(
        "{source_name} does not hold a valid MAAS API key ({reason}); expected consumer_key:token_key:token_secret"
    )]
    InvalidApiKey {
        /// `MAAS_API_KEY` or the key file path.
        source_name: String,
        /// Shape problem (never the key itself).
        reason: String,
    },
    /// A file could not be read.
    #[error("cannot read {flag} {path}: {source}")]
    ReadFile {
        /// The flag naming the file.
        flag: &'static str,
        /// The path.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// An `http://` endpoint without `--maas-allow-insecure-http`.
    #[error(
        "{ENV_MAAS_ENDPOINT} {0} is plain http: the MAAS key would travel in clear; use https:// (with --maas-ca-file for a private CA) or, for a lab, pass --maas-allow-insecure-http"
    )]
    InsecureEndpoint(String),
    /// The installation id cannot serve as MAAS agent_name and annotation value.
    #[error(
        "--installation-id {0:?} is invalid: use 1-63 characters of letters, digits, '.', '_' or '-', e.g. capmaas-prod"
    )]
    InvalidInstallationId(String),
}

impl ConfigError {
    /// Low-cardinality label.
    pub fn category(&self) -> &'static str {
        "config"
    }
}

/// Everything the gateway needs besides the Kubernetes runtime.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// MAAS client settings (endpoint, key, TLS, concurrency).
    pub maas: MaasConfig,
    /// The installation part of our allocations' `agent_name`.
    pub installation_id: String,
    /// Namespace of the host bindings.
    pub binding_namespace: String,
    /// Sync interval override for every inventory.
    pub inventory_sync_interval: Option<Duration>,
    /// Requests per second towards MAAS.
    pub rate_limit: NonZeroU32,
    /// Orphan sweep period.
    pub orphan_sweep_interval: Duration,
    /// Grace period before an unclaimed allocation is released.
    pub orphan_grace_period: Duration,
    /// `--release-unclaimed-after`.
    pub release_unclaimed_after: Option<Duration>,
    /// Interval of the batched observation of machines in flight.
    pub observe_interval: Duration,
    /// Deployment retries after a failure.
    pub deploy_retries: u32,
    /// `--maas-workload-annotations`.
    pub workload_annotations: bool,
    /// The endpoint is `http://` and `--maas-allow-insecure-http` accepted it.
    pub insecure_http: bool,
    /// `--dns-domains`.
    pub dns_domains: AllowedDomains,
}

/// Where the key and the endpoint come from; separated from the process environment so the
/// resolution is testable.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `MAAS_API_KEY`.
    pub api_key: Option<String>,
    /// Namespace of this pod (for the default installation id).
    pub namespace: String,
}

impl Environment {
    /// Reads the process environment.
    pub fn from_process() -> Self {
        Self {
            api_key: std::env::var(ENV_MAAS_API_KEY).ok(),
            namespace: leader_namespace_from_env(None),
        }
    }
}

/// The default installation id: `capmaas-<namespace>`.
pub fn default_installation_id(namespace: &str) -> String {
    let ns = namespace.trim();
    if ns.is_empty() {
        "capmaas".to_owned()
    } else {
        format!("capmaas-{ns}")
    }
}

fn valid_installation_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 63
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::ReadFile {
        flag,
        path: path.display().to_string(),
        source,
    })
}

fn load_api_key(args: &GatewayArgs, env: &Environment) -> Result<ApiKey, ConfigError> {
    let (source_name, raw) = match (&args.maas_api_key_file, &env.api_key) {
        (Some(path), _) => {
            let bytes = read_file("--maas-api-key-file", path)?;
            let text = String::from_utf8(bytes).map_err(|_| ConfigError::InvalidApiKey {
                source_name: path.display().to_string(),
                reason: "not UTF-8 text".to_owned(),
            })?;
            (path.display().to_string(), text)
        }
        (None, Some(key)) if !key.trim().is_empty() => (ENV_MAAS_API_KEY.to_owned(), key.clone()),
        (None, _) => return Err(ConfigError::MissingApiKey),
    };
    ApiKey::parse(&raw).map_err(|e| ConfigError::InvalidApiKey {
        source_name,
        reason: e.to_string(),
    })
}

impl GatewayConfig {
    /// Resolves the flags and environment; never panics, never logs the key.
    pub fn resolve(args: &GatewayArgs, env: &Environment) -> Result<Self, ConfigError> {
        let endpoint = args
            .maas_endpoint
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .ok_or(ConfigError::MissingEndpoint)?;
        let key = load_api_key(args, env)?;
        let installation_id = args
            .installation_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map_or_else(|| default_installation_id(&env.namespace), str::to_owned);
        if !valid_installation_id(&installation_id) {
            return Err(ConfigError::InvalidInstallationId(installation_id));
        }
        let mut builder = MaasConfig::builder(endpoint, key)
            .max_concurrent_requests(args.maas_max_concurrency as usize)
            .retry_policy(RetryPolicy::default());
        if let Some(path) = &args.maas_ca_file {
            let pem = read_file("--maas-ca-file", path)?;
            if !pem.trim_ascii().is_empty() {
                builder = builder.ca_bundle_pem(pem, maas_api_client::CaMode::Only);
            }
        }
        let maas = builder.build().map_err(|e| ConfigError::InvalidEndpoint {
            reason: e.to_string(),
        })?;
        let insecure_http = maas.api_root.scheme() == "http";
        if insecure_http && !args.maas_allow_insecure_http {
            return Err(ConfigError::InsecureEndpoint(maas.api_root.to_string()));
        }
        let binding_namespace = args
            .host_binding_namespace
            .as_deref()
            .unwrap_or(&env.namespace)
            .trim();
        Ok(Self {
            maas,
            installation_id,
            binding_namespace: if binding_namespace.is_empty() {
                "default".to_owned()
            } else {
                binding_namespace.to_owned()
            },
            inventory_sync_interval: args.inventory_sync_interval,
            rate_limit: NonZeroU32::new(args.maas_rate_limit).unwrap_or(NonZeroU32::MIN),
            orphan_sweep_interval: args.orphan_sweep_interval,
            orphan_grace_period: args.orphan_grace_period,
            release_unclaimed_after: args.release_unclaimed_after.filter(|d| !d.is_zero()),
            observe_interval: args.maas_observe_interval,
            deploy_retries: args.deploy_retries,
            workload_annotations: args.maas_workload_annotations,
            insecure_http,
            dns_domains: AllowedDomains::parse(&args.dns_domains),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    const KEY: &str = "ck:tk:very-secret-token";

    /// The gateway's command line: the shared flags and the gateway's own, as `main` has it.
    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        common: capmaas_runtime::CommonArgs,
        #[command(flatten)]
        gateway: GatewayArgs,
    }

    fn args(extra: &[&str]) -> GatewayArgs {
        let mut v = vec!["maas-client"];
        v.extend_from_slice(extra);
        Flags::try_parse_from(v).unwrap().gateway
    }

    /// Resolves `extra` flags with [`KEY`] in the environment.
    fn resolve(extra: &[&str]) -> Result<GatewayConfig, ConfigError> {
        GatewayConfig::resolve(&args(extra), &env(Some(KEY)))
    }

    fn env(key: Option<&str>) -> Environment {
        Environment {
            api_key: key.map(str::to_owned),
            namespace: "capmaas-system".into(),
        }
    }

    #[test]
    fn resolves_defaults() {
        let cfg = resolve(&["--maas-endpoint=https://127.0.0.1:5240/MAAS/"]).unwrap();
        assert_eq!(cfg.installation_id, "capmaas-capmaas-system");
        assert_eq!(cfg.maas.max_concurrent_requests, 8);
        assert_eq!(cfg.rate_limit.get(), 20);
        assert_eq!(cfg.inventory_sync_interval, None);
        assert_eq!(cfg.orphan_grace_period, Duration::from_secs(300));
        assert_eq!(
            cfg.maas.api_root.as_str(),
            "https://127.0.0.1:5240/MAAS/api/2.0/"
        );
        assert!(!format!("{cfg:?}").contains("very-secret-token"));
    }

    #[test]
    fn plain_http_needs_an_explicit_flag() {
        let err = resolve(&["--maas-endpoint=http://maas.lab:5240/MAAS/"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--maas-allow-insecure-http"), "{text}");
        assert!(!text.contains("very-secret-token"), "{text}");
        let cfg = resolve(&[
            "--maas-endpoint=http://maas.lab:5240/MAAS/",
            "--maas-allow-insecure-http",
        ])
        .unwrap();
        assert!(cfg.insecure_http);
        // With a value, as clusterctl's components pass it.
        for (value, accepted) in [("true", true), ("false", false)] {
            let flag = format!("--maas-allow-insecure-http={value}");
            let resolved = resolve(&["--maas-endpoint=http://maas.lab:5240/MAAS/", &flag]);
            assert_eq!(resolved.is_ok(), accepted, "{flag}");
        }
        let cfg = resolve(&["--maas-endpoint=https://maas.lab:5443/MAAS/"]).unwrap();
        assert!(!cfg.insecure_http);
    }

    #[test]
    fn flags_override() {
        let cfg = resolve(&[
            "--maas-endpoint=https://m/MAAS",
            "--installation-id=prod-1",
            "--inventory-sync-interval=2s",
            "--maas-max-concurrency=3",
            "--maas-rate-limit=50",
        ])
        .unwrap();
        assert_eq!(cfg.installation_id, "prod-1");
        assert_eq!(cfg.inventory_sync_interval, Some(Duration::from_secs(2)));
        assert_eq!(cfg.maas.max_concurrent_requests, 3);
        assert_eq!(cfg.rate_limit.get(), 50);
    }

    /// What clusterctl renders when a user leaves a variable at its empty default: an empty
    /// installation id and an empty CA file mean "not given", not an error.
    #[test]
    fn empty_clusterctl_defaults_mean_not_given() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "\n").unwrap();
        let ca_flag = format!("--maas-ca-file={}", ca.display());
        let cfg = resolve(&[
            "--maas-endpoint=https://maas.lab:5443/MAAS/",
            "--installation-id=",
            &ca_flag,
        ])
        .unwrap();
        assert_eq!(cfg.installation_id, "capmaas-capmaas-system");
        assert!(cfg.maas.tls.ca_bundle_pem.is_none());
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----").unwrap();
        let cfg = resolve(&["--maas-endpoint=https://maas.lab:5443/MAAS/", &ca_flag]).unwrap();
        assert!(cfg.maas.tls.ca_bundle_pem.is_some());
    }

    #[test]
    fn missing_values_name_the_variable() {
        let err = resolve(&[]).unwrap_err();
        assert!(matches!(err, ConfigError::MissingEndpoint));
        assert!(err.to_string().contains("MAAS_ENDPOINT=https://"));

        let err = GatewayConfig::resolve(&args(&["--maas-endpoint=https://m/MAAS"]), &env(None))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("MAAS_API_KEY=consumer_key:token_key:token_secret")
        );
        let err =
            GatewayConfig::resolve(&args(&["--maas-endpoint=https://m/MAAS"]), &env(Some("  ")))
                .unwrap_err();
        assert!(matches!(err, ConfigError::MissingApiKey));
    }

    #[test]
    fn malformed_values_are_errors_without_the_key() {
        let err = GatewayConfig::resolve(
            &args(&["--maas-endpoint=https://m/MAAS"]),
            &env(Some("only:two-secret")),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("MAAS_API_KEY"), "{text}");
        assert!(!text.contains("two-secret"), "{text}");

        let err = resolve(&["--maas-endpoint=not a url"]).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidEndpoint { .. }), "{err}");

        let err =
            resolve(&["--maas-endpoint=https://m/MAAS", "--installation-id=a/b"]).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidInstallationId(_)));
    }

    #[test]
    fn key_file_wins_and_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{KEY}\n")).unwrap();
        let flag = format!("--maas-api-key-file={}", path.display());
        let cfg = GatewayConfig::resolve(
            &args(&["--maas-endpoint=https://m/MAAS", &flag]),
            &env(Some("bad")),
        )
        .unwrap();
        assert_eq!(cfg.maas.api_key.token_key(), "tk");

        let missing = format!("--maas-api-key-file={}", dir.path().join("nope").display());
        let err = resolve(&["--maas-endpoint=https://m/MAAS", &missing]).unwrap_err();
        assert!(err.to_string().contains("--maas-api-key-file"));
    }
}
