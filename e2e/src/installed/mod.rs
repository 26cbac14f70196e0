//! The providers `clusterctl init` installed, run as processes: every Deployment labelled
//! `cluster.x-k8s.io/provider` becomes the program its image names, started with its
//! container's arguments and environment, its Secrets and ConfigMaps, and a token of its
//! ServiceAccount ([`launch`] says what stands in for the pod). With no kubelet and no pod
//! network in the management cluster, two more things are simulated ([`routing`]): what
//! cert-manager would issue (each Certificate's Secret, the CA injected where asked), and the
//! Services' routing (each webhook and conversion webhook pointed at the process that serves
//! its Service). Everything else is what the user installed, RBAC included.

pub mod launch;
pub mod routing;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capmaas_testenv::{Process, TestEnv, cache_dir, free_port};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};

use crate::error::{Error, Result};
use crate::harness::{CONTROLLERS, binary};
use launch::{Launch, Sources};

/// clusterctl's label on every object of a provider.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";

/// Where `hack/previous-release.sh` builds an earlier release of ours: its programs in
/// `<label>/bin/`, for the images tagged `<label>` (`e2e/tests/upgrade.rs`).
pub fn previous_release_dir() -> PathBuf {
    cache_dir().join("previous-release")
}

/// The program an image names: ours by their names (the programs of an earlier release built by
/// `hack/previous-release.sh` for an image tagged with its label, else this tree's), CAPI's and
/// CAPMAAS's by their release image names.
pub fn program_of_image(image: &str) -> Result<(&'static str, PathBuf)> {
    let repository = image.split(['@']).next().unwrap_or(image);
    let (repository, tag) = match repository.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
        _ => (repository, None),
    };
    let base = repository.rsplit('/').next().unwrap_or(repository);
    if let Some(ours) = CONTROLLERS.iter().find(|c| **c == base) {
        let previous = tag.map(|t| previous_release_dir().join(t).join("bin").join(ours));
        return match previous {
            Some(path) if path.is_file() => Ok((ours, path)),
            _ => Ok((ours, binary(ours)?)),
        };
    }
    let capi = match base {
        "cluster-api-controller" => "capi-manager",
        "kubeadm-bootstrap-controller" => "capi-kubeadm-bootstrap-manager",
        "kubeadm-control-plane-controller" => "capi-kubeadm-control-plane-manager",
        // CAPMAAS v0.9.0's release image (hack/capmaas): the peer a user switches from.
        "cluster-api-provider-maas-controller" => "capmaas-manager",
        _ => {
            return Err(Error::Manifest {
                name: image.to_owned(),
                message: "no program here for this image".into(),
            });
        }
    };
    let path = cache_dir().join("bin").join(capi);
    if path.is_file() {
        Ok((capi, path))
    } else {
        Err(Error::MissingBinary { path })
    }
}

/// One installed Deployment, running.
#[derive(Debug)]
pub struct Running {
    /// What it was started from.
    pub launch: Launch,
    /// The Deployment's pod template it runs: a change (an upgrade) replaces the process, as
    /// a rollout replaces the pod.
    pub template: serde_json::Value,
    /// The program's name (`maas-client`, `capi-manager`, ...).
    pub program: &'static str,
    /// The program file it runs (this tree's, or an earlier release's).
    pub path: PathBuf,
    /// The process.
    pub process: Process,
}

/// The installed providers, running; dropping it stops them.
#[derive(Debug)]
pub struct Installation {
    /// Every Deployment's process, in the order they were started.
    pub running: Vec<Running>,
}

impl Installation {
    /// Starts every provider Deployment of `env` as a process in `dir` (one folder each), once
    /// its certificates and Service routing are in place, and waits until each is ready.
    /// `hosts`, when given, is every process's `/etc/hosts` (the network's DNS, as a pod's
    /// resolver would answer).
    pub async fn start(env: &TestEnv, dir: &Path, hosts: Option<&Path>) -> Result<Self> {
        let mut installation = Self {
            running: Vec::new(),
        };
        installation.follow_upgrade(env, dir, hosts).await?;
        Ok(installation)
    }

    /// Follows a `clusterctl upgrade`: stops the processes of Deployments that are gone (the
    /// provider's old pods) or whose pod template changed (a rollout), starts the Deployments
    /// that run nothing then (new ones and changed ones, with their certificates and webhooks
    /// routed as in [`Self::start`]) in `dir`, and leaves the others running, as the kubelet
    /// would.
    pub async fn follow_upgrade(
        &mut self,
        env: &TestEnv,
        dir: &Path,
        hosts: Option<&Path>,
    ) -> Result<()> {
        let client = env.client();
        let deployments = Api::<Deployment>::all(client.clone())
            .list(&ListParams::default().labels(PROVIDER_LABEL))
            .await
            .map_err(Error::kube("listing the installed Deployments"))?
            .items;
        let id = |d: &Deployment| {
            format!(
                "{}/{}",
                d.metadata.namespace.as_deref().unwrap_or_default(),
                d.metadata.name.as_deref().unwrap_or_default()
            )
        };
        let current: BTreeMap<String, serde_json::Value> = deployments
            .iter()
            .map(|d| (id(d), pod_template(d)))
            .collect();
        self.running
            .retain(|r| current.get(&r.launch.deployment) == Some(&r.template));
        let new: Vec<Deployment> = deployments
            .into_iter()
            .filter(|d| !self.running.iter().any(|r| r.launch.deployment == id(d)))
            .collect();
        let certificates = routing::issue_certificates(&client).await?;
        let mut launches = Vec::new();
        for deployment in &new {
            let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
            let sources = sources(&client, &namespace).await?;
            let name = deployment.metadata.name.clone().unwrap_or_default();
            launches.push(launch::plan(
                deployment,
                &sources,
                &dir.join(&name),
                || Ok(free_port()?),
            )?);
        }
        routing::route_webhooks(&client, &new, &launches, &certificates).await?;
        let first_new = self.running.len();
        for (deployment, launch) in new.iter().zip(launches) {
            let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
            let name = deployment.metadata.name.clone().unwrap_or_default();
            self.running
                .push(start_one(env, &dir.join(&name), &namespace, launch, hosts).await?);
            if let Some(started) = self.running.last_mut() {
                started.template = pod_template(deployment);
            }
        }
        for one in &mut self.running[first_new..] {
            if let Some(url) = one.launch.readiness_url.clone() {
                one.process
                    .wait_ready(&url, Duration::from_secs(120))
                    .await?;
            }
        }
        Ok(())
    }

    /// The running process of `program`.
    pub fn process(&self, program: &str) -> Option<&Running> {
        self.running.iter().find(|r| r.program == program)
    }

    /// The tail of every process log.
    pub fn logs(&self, lines: usize) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for r in &self.running {
            let _ = writeln!(
                out,
                "===== {} ({}) =====\n{}",
                r.program,
                r.launch.deployment,
                r.process.log_tail(lines)
            );
        }
        out
    }

    /// Log lines that report a request refused by RBAC: every process runs as its
    /// ServiceAccount, so any such line means an installed ClusterRole lacks a rule.
    pub fn forbidden_requests(&self) -> Vec<String> {
        self.running
            .iter()
            .flat_map(|r| crate::harness::rbac_refusals(r.process.log_path(), r.program))
            .collect()
    }
}

/// The Secrets and ConfigMaps of `namespace`, which a pod there may read.
async fn sources(client: &kube::Client, namespace: &str) -> Result<Sources> {
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("listing the Secrets of {namespace}")))?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "listing the ConfigMaps of {namespace}"
        )))?;
    Ok(Sources {
        secrets: by_name(secrets.items),
        config_maps: by_name(config_maps.items),
    })
}

fn by_name<K: kube::Resource>(items: Vec<K>) -> BTreeMap<String, K> {
    items
        .into_iter()
        .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
        .collect()
}

/// Where a pod finds its ServiceAccount: token, CA and namespace (client-go, kube-rs and
/// controller-runtime's leader election read these paths).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Where, inside a process's mount namespace, the host folders it needs are staged: a private
/// tmpfs on this (host, empty) folder. A volume mounted over `/tmp` would otherwise hide its
/// own sources and the program when they live under `/tmp` (a clone there, say).
pub const STAGE: &str = "/run/capmaas-e2e-pod";

/// The shell script that makes a process's private mount namespace look like its pod: the
/// program's folder and each `(local folder, mount path)` source staged first, then each
/// bind-mounted at its mount path in order (mount points are created on the host where
/// missing, empty), then the program exec'd with the script's arguments, so the process's pid
/// is the program's (`unshare` execs the shell without forking). `files` are single files
/// mounted the same way (`/etc/hosts`, say).
pub fn pod_script(
    mounts: &[(PathBuf, String)],
    files: &[(PathBuf, String)],
    program: &Path,
) -> String {
    use std::fmt::Write as _;
    let quote = |text: &str| format!("'{}'", text.replace('\'', r"'\''"));
    let mut script = format!("set -e\nmkdir -p {STAGE}\nmount -t tmpfs capmaas-e2e-pod {STAGE}\n");
    let program_dir = program.parent().unwrap_or(Path::new("/"));
    let program_name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = write!(
        script,
        "mkdir -p {STAGE}/bin\nmount --bind {} {STAGE}/bin\n",
        quote(&program_dir.display().to_string())
    );
    for (index, (source, _)) in mounts.iter().enumerate() {
        let source = quote(&source.display().to_string());
        let _ = write!(
            script,
            "mkdir -p {STAGE}/{index}\nmount --bind {source} {STAGE}/{index}\n"
        );
    }
    for (index, (source, _)) in files.iter().enumerate() {
        let source = quote(&source.display().to_string());
        let _ = write!(
            script,
            "touch {STAGE}/file-{index}\nmount --bind {source} {STAGE}/file-{index}\n"
        );
    }
    for (index, (_, target)) in mounts.iter().enumerate() {
        let target = quote(target);
        let _ = write!(
            script,
            "mkdir -p {target}\nmount --bind {STAGE}/{index} {target}\n"
        );
    }
    for (index, (_, target)) in files.iter().enumerate() {
        let target = quote(target);
        let _ = write!(
            script,
            "[ -e {target} ] || touch {target}\nmount --bind {STAGE}/file-{index} {target}\n"
        );
    }
    let _ = writeln!(script, "exec {STAGE}/bin/{} \"$@\"", quote(&program_name));
    script
}

async fn start_one(
    env: &TestEnv,
    dir: &Path,
    namespace: &str,
    launch: Launch,
    hosts: Option<&Path>,
) -> Result<Running> {
    let (program, path) = program_of_image(&launch.image)?;
    for (folder, _) in &launch.mounts {
        std::fs::create_dir_all(folder)
            .map_err(Error::io(format!("creating {}", folder.display())))?;
    }
    for (file, bytes) in &launch.files {
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(Error::io(format!("creating {}", parent.display())))?;
        }
        std::fs::write(file, bytes).map_err(Error::io(format!("writing {}", file.display())))?;
    }
    // The ServiceAccount's token, as the kubelet projects it, with the API server's CA and
    // the pod's namespace.
    let token = env
        .service_account_token(namespace, &launch.service_account, 24)
        .await?;
    let sa_dir = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa_dir)
        .map_err(Error::io(format!("creating {}", sa_dir.display())))?;
    for (file, content) in [
        ("token", token.as_str()),
        ("ca.crt", env.serving_ca_pem()),
        ("namespace", namespace),
    ] {
        std::fs::write(sa_dir.join(file), content).map_err(Error::io(format!(
            "writing the ServiceAccount {file} of {}",
            launch.deployment
        )))?;
    }
    let server = url::Url::parse(env.server_url()).map_err(|e| Error::Manifest {
        name: env.server_url().to_owned(),
        message: e.to_string(),
    })?;
    let host = server.host_str().unwrap_or("127.0.0.1").to_owned();
    let port = server.port_or_known_default().unwrap_or(443).to_string();
    let home = dir.display().to_string();
    // In-cluster configuration, as in a pod: the Service host and port, nothing else.
    let mut environment: Vec<(&str, &str)> = launch
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    environment.extend([
        ("KUBERNETES_SERVICE_HOST", host.as_str()),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
        ("HOME", home.as_str()),
    ]);
    let mut mounts = vec![(sa_dir, SERVICE_ACCOUNT_DIR.to_owned())];
    mounts.extend(launch.mounts.iter().cloned());
    let files: Vec<(PathBuf, String)> = hosts
        .map(|h| (h.to_path_buf(), "/etc/hosts".to_owned()))
        .into_iter()
        .collect();
    let script = pod_script(&mounts, &files, &path);
    let mut args: Vec<String> = [
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        &script,
        "sh",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.extend(launch.args.iter().cloned());
    let process = Process::start(program, Path::new(UNSHARE), &args, &environment, dir)?;
    Ok(Running {
        launch,
        template: serde_json::Value::Null,
        program,
        path,
        process,
    })
}

/// The pod template of `deployment`, what a rollout compares.
fn pod_template(deployment: &Deployment) -> serde_json::Value {
    deployment
        .spec
        .as_ref()
        .and_then(|spec| serde_json::to_value(&spec.template).ok())
        .unwrap_or_default()
}

/// util-linux's `unshare`, which makes the private mount namespace.
const UNSHARE: &str = "/usr/bin/unshare";
