//! `machine-controller`: the MaasMachine controller Deployment.

use capmaas_runtime::{CommonArgs, Runtime};
use clap::Parser;
use machine_controller::{BINARY, DEFAULT_CONCURRENCY};

/// Reconciles MaasMachines: chooses and claims MaasHosts, requests their deployment, sets
/// providerIDs and links workload Nodes.
#[derive(Debug, Parser)]
#[command(name = "machine-controller", version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,

    /// MaasMachines reconciled in parallel (CAPMAAS's flag; same as --concurrency).
    #[arg(long, value_name = "N", conflicts_with = "concurrency",
          value_parser = clap::value_parser!(u16).range(1..))]
    machine_concurrency: Option<u16>,
}

#[tokio::main]
async fn main() -> Result<(), capmaas_runtime::Error> {
    let mut args = Args::parse();
    if args.machine_concurrency.is_some() {
        args.common.concurrency = args.machine_concurrency;
    }
    let runtime = Runtime::builder(BINARY)
        .with_args(args.common)
        .default_concurrency(DEFAULT_CONCURRENCY)
        .build()
        .await?;
    runtime.run(machine_controller::run).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_concurrency_is_an_alias() {
        let a = Args::try_parse_from(["mc", "--machine-concurrency=3"]).unwrap();
        assert_eq!(a.machine_concurrency, Some(3));
        let b = Args::try_parse_from(["mc", "--concurrency", "5"]).unwrap();
        assert_eq!(b.common.concurrency, Some(5));
        assert!(
            Args::try_parse_from(["mc", "--concurrency=5", "--machine-concurrency=3"]).is_err()
        );
        assert!(Args::try_parse_from(["mc", "--machine-concurrency=0"]).is_err());
    }
}
