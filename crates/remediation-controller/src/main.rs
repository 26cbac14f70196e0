//! `remediation-controller`: the MaasRemediation controller Deployment.

fn main() -> std::process::ExitCode {
    use remediation_controller::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
