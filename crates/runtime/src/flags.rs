//! Command-line flags shared by every binary, with CAPMAAS-compatible names.
//!
//! Flatten [`CommonArgs`] into the binary's own `clap::Parser`:
//!
//! ```
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     common: capmaas_runtime::CommonArgs,
//! }
//!
//! let args = Args::parse_from(["machine-controller", "--metrics-bind-addr=127.0.0.1:8080", "--leader-elect"]);
//! assert!(args.common.leader_elect);
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::compat_flags::CompatArgs;
use crate::error::{Error, Result};

/// Where the service account token's namespace is mounted inside a pod.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Flags every controller binary accepts. `--help` documents each one. The settings a
/// deployment changes per environment (leader election, sync period, log format and level)
/// can also come from the environment (`CAPMAAS_LEADER_ELECT`, `CAPMAAS_SYNC_PERIOD`,
/// `CAPMAAS_LOG_FORMAT`, `RUST_LOG`), so one kustomize patch sets them for every Deployment; a
/// flag on the command line wins.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Address the Prometheus /metrics endpoint listens on over HTTPS, for callers the API
    /// server authenticates (TokenReview) and authorizes to `get` the non-resource URL
    /// `/metrics` (SubjectAccessReview), as Cluster API's controllers serve it: `:PORT` (all
    /// interfaces), `HOST:PORT`, or `0` to disable. Superseded by --metrics-bind-addr.
    #[arg(long, value_name = "ADDR", default_value = ":8443")]
    pub diagnostics_address: ListenAddr,

    /// Serve --diagnostics-address as plain HTTP to anyone who reaches it.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub insecure_diagnostics: bool,

    /// Folder holding the certificate /metrics is served with over HTTPS, as `tls.crt` and
    /// `tls.key` (a mounted `kubernetes.io/tls` Secret, e.g. cert-manager's), reloaded when it
    /// is renewed. Without it a self-signed certificate is made at startup.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<PathBuf>,

    /// Plain-HTTP address of /metrics with no authentication, as CAPMAAS and older Cluster API
    /// managers take it (`0` disables metrics). When given, it replaces --diagnostics-address.
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind_addr: Option<ListenAddr>,

    /// Address the /healthz (liveness) and /readyz (readiness) endpoints listen on: `:PORT`,
    /// `HOST:PORT`, or `0` to disable. May equal --metrics-bind-addr to serve everything on one port.
    #[arg(long, value_name = "ADDR", default_value = ":9440")]
    pub health_addr: ListenAddr,

    /// Elect a leader through a coordination.k8s.io Lease so that only one replica reconciles.
    /// Accepts `--leader-elect`, `--leader-elect=true` and `--leader-elect=false`.
    #[arg(
        long,
        env = "CAPMAAS_LEADER_ELECT",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub leader_elect: bool,

    /// Namespace of the leader election Lease. Defaults to the pod's namespace (POD_NAMESPACE, then
    /// the mounted service account namespace), else `default`.
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader election Lease. Defaults to a name derived from the binary, so each
    /// Deployment elects its own leader.
    #[arg(long, value_name = "NAME")]
    pub leader_election_id: Option<String>,

    /// Minimum interval at which every watched object is reconciled again even without changes,
    /// e.g. `120m`, `2h`, `90s`, `1h30m`.
    #[arg(
        long,
        env = "CAPMAAS_SYNC_PERIOD",
        value_name = "DURATION",
        default_value = "120m",
        value_parser = parse_duration
    )]
    pub sync_period: Duration,

    /// Only watch objects in this namespace. Empty (the default) watches all namespaces. The
    /// namespaced install (deploy/components/namespaced) sets it with its RBAC.
    #[arg(
        long,
        env = "CAPMAAS_WATCH_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = ""
    )]
    pub namespace: String,

    /// Number of objects reconciled in parallel. Defaults to a value chosen per binary.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: Option<u16>,

    /// Path to a kubeconfig file. Without it the KUBECONFIG variable, then ~/.kube/config, then the
    /// in-cluster service account are used.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Log output format: `json`, `text`, or `auto` (json unless stderr is a terminal).
    #[arg(long, env = "CAPMAAS_LOG_FORMAT", value_enum, value_name = "FORMAT", default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,

    /// Log filter in tracing EnvFilter syntax, e.g. `info` or `info,capmaas=debug,kube=warn`.
    /// Default `info` (or what klog's `--v` stands for, see [`CompatArgs`]).
    #[arg(long, value_name = "FILTER", env = "RUST_LOG")]
    pub log_level: Option<String>,

    /// Flags of CAPMAAS's manager and of klog, accepted and mapped or ignored.
    #[command(flatten)]
    pub compat: CompatArgs,
}

/// Only used to parse [`CommonArgs`] on its own (defaults, tests).
#[derive(Debug, clap::Parser)]
pub(crate) struct CommonArgsOnly {
    #[command(flatten)]
    common: CommonArgs,
}

impl CommonArgs {
    /// Parses `CommonArgs` from an argument list (first item is the program name).
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        <CommonArgsOnly as clap::Parser>::try_parse_from(args).map(|a| a.common)
    }

    /// The log filter: `--log-level` (or `RUST_LOG`), else what `--v` stands for, else `info`.
    pub fn log_filter(&self) -> String {
        self.log_level
            .clone()
            .or_else(|| self.compat.verbosity_filter().map(ToOwned::to_owned))
            .unwrap_or_else(|| "info".to_owned())
    }

    /// Where `/metrics` is served, and whether over authenticated HTTPS: --metrics-bind-addr
    /// when given (plain, as CAPMAAS's manifests expect), else --diagnostics-address, secure
    /// unless --insecure-diagnostics.
    pub fn metrics_endpoint(&self) -> (&ListenAddr, bool) {
        match &self.metrics_bind_addr {
            Some(plain) => (plain, false),
            None => (&self.diagnostics_address, !self.insecure_diagnostics),
        }
    }

    /// The namespace to watch, `None` for all namespaces.
    pub fn watch_namespace(&self) -> Option<&str> {
        let ns = self.namespace.trim();
        (!ns.is_empty()).then_some(ns)
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON when stderr is not a terminal (in a pod), human-readable text otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

impl LogFormat {
    /// Resolves `Auto` given whether stderr is a terminal.
    pub fn use_json(self, stderr_is_terminal: bool) -> bool {
        match self {
            Self::Json => true,
            Self::Text => false,
            Self::Auto => !stderr_is_terminal,
        }
    }
}

/// A listen address in the controller-runtime style: `:8080`, `127.0.0.1:8080`, `[::1]:8080`,
/// `localhost:8080`, or `0` for "disabled".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// The endpoint is switched off.
    Disabled,
    /// Listen on `host:port`; an empty host in the flag means all IPv4 interfaces.
    Enabled {
        /// Host name or IP address (without IPv6 brackets).
        host: String,
        /// TCP port; 0 asks the OS for a free port.
        port: u16,
    },
}

impl ListenAddr {
    /// Resolves the address to socket addresses (one DNS lookup for host names). `None` if disabled.
    pub async fn resolve(&self) -> Result<Option<SocketAddr>> {
        let Self::Enabled { host, port } = self else {
            return Ok(None);
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Some(SocketAddr::new(ip, *port)));
        }
        let mut addrs = tokio::net::lookup_host((host.as_str(), *port))
            .await
            .map_err(|source| Error::Resolve {
                addr: self.to_string(),
                source,
            })?;
        addrs.next().map(Some).ok_or_else(|| Error::Resolve {
            addr: self.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address found"),
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("0"),
            Self::Enabled { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Self::Enabled { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// Why a listen address was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenAddrError {
    /// No `:` between host and port.
    #[error("expected `:PORT`, `HOST:PORT` or `0`, got {0:?}")]
    MissingPort(String),
    /// The port is not a number in 0..=65535.
    #[error("invalid port {0:?}")]
    InvalidPort(String),
    /// An IPv6 address without brackets, or unbalanced brackets.
    #[error("invalid host {0:?} (write IPv6 addresses as [::1]:PORT)")]
    InvalidHost(String),
}

impl FromStr for ListenAddr {
    type Err = ListenAddrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "0" {
            return Ok(Self::Disabled);
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| ListenAddrError::MissingPort(s.to_owned()))?;
        let port: u16 = port
            .parse()
            .map_err(|_| ListenAddrError::InvalidPort(port.to_owned()))?;
        let host = if let Some(inner) = host.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| ListenAddrError::InvalidHost(host.to_owned()))?;
            if inner.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(ListenAddrError::InvalidHost(host.to_owned()));
            }
            inner.to_owned()
        } else if host.contains([':', '[', ']']) {
            return Err(ListenAddrError::InvalidHost(host.to_owned()));
        } else if host.is_empty() {
            // Go's net.Listen(":8080") listens on every interface.
            Ipv4Addr::UNSPECIFIED.to_string()
        } else {
            host.to_owned()
        };
        Ok(Self::Enabled { host, port })
    }
}

/// Parses a human duration such as `120m`, `2h`, `1h30m`, `90s` (jiff's friendly format, which also
/// accepts ISO 8601 like `PT2H`). Negative durations are rejected.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = s
        .trim()
        .parse()
        .map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("duration {s:?} must not be negative"))
}

/// Picks the leader election namespace: the flag, else POD_NAMESPACE, else the service account
/// namespace file's content, else `default`. Empty values count as unset.
pub fn resolve_leader_namespace(
    flag: Option<&str>,
    pod_namespace_env: Option<&str>,
    service_account_namespace: Option<&str>,
) -> String {
    [flag, pod_namespace_env, service_account_namespace]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or("default")
        .to_owned()
}

/// [`resolve_leader_namespace`] reading POD_NAMESPACE and the mounted service account file.
pub fn leader_namespace_from_env(flag: Option<&str>) -> String {
    let env = std::env::var("POD_NAMESPACE").ok();
    let file = std::fs::read_to_string(Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE)).ok();
    resolve_leader_namespace(flag, env.as_deref(), file.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled(host: &str, port: u16) -> ListenAddr {
        ListenAddr::Enabled {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn listen_addr_forms() {
        assert_eq!(":8080".parse(), Ok(enabled("0.0.0.0", 8080)));
        assert_eq!("127.0.0.1:9440".parse(), Ok(enabled("127.0.0.1", 9440)));
        assert_eq!("localhost:1".parse(), Ok(enabled("localhost", 1)));
        assert_eq!("[::1]:8443".parse(), Ok(enabled("::1", 8443)));
        assert_eq!("[::]:0".parse(), Ok(enabled("::", 0)));
        assert_eq!("0".parse(), Ok(ListenAddr::Disabled));
        assert_eq!(" :80 ".parse(), Ok(enabled("0.0.0.0", 80)));
    }

    #[test]
    fn listen_addr_rejects_garbage() {
        assert!(matches!(
            "8080".parse::<ListenAddr>(),
            Err(ListenAddrError::MissingPort(_))
        ));
        assert!(matches!(
            ":http".parse::<ListenAddr>(),
            Err(ListenAddrError::InvalidPort(_))
        ));
        assert!(matches!(
            ":65536".parse::<ListenAddr>(),
            Err(ListenAddrError::InvalidPort(_))
        ));
        assert!(matches!(
            "::1:80".parse::<ListenAddr>(),
            Err(ListenAddrError::InvalidHost(_))
        ));
        assert!(matches!(
            "[::1:80".parse::<ListenAddr>(),
            Err(ListenAddrError::InvalidHost(_))
        ));
        assert!(matches!(
            "[nothost]:80".parse::<ListenAddr>(),
            Err(ListenAddrError::InvalidHost(_))
        ));
        assert!(matches!(
            "".parse::<ListenAddr>(),
            Err(ListenAddrError::MissingPort(_))
        ));
    }

    #[test]
    fn listen_addr_display_round_trips() {
        for s in ["0.0.0.0:8080", "[::1]:8443", "0", "example.org:1"] {
            let a: ListenAddr = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
            assert_eq!(a.to_string().parse::<ListenAddr>().unwrap(), a);
        }
    }

    #[tokio::test]
    async fn listen_addr_resolves() {
        let a: ListenAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(
            a.resolve().await.unwrap(),
            Some("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(ListenAddr::Disabled.resolve().await.unwrap(), None);
        let v6: ListenAddr = "[::1]:9".parse().unwrap();
        assert_eq!(
            v6.resolve().await.unwrap(),
            Some("[::1]:9".parse().unwrap())
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("120m"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("PT10M"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn defaults_match_capmaas() {
        let a = CommonArgs::try_parse_from(["x"]).unwrap();
        // Metrics over authenticated HTTPS on :8443, as Cluster API's managers serve them
        // (CAPMAAS's plain :8080 is what --metrics-bind-addr asks for).
        assert_eq!(a.metrics_endpoint(), (&enabled("0.0.0.0", 8443), true));
        assert_eq!(a.metrics_cert_dir, None);
        assert_eq!(a.health_addr, enabled("0.0.0.0", 9440));
        assert!(!a.leader_elect);
        assert_eq!(a.sync_period, Duration::from_secs(120 * 60));
        assert_eq!(a.watch_namespace(), None);
        assert_eq!(a.concurrency, None);
        assert_eq!(a.kubeconfig, None);
        assert_eq!(a.log_format, LogFormat::Auto);
        assert_eq!(a.leader_election_id, None);
    }

    #[test]
    fn flags_parse() {
        let a = CommonArgs::try_parse_from([
            "x",
            "--metrics-bind-addr",
            "127.0.0.1:8080",
            "--health-addr=:9441",
            "--leader-elect",
            "--leader-election-namespace",
            "capmaas-system",
            "--leader-election-id=my-lease",
            "--sync-period=10m",
            "--namespace",
            "team-a",
            "--concurrency",
            "4",
            "--kubeconfig",
            "/tmp/kc",
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ])
        .unwrap();
        assert_eq!(a.metrics_endpoint(), (&enabled("127.0.0.1", 8080), false));
        assert_eq!(a.health_addr, enabled("0.0.0.0", 9441));
        assert!(a.leader_elect);
        assert_eq!(
            a.leader_election_namespace.as_deref(),
            Some("capmaas-system")
        );
        assert_eq!(a.leader_election_id.as_deref(), Some("my-lease"));
        assert_eq!(a.sync_period, Duration::from_secs(600));
        assert_eq!(a.watch_namespace(), Some("team-a"));
        assert_eq!(a.concurrency, Some(4));
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert_eq!(a.log_format, LogFormat::Json);
        assert_eq!(a.log_filter(), "debug");
    }

    #[test]
    fn leader_elect_accepts_go_bool_forms() {
        let t = CommonArgs::try_parse_from(["x", "--leader-elect=true"]).unwrap();
        assert!(t.leader_elect);
        let f = CommonArgs::try_parse_from(["x", "--leader-elect=false"]).unwrap();
        assert!(!f.leader_elect);
        assert!(CommonArgs::try_parse_from(["x", "--leader-elect=maybe"]).is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(CommonArgs::try_parse_from(["x", "--concurrency=0"]).is_err());
        assert!(CommonArgs::try_parse_from(["x", "--metrics-bind-addr=8080"]).is_err());
        assert!(CommonArgs::try_parse_from(["x", "--sync-period=-1m"]).is_err());
        assert!(CommonArgs::try_parse_from(["x", "--log-format=xml"]).is_err());
        let disabled = CommonArgs::try_parse_from(["x", "--metrics-bind-addr=0"]).unwrap();
        assert_eq!(disabled.metrics_endpoint().0, &ListenAddr::Disabled);
    }

    #[test]
    fn diagnostics_flags_are_cluster_apis() {
        let a = CommonArgs::try_parse_from([
            "x",
            "--diagnostics-address=127.0.0.1:9000",
            "--metrics-cert-dir=/certs",
        ])
        .unwrap();
        assert_eq!(a.metrics_endpoint(), (&enabled("127.0.0.1", 9000), true));
        assert_eq!(a.metrics_cert_dir, Some(PathBuf::from("/certs")));
        let plain = CommonArgs::try_parse_from(["x", "--insecure-diagnostics"]).unwrap();
        assert_eq!(plain.metrics_endpoint(), (&enabled("0.0.0.0", 8443), false));
        let secure = CommonArgs::try_parse_from(["x", "--insecure-diagnostics=false"]).unwrap();
        assert!(secure.metrics_endpoint().1);
    }

    #[test]
    fn log_format_resolution() {
        assert!(LogFormat::Auto.use_json(false));
        assert!(!LogFormat::Auto.use_json(true));
        assert!(LogFormat::Json.use_json(true));
        assert!(!LogFormat::Text.use_json(false));
    }

    #[test]
    fn leader_namespace_precedence() {
        assert_eq!(
            resolve_leader_namespace(Some("a"), Some("b"), Some("c")),
            "a"
        );
        assert_eq!(resolve_leader_namespace(None, Some("b"), Some("c")), "b");
        assert_eq!(
            resolve_leader_namespace(Some(""), Some(" "), Some("c\n")),
            "c"
        );
        assert_eq!(resolve_leader_namespace(None, None, None), "default");
    }

    #[test]
    fn help_documents_every_flag() {
        let help = <CommonArgsOnly as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        for flag in [
            "--diagnostics-address",
            "--insecure-diagnostics",
            "--metrics-cert-dir",
            "--metrics-bind-addr",
            "--health-addr",
            "--leader-elect",
            "--leader-election-namespace",
            "--leader-election-id",
            "--sync-period",
            "--namespace",
            "--concurrency",
            "--kubeconfig",
            "--log-format",
            "--log-level",
        ] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }
}
