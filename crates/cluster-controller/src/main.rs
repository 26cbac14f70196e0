//! `cluster-controller`: reconciles MaasClusters.

use capmaas_runtime::{CommonArgs, Runtime};
use clap::Parser;
use cluster_controller::{BINARY, ControllerArgs, DEFAULT_CONCURRENCY};

/// The MaasCluster controller of the MAAS Cluster API provider.
#[derive(Debug, Parser)]
#[command(name = BINARY, version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    controller: ControllerArgs,
}

#[tokio::main]
async fn main() -> Result<(), capmaas_runtime::Error> {
    let args = Args::parse();
    let runtime = Runtime::builder(BINARY)
        .with_args(args.common)
        .default_concurrency(DEFAULT_CONCURRENCY)
        .build()
        .await?;
    let controller = args.controller;
    runtime
        .run(move |ctx| cluster_controller::run(ctx, controller.clone()))
        .await
}
