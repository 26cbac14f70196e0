//! Flags of the machine-controller beyond the common ones.

/// What `--help` says the binary is.
pub const ABOUT: &str = "Reconciles MaasMachines: chooses and claims MaasHosts, requests their \
                         deployment, sets providerIDs and links workload Nodes.";
/// Binary name; also gives the field manager and event reporter `capmaas-machine-controller`
/// and the Lease name.
pub const BINARY: &str = "machine-controller";
/// Default `--concurrency` / `--machine-concurrency` (CAPMAAS uses 2).
pub const DEFAULT_CONCURRENCY: u16 = 10;

/// machine-controller flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ControllerArgs {
    /// MaasMachines reconciled in parallel (CAPMAAS's flag; same as --concurrency).
    #[arg(long, value_name = "N", conflicts_with = "concurrency",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub machine_concurrency: Option<u16>,
    /// Import a MAAS resource pool that a MaasMachine asks for and no MaasInventory imports:
    /// an inventory of that pool, open to every namespace, is created in
    /// --on-demand-inventory-namespace (as CAPMAAS users expect: a generated cluster needs no
    /// extra object). Default true.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub import_pools_on_demand: Option<bool>,
    /// Namespace of the inventories imported on demand. Default: the watched namespace with
    /// --namespace, else the pod's (POD_NAMESPACE).
    #[arg(long, value_name = "NAMESPACE")]
    pub on_demand_inventory_namespace: Option<String>,
}

impl ControllerArgs {
    /// Where pools are imported on demand (`None`: they are not), given the watched namespace.
    pub fn on_demand_namespace(&self, watched: Option<&str>) -> Option<String> {
        if self.import_pools_on_demand == Some(false) {
            return None;
        }
        let chosen = self
            .on_demand_inventory_namespace
            .clone()
            .filter(|ns| !ns.trim().is_empty())
            .or_else(|| watched.map(ToOwned::to_owned))
            .unwrap_or_else(|| capmaas_runtime::flags::leader_namespace_from_env(None));
        Some(chosen)
    }

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

    #[test]
    fn pools_are_imported_on_demand_unless_turned_off() {
        let on = Cli::try_parse_from(["mc", "--on-demand-inventory-namespace=sys"]).unwrap();
        assert_eq!(
            on.controller.on_demand_namespace(None).as_deref(),
            Some("sys")
        );
        let scoped = Cli::try_parse_from(["mc"]).unwrap();
        assert_eq!(
            scoped
                .controller
                .on_demand_namespace(Some("team"))
                .as_deref(),
            Some("team")
        );
        let off = Cli::try_parse_from(["mc", "--import-pools-on-demand=false"]).unwrap();
        assert_eq!(off.controller.on_demand_namespace(Some("team")), None);
    }
}
