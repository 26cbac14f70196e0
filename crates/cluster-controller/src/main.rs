//! `cluster-controller`: the MaasCluster controller Deployment.

fn main() -> std::process::ExitCode {
    use cluster_controller::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
