//! Flags of the machine-controller beyond the common ones.

/// machine-controller flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ControllerArgs {
    /// MaasMachines reconciled in parallel (CAPMAAS's flag; same as --concurrency).
    #[arg(long, value_name = "N", conflicts_with = "concurrency",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub machine_concurrency: Option<u16>,
}

impl ControllerArgs {
    /// `common` with `--machine-concurrency` copied into `--concurrency` when it was given.
    pub fn apply_to(&self, mut common: capmaas_runtime::CommonArgs) -> capmaas_runtime::CommonArgs {
        if self.machine_concurrency.is_some() {
            common.concurrency = self.machine_concurrency;
        }
        common
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_runtime::CommonArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        controller: ControllerArgs,
    }

    #[test]
    fn machine_concurrency_is_an_alias() {
        let a = Cli::try_parse_from(["mc", "--machine-concurrency=3"]).unwrap();
        assert_eq!(a.controller.machine_concurrency, Some(3));
        assert_eq!(a.controller.apply_to(a.common).concurrency, Some(3));
        let b = Cli::try_parse_from(["mc", "--concurrency", "5"]).unwrap();
        assert_eq!(b.common.concurrency, Some(5));
        assert_eq!(b.controller.apply_to(b.common).concurrency, Some(5));
        assert!(Cli::try_parse_from(["mc", "--concurrency=5", "--machine-concurrency=3"]).is_err());
        assert!(Cli::try_parse_from(["mc", "--machine-concurrency=0"]).is_err());
    }
}
