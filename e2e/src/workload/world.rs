//! The first boots' loop: every deployed server booted once from its user data, its kubelet's
//! Node posted when a test silences or revives it, its programs stopped when it is released.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capmaas_testenv::{Process, cache_dir};
use maas_sim::{MachineView, NodeStatus, SimHandle};

use super::cloud_config::{BootData, Role};
use super::control_plane::{self, ClusterPki, ControlPlaneNode, EtcdClient};
use super::node;
use super::pki::Pair;
use super::resolver::Resolver;
use super::{KUBELET_PORT, Report};
use crate::kubelet::Silence;

/// A workload cluster as its nodes know it: the CA, an administrator certificate for the
/// stand-ins, the endpoint, and etcd's client credentials.
#[derive(Debug, Clone)]
struct Cluster {
    ca: String,
    admin: Pair,
    etcd: EtcdClient,
}

/// A booted server's programs; dropping it stops them (the server was released).
#[derive(Debug)]
#[allow(dead_code)] // Held for their lifetime.
struct Booted {
    hostname: String,
    address: IpAddr,
    version: String,
    /// The control-plane endpoint of its cluster.
    endpoint: Option<String>,
    node: String,
    role: Role,
    control_plane: Option<ControlPlaneNode>,
    kubelet: Option<Process>,
}

pub(super) struct World {
    sim: SimHandle,
    silence: Silence,
    dir: PathBuf,
    resolver: Resolver,
    /// By control-plane endpoint (`host:port`).
    clusters: BTreeMap<String, Cluster>,
    booted: BTreeMap<String, Booted>,
    report: Arc<Mutex<Report>>,
    /// Passes of the loop, which collects orphaned pods every tenth (about every 5 s).
    syncs: u64,
}

impl World {
    pub(super) fn new(
        sim: SimHandle,
        silence: Silence,
        dir: PathBuf,
        resolver: Resolver,
        report: Arc<Mutex<Report>>,
    ) -> Self {
        Self {
            sim,
            silence,
            dir,
            resolver,
            clusters: BTreeMap::new(),
            booted: BTreeMap::new(),
            report,
            syncs: 0,
        }
    }

    pub(super) async fn sync(&mut self) {
        self.resolver.refresh(&self.sim).await;
        let deployed: BTreeMap<String, MachineView> = self
            .sim
            .machines()
            .into_iter()
            .filter(|m| m.status == NodeStatus::Deployed)
            .map(|m| (m.system_id.clone(), m))
            .collect();
        // Released (or redeployed) servers: their programs stop, as the server powers off.
        let gone: Vec<String> = self
            .booted
            .keys()
            .filter(|id| !deployed.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.booted.remove(&id);
            self.lock_report().booted.remove(&id);
        }
        self.syncs += 1;
        if self.syncs.is_multiple_of(10) {
            self.collect_orphaned_pods().await;
        }
        for (id, server) in deployed {
            if let Some(booted) = self.booted.get(&id) {
                if let Some(ready) = self.silence.next_post(&server) {
                    self.post_node(booted, ready).await;
                }
                continue;
            }
            match self.boot(&server).await {
                Ok(booted) => {
                    let mut report = self.lock_report();
                    report.failures.remove(&id);
                    report
                        .booted
                        .insert(id.clone(), (booted.node.clone(), booted.role));
                    drop(report);
                    self.booted.insert(id, booted);
                }
                Err(e) => {
                    let mut report = self.lock_report();
                    if report.failures.get(&id) != Some(&e) {
                        // Printed (once per new failure) for a test's --nocapture output.
                        eprintln!("first boot of {}: {e}", server.hostname);
                    }
                    report.failures.insert(id, e);
                }
            }
        }
    }

    /// The kubelet of `booted` posts its Node again: Ready (re-registered if the Node was
    /// deleted), or `Ready=Unknown`.
    async fn post_node(&self, booted: &Booted, ready: bool) {
        let Some(cluster) = booted.endpoint.as_ref().and_then(|e| self.clusters.get(e)) else {
            return;
        };
        let posted = match self
            .client_of(
                booted.endpoint.as_deref().unwrap_or_default(),
                &cluster.ca,
                &cluster.admin,
            )
            .await
        {
            Ok(client) => {
                node::register(
                    &client,
                    &booted.node,
                    booted.address,
                    &booted.version,
                    booted.control_plane.is_some(),
                    ready,
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = posted {
            eprintln!("kubelet of {}: Node not posted: {e}", booted.node);
        }
    }

    /// The pod garbage collector of each workload's controller-manager (which does not run
    /// here): pods bound to a Node that no longer exists are deleted.
    async fn collect_orphaned_pods(&self) {
        for (endpoint, cluster) in &self.clusters {
            let collected = match self.client_of(endpoint, &cluster.ca, &cluster.admin).await {
                Ok(client) => node::delete_orphaned_pods(&client).await,
                Err(e) => Err(e),
            };
            if let Err(e) = collected {
                tracing::debug!(%endpoint, error = %e, "orphaned pods not collected");
            }
        }
    }

    fn lock_report(&self) -> std::sync::MutexGuard<'_, Report> {
        self.report.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn boot(&mut self, server: &MachineView) -> Result<Booted, String> {
        let user_data = server
            .user_data
            .as_deref()
            .ok_or("deployed without user data")?;
        let boot = BootData::parse(&String::from_utf8_lossy(user_data), &server.hostname)?;
        let address: IpAddr = server
            .ip_addresses
            .iter()
            .find_map(|a| a.parse().ok())
            .ok_or("the server has no address")?;
        let node = boot.node_name(&server.hostname);
        let dir = self.dir.join(&server.hostname);
        // A deployment starts from an erased disk: no etcd data of an earlier one.
        let _ = std::fs::remove_dir_all(dir.join("etcd"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (control_plane, version) = match boot.role {
            Role::Init | Role::ControlPlaneJoin => {
                let (running, version) =
                    self.boot_control_plane(&boot, &node, address, &dir).await?;
                (Some(running), version)
            }
            Role::WorkerJoin => (None, self.join_worker(&boot, &node, address).await?),
        };
        let kubelet = Process::start(
            "kubelet-portforward",
            &cache_dir().join("bin/kubelet-portforward"),
            &[
                format!("--address={address}"),
                format!("--port={KUBELET_PORT}"),
            ],
            &[],
            &dir,
        )
        .map_err(|e| e.to_string())?;
        eprintln!(
            "first boot of {}: node {node} up ({:?}, {version})",
            server.hostname, boot.role
        );
        Ok(Booted {
            hostname: server.hostname.clone(),
            address,
            version,
            endpoint: boot.endpoint(),
            node,
            role: boot.role,
            control_plane,
            kubelet: Some(kubelet),
        })
    }

    async fn boot_control_plane(
        &mut self,
        boot: &BootData,
        node: &str,
        address: IpAddr,
        dir: &std::path::Path,
    ) -> Result<(ControlPlaneNode, String), String> {
        let pki = ClusterPki::from_boot(boot)?;
        let admin = pki.admin("kubeadm-stand-in")?;
        let endpoint = boot
            .endpoint()
            .ok_or("the kubeadm configuration names no control-plane endpoint")?;
        let (configuration, members) = if boot.role == Role::Init {
            let configuration = boot
                .document("ClusterConfiguration")
                .cloned()
                .ok_or("kubeadm init without a ClusterConfiguration")?;
            (configuration, None)
        } else {
            let client = self.client_of(&endpoint, &pki.ca.cert, &admin).await?;
            let configuration = node::download_kubeadm_config(&client).await?;
            let members = self.add_etcd_member(&client, &endpoint, address).await?;
            (configuration, Some(members))
        };
        let host = endpoint
            .rsplit_once(':')
            .map_or(endpoint.as_str(), |(h, _)| h);
        let (running, etcd) =
            control_plane::start(dir, node, address, host, &configuration, &pki, members)?;
        let http = control_plane::etcd_http(&etcd)?;
        control_plane::wait_healthy(
            &http,
            &format!(
                "https://{address}:{}/health",
                control_plane::ETCD_CLIENT_PORT
            ),
            Duration::from_secs(60),
        )
        .await?;
        let local = format!("https://{address}:{}", control_plane::API_SERVER_PORT);
        let client = node::client(&local, host, &pki.ca.cert, &admin).await?;
        wait_api_server(&client).await?;
        let version = configuration["kubernetesVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if boot.role == Role::Init {
            node::upload_kubeadm_config(&client, &configuration).await?;
        }
        node::register(&client, node, address, &version, true, true).await?;
        node::mirror_static_pods(&client, node, address, &version).await?;
        self.clusters.insert(
            endpoint,
            Cluster {
                ca: pki.ca.cert.clone(),
                admin,
                etcd,
            },
        );
        Ok((running, version))
    }

    async fn join_worker(
        &self,
        boot: &BootData,
        node: &str,
        address: IpAddr,
    ) -> Result<String, String> {
        let join = boot
            .document("JoinConfiguration")
            .ok_or("kubeadm join without a JoinConfiguration")?;
        let discovery = &join["discovery"]["bootstrapToken"];
        let endpoint = discovery["apiServerEndpoint"]
            .as_str()
            .ok_or("JoinConfiguration without discovery.bootstrapToken.apiServerEndpoint")?;
        let cluster = self
            .clusters
            .get(endpoint)
            .ok_or_else(|| format!("no control plane answers at {endpoint} yet"))?
            .clone();
        let client = self
            .client_of(endpoint, &cluster.ca, &cluster.admin)
            .await?;
        let token = discovery["token"].as_str().unwrap_or_default();
        if !node::bootstrap_token_valid(&client, token).await? {
            return Err(format!(
                "the bootstrap token of {node} is not (yet) valid in {endpoint}"
            ));
        }
        let version = node::download_kubeadm_config(&client).await?["kubernetesVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        node::register(&client, node, address, &version, false, true).await?;
        Ok(version)
    }

    /// `kubeadm join --control-plane`'s etcd step: the member added through the first member
    /// (of those the etcd pods advertise) that answers.
    async fn add_etcd_member(
        &self,
        client: &kube::Client,
        endpoint: &str,
        address: IpAddr,
    ) -> Result<Vec<(String, String)>, String> {
        let cluster = self
            .clusters
            .get(endpoint)
            .ok_or_else(|| format!("no control plane booted for {endpoint}"))?;
        let http = control_plane::etcd_http(&cluster.etcd)?;
        let peer_url = format!("https://{address}:{}", control_plane::ETCD_PEER_PORT);
        let mut members = Err("no etcd pod advertises a client URL".to_owned());
        for url in node::etcd_client_urls(client).await? {
            members = control_plane::add_etcd_member(&http, &url, &peer_url).await;
            if members.is_ok() {
                break;
            }
        }
        members
    }

    /// A client of the cluster at `endpoint` (`host:port`), reached at the first address MAAS's
    /// DNS serves for the host that answers (as a resolver's client tries them in turn).
    async fn client_of(
        &self,
        endpoint: &str,
        ca: &str,
        identity: &Pair,
    ) -> Result<kube::Client, String> {
        let (host, port) = endpoint
            .rsplit_once(':')
            .ok_or_else(|| format!("endpoint {endpoint} has no port"))?;
        let mut last = format!("MAAS's DNS has no address for {host}");
        for address in self.resolver.lookup(host) {
            let client =
                node::client(&format!("https://{address}:{port}"), host, ca, identity).await?;
            match client.apiserver_version().await {
                Ok(_) => return Ok(client),
                Err(e) => last = format!("{address}: {e}"),
            }
        }
        Err(format!("no API server answers at {endpoint}: {last}"))
    }
}

async fn wait_api_server(client: &kube::Client) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        // kubeadm waits for /readyz too: the built-in priority classes and RBAC exist then.
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let last = match client.request_text(request).await {
            Ok(text) if text.trim() == "ok" => return Ok(()),
            Ok(text) => text,
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() > deadline {
            return Err(format!("kube-apiserver not ready: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
