//! `remediation-controller`: the MaasRemediation controller Deployment.

use std::process::ExitCode;

use capmaas_runtime::{CommonArgs, exit_code};
use clap::Parser;
use remediation_controller::{BINARY, ControllerArgs};

/// The MaasRemediation controller of the MAAS Cluster API provider.
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
        remediation_controller::start(args.common, args.controller).await,
    )
}
