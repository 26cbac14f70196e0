//! `maas-client`: the MAAS gateway Deployment. See the crate documentation.

fn main() -> std::process::ExitCode {
    use maas_client::{ABOUT, BINARY, start};
    capmaas_runtime::main(BINARY, ABOUT, start)
}
