//! MAAS's DNS as the test machine's processes see it: what MAAS serves for its domain (the DNS
//! resources, and `<hostname>.<domain>` of every deployed machine) read through the MAAS API and
//! written, with the machine's own `/etc/hosts`, into a hosts file that the installed providers
//! get bind-mounted at `/etc/hosts`. The file is rewritten in place (a bind mount holds the
//! inode), and only when what MAAS serves changed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use maas_sim::{NodeStatus, SimHandle};

/// The resolver's table and hosts file; cheap to clone.
#[derive(Debug, Clone)]
pub struct Resolver {
    maas: maas_api_client::MaasClient,
    domain: String,
    hosts_file: PathBuf,
    base: String,
    table: Arc<Mutex<BTreeMap<String, Vec<IpAddr>>>>,
}

impl Resolver {
    /// A resolver of `domain`, writing `hosts_file` (created now with the machine's hosts).
    pub fn new(maas: maas_api_client::MaasClient, domain: &str, hosts_file: PathBuf) -> Self {
        let base = std::fs::read_to_string("/etc/hosts")
            .unwrap_or_else(|_| "127.0.0.1 localhost\n".into());
        let _ = std::fs::write(&hosts_file, &base);
        Self {
            maas,
            domain: domain.to_owned(),
            hosts_file,
            base,
            table: Arc::default(),
        }
    }

    /// The addresses served for `name`.
    pub fn lookup(&self, name: &str) -> Vec<IpAddr> {
        self.lock()
            .get(name.trim_end_matches('.'))
            .cloned()
            .unwrap_or_default()
    }

    /// The hosts file.
    pub fn hosts_file(&self) -> PathBuf {
        self.hosts_file.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<IpAddr>>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads what MAAS serves now; on a MAAS error the last table stays.
    pub async fn refresh(&self, sim: &SimHandle) {
        let records = match self
            .maas
            .list_dns_resources(&maas_api_client::DnsResourceFilter::default())
            .await
        {
            Ok(records) => records,
            Err(e) => {
                tracing::debug!(error = %e, "resolver: MAAS DNS resources not read");
                return;
            }
        };
        let mut table: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for record in records {
            let addresses: Vec<IpAddr> = record.ip_addresses.iter().filter_map(|a| a.ip).collect();
            if !addresses.is_empty() {
                table
                    .entry(record.fqdn.clone())
                    .or_default()
                    .extend(addresses);
            }
        }
        for machine in sim.machines() {
            if matches!(machine.status, NodeStatus::Deployed | NodeStatus::Deploying) {
                let addresses: Vec<IpAddr> = machine
                    .ip_addresses
                    .iter()
                    .filter_map(|a| a.parse().ok())
                    .collect();
                table
                    .entry(format!("{}.{}", machine.hostname, self.domain))
                    .or_default()
                    .extend(addresses);
            }
        }
        let mut current = self.lock();
        if *current == table {
            return;
        }
        let mut text = self.base.clone();
        text.push_str("\n# MAAS DNS (capmaas e2e resolver)\n");
        for (name, addresses) in &table {
            for address in addresses {
                let _ = writeln!(text, "{address} {name}");
            }
        }
        // In place: the providers' /etc/hosts is a bind mount of this inode.
        if let Err(e) = std::fs::write(&self.hosts_file, text) {
            tracing::warn!(error = %e, "resolver: hosts file not written");
            return;
        }
        *current = table;
    }
}
