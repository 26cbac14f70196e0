//! `maas-client`: the MAAS gateway Deployment. See the crate documentation.

use std::process::ExitCode;

use clap::Parser;
use maas_gateway::config::Args;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("maas-client: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(maas_gateway::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maas-client: {}", capmaas_runtime::error_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
