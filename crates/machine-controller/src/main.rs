//! `machine-controller`: the MaasMachine controller Deployment.

fn main() -> std::process::ExitCode {
    use machine_controller::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
