//! `machine-controller`: the MaasMachine controller Deployment.

use std::process::ExitCode;

use capmaas_runtime::{CommonArgs, exit_code};
use clap::Parser;
use machine_controller::{BINARY, ControllerArgs};

/// Reconciles MaasMachines: chooses and claims MaasHosts, requests their deployment, sets
/// providerIDs and links workload Nodes.
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
        machine_controller::start(args.common, args.controller).await,
    )
}
