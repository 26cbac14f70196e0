//! Flags of the data-controller beyond the common ones.

/// What `--help` says the binary is.
pub const ABOUT: &str =
    "Data templates and the MaasIPPool IPAM provider of the MAAS Cluster API provider.";
/// Binary name; also gives the field manager `capmaas-data-controller` and the Lease name.
pub const BINARY: &str = "data-controller";
/// `--concurrency` default: claims render in parallel, each a handful of API calls.
pub const DEFAULT_CONCURRENCY: u16 = 8;

/// data-controller flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Serve IPAddressClaims whose pool is a MaasIPPool. Turn it off to run the IPAM provider
    /// as a Deployment of its own (another data-controller with `--data-templates=false`), or
    /// when another IPAM provider serves MaasIPPools.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub ipam: bool,

    /// Render MaasDataTemplates for MaasDataClaims. Turn it off to run only the IPAM provider.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub data_templates: bool,
}

impl ControllerArgs {
    /// Refuses a configuration that would run nothing.
    pub fn validate(&self) -> Result<(), crate::error::Error> {
        if self.ipam || self.data_templates {
            Ok(())
        } else {
            Err(crate::error::Error::Config(
                "--ipam=false and --data-templates=false leave nothing to run".into(),
            ))
        }
    }
}

impl Default for ControllerArgs {
    fn default() -> Self {
        Self {
            ipam: true,
            data_templates: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        args: ControllerArgs,
    }

    #[test]
    fn both_halves_run_by_default_and_each_can_be_turned_off() {
        let all = Flags::try_parse_from(["data-controller"]).unwrap().args;
        assert!(all.ipam && all.data_templates);
        let ipam_only = Flags::try_parse_from(["data-controller", "--data-templates=false"])
            .unwrap()
            .args;
        assert!(ipam_only.ipam && !ipam_only.data_templates);
        assert!(Flags::try_parse_from(["data-controller", "--ipam=maybe"]).is_err());
        let nothing =
            Flags::try_parse_from(["data-controller", "--ipam=false", "--data-templates=false"])
                .unwrap()
                .args;
        assert!(nothing.validate().is_err());
        assert!(all.validate().is_ok() && ipam_only.validate().is_ok());
    }
}
