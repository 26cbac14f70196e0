//! `data-controller`: the data template and MaasIPPool IPAM Deployment.

use std::process::ExitCode;

use capmaas_runtime::{CommonArgs, exit_code};
use clap::Parser;
use data_controller::{BINARY, ControllerArgs};

/// Data templates and the MaasIPPool IPAM provider of the MAAS Cluster API provider.
#[derive(Debug, Parser)]
#[command(name = BINARY, version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    controller: ControllerArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    exit_code(
        BINARY,
        data_controller::start(args.common, args.controller).await,
    )
}
