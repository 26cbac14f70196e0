//! `webhook-server`: the admission webhook Deployment.

use std::process::ExitCode;

use capmaas_runtime::{CommonArgs, exit_code};
use clap::Parser;
use webhook_server::{BINARY, WebhookArgs};

/// Defaulting and validation webhooks of the MAAS Cluster API provider.
#[derive(Debug, Parser)]
#[command(name = BINARY, version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    webhook: WebhookArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    exit_code(
        BINARY,
        webhook_server::start(args.common, args.webhook).await,
    )
}
