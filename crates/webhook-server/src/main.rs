//! `webhook-server`: the admission webhook Deployment.

fn main() -> std::process::ExitCode {
    use webhook_server::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
