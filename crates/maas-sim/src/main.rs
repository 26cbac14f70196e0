//! `maas-sim`: run the MAAS API simulator as a process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use maas_sim::{ApiKey, FaultConfig, LatencyProfile, SimConfig, Simulator, Timings, TlsFiles};

/// A faithful MAAS REST API 2.0 simulator (machines, allocation, deploy/release, power,
/// networking, DNS, tags, zones, pools) for tests, demos and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "maas-sim", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:5240")]
    listen: SocketAddr,
    /// Number of generated machines (ignored when --inventory lists machines).
    #[arg(long, default_value_t = 20)]
    machines: usize,
    /// Availability zones, comma separated (`default` always exists).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    zones: Vec<String>,
    /// Resource pools, comma separated (`default` always exists).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pools: Vec<String>,
    /// Seed of the deterministic hardware spread (CPU, memory, disks, NICs, system ids).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// YAML inventory of zones, pools, tags and machines (replaces generated machines).
    #[arg(long, value_name = "FILE")]
    inventory: Option<PathBuf>,
    /// JSON state file: loaded at start when present, rewritten after every change.
    #[arg(long, value_name = "FILE")]
    state_file: Option<PathBuf>,
    /// Seconds from Deploying to Deployed (0 = at the next read).
    #[arg(long, default_value_t = 10.0)]
    deploy_seconds: f64,
    /// Spread of the deployment time, percent: each machine takes --deploy-seconds × a factor in
    /// [1 − P/100, 1 + P/100] fixed by --seed and its system id (at most 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    deploy_spread_percent: u32,
    /// Seconds from Releasing to Ready for a powered-on machine.
    #[arg(long, default_value_t = 2.0)]
    release_seconds: f64,
    /// Seconds of a full disk erase (a quick erase takes a tenth).
    #[arg(long, default_value_t = 5.0)]
    erase_seconds: f64,
    /// Seconds of commissioning.
    #[arg(long, default_value_t = 5.0)]
    commission_seconds: f64,
    /// Seconds until power_on/power_off show in power_state.
    #[arg(long, default_value_t = 1.0)]
    power_seconds: f64,
    /// Fixed admin API key `consumer:token:secret` (else a random one, printed at start).
    #[arg(long, env = "MAAS_SIM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Accept replayed OAuth nonces and timestamps more than 300 s off. Real MAAS refuses both
    /// (401), and so does the simulator by default.
    #[arg(long)]
    lenient_auth: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// JSON fault configuration active from the start (same shape as PUT /_sim/faults).
    #[arg(long, value_name = "FILE")]
    faults: Option<PathBuf>,
    /// How long the region takes to answer: `none` (at once), `region` (a MAAS 3.x region
    /// under load, see docs/maas-sim.md), or a JSON profile file.
    #[arg(long, value_name = "PROFILE", default_value = "none")]
    latency_profile: String,
    /// Simulate a MAAS without VM hosts (4.0 / [dev]): no /vm-hosts/ or /pods/, deploy
    /// refuses install_kvm and register_vmhost.
    #[arg(long)]
    no_vm_hosts: bool,
}

fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("--{flag} must be a non-negative number of seconds"))
}

fn config(args: Args) -> Result<SimConfig, String> {
    let key = match &args.api_key {
        Some(k) => ApiKey::parse("admin", true, k).map_err(|e| e.to_string())?,
        None => ApiKey::generate("admin", true),
    };
    let faults = match &args.faults {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_json::from_str::<FaultConfig>(&text)
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => FaultConfig::default(),
    };
    let latency = LatencyProfile::named(&args.latency_profile).map_err(|e| e.to_string())?;
    Ok(SimConfig {
        listen: Some(args.listen),
        machines: args.machines,
        zones: args.zones,
        pools: args.pools,
        seed: args.seed,
        timings: Timings {
            deploy: seconds(args.deploy_seconds, "deploy-seconds")?,
            deploy_spread_percent: args.deploy_spread_percent,
            release: seconds(args.release_seconds, "release-seconds")?,
            erase: seconds(args.erase_seconds, "erase-seconds")?,
            commission: seconds(args.commission_seconds, "commission-seconds")?,
            power: seconds(args.power_seconds, "power-seconds")?,
        },
        api_keys: vec![key],
        strict_auth: !args.lenient_auth,
        inventory_file: args.inventory,
        state_file: args.state_file,
        faults,
        latency,
        vm_hosts: !args.no_vm_hosts,
        tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key }),
        ..SimConfig::default()
    })
}

/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first.
async fn wait_for_stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                eprintln!("maas-sim: cannot watch SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        result = tokio::signal::ctrl_c() => {
            if let Err(e) = result {
                eprintln!("maas-sim: cannot wait for Ctrl-C: {e}");
            }
        }
        () = terminate => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = match config(Args::parse()) {
        Ok(cfg) => cfg,
        Err(message) => {
            eprintln!("maas-sim: {message}");
            return ExitCode::from(2);
        }
    };
    let sim = match Simulator::start(cfg).await {
        Ok(sim) => sim,
        Err(e) => {
            eprintln!("maas-sim: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The key is printed once on stdout for the operator; it never goes to the logs.
    #[allow(clippy::print_stdout)]
    {
        println!("MAAS_URL={}", sim.url());
        println!("MAAS_API_KEY={}", sim.api_key());
    }
    wait_for_stop_signal().await;
    tracing::info!("shutting down");
    sim.shutdown().await;
    ExitCode::SUCCESS
}
