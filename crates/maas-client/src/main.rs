//! `maas-client`: the MAAS gateway Deployment. See the crate documentation.

use std::process::ExitCode;

use capmaas_runtime::{CommonArgs, exit_code};
use clap::Parser;
use maas_client::BINARY;
use maas_client::config::GatewayArgs;

#[derive(Debug, Parser)]
#[command(name = BINARY, version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    gateway: GatewayArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    exit_code(BINARY, maas_client::start(args.common, args.gateway).await)
}
