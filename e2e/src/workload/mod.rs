//! The first boot of a deployed server, made honest: it reads the user data MAAS received and
//! does what cloud-init and kubeadm would do with it.
//!
//! - `kubeadm init`: the node's certificates from the CAs Cluster API put in the user data, a
//!   new etcd cluster and a kube-apiserver on the server's address (real programs, kubeadm's
//!   flags, the template's `apiServer.extraArgs`), the Node, the mirror pods of the static
//!   control-plane pods and `kube-system/kubeadm-config`.
//! - `kubeadm join --control-plane`: the same, the etcd member added to the members the etcd
//!   pods advertise, the ClusterConfiguration read from `kubeadm-config`.
//! - `kubeadm join`: the bootstrap token checked against the cluster, the Node registered.
//! - Every node's kubelet serves pod port-forwarding (`kubelet-portforward`, the kubelet's own
//!   streaming code), which KubeadmControlPlane uses to reach each etcd member and API server.
//!
//! The control-plane endpoint is reached through MAAS's DNS: [`resolver`] writes what MAAS
//! serves (its DNS resources and the deployed machines' names) into a hosts file that the
//! installed providers see as their `/etc/hosts`. Servers must have addresses of the test
//! machine (the simulator's `provisioning_subnet` in `127.0.0.0/8`).
//!
//! Not simulated: the controller-manager, scheduler, kube-proxy and CoreDNS do not run (their
//! pods are reported Running, which is what KubeadmControlPlane checks; of the
//! controller-manager's work only the pod garbage collector's orphan rule is done); the
//! kubelet's TLS bootstrap is replaced by a client certificate of the cluster CA for the
//! stand-in.

pub mod cloud_config;
pub mod control_plane;
pub mod node;
pub mod pki;
pub mod resolver;
mod world;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use maas_sim::SimHandle;
use tokio_util::sync::CancellationToken;

use crate::kubelet::Silence;
use cloud_config::Role;
use resolver::Resolver;
use world::World;

pub use crate::kubelet::KUBELET_PORT;

/// What the first boots did, for a test to read.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Nodes booted, by system id: (node name, role).
    pub booted: BTreeMap<String, (String, Role)>,
    /// The last failure of each server that could not boot (yet).
    pub failures: BTreeMap<String, String>,
}

/// The running first-boot stand-in.
#[derive(Debug)]
pub struct FirstBoots {
    report: Arc<Mutex<Report>>,
    silence: Silence,
    resolver: Resolver,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FirstBoots {
    /// Starts watching `sim`, whose DNS records for `domain` are read through `maas`: nodes'
    /// files and logs go under `dir`, the hosts file is `hosts_file`.
    pub fn start(
        sim: SimHandle,
        maas: maas_api_client::MaasClient,
        domain: &str,
        dir: PathBuf,
        hosts_file: PathBuf,
    ) -> Self {
        let report = Arc::new(Mutex::new(Report::default()));
        let resolver = Resolver::new(maas, domain, hosts_file);
        let cancel = CancellationToken::new();
        let silence = Silence::default();
        let mut world = World::new(sim, silence.clone(), dir, resolver.clone(), report.clone());
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            loop {
                world.sync().await;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        });
        Self {
            report,
            silence,
            resolver,
            cancel,
            task: Some(task),
        }
    }

    /// What the first boots did so far.
    pub fn report(&self) -> Report {
        self.report
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The kubelets a test can silence (until their server is power-cycled, or for good).
    pub fn kubelets(&self) -> &Silence {
        &self.silence
    }

    /// The addresses MAAS's DNS serves for `name`, as last read.
    pub fn resolve(&self, name: &str) -> Vec<IpAddr> {
        self.resolver.lookup(name)
    }

    /// The hosts file the installed providers see as `/etc/hosts`.
    pub fn hosts_file(&self) -> PathBuf {
        self.resolver.hosts_file()
    }

    /// Stops every node's programs.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FirstBoots {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
