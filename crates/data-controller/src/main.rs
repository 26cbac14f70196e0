//! `data-controller`: the data template and MaasIPPool IPAM Deployment.

fn main() -> std::process::ExitCode {
    use data_controller::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
