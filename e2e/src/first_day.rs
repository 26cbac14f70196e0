//! A CAPMAAS user's first day, with the user's own tools: the clusterctl repository that
//! `hack/clusterctl-repo.sh` renders (our provider and Cluster API's core, kubeadm bootstrap
//! and kubeadm control plane, all local files), the variables of CAPMAAS's README, the real
//! `clusterctl init` and `clusterctl generate cluster | kubectl apply -f -`, and a MAAS whose
//! servers sit in the README's pools with its tag.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use capmaas_testenv::{cache_dir, kubectl, repo_root};
use tokio::io::AsyncWriteExt as _;

use crate::error::{Error, Result};

/// The clusterctl variables of CAPMAAS's README, verbatim but for the endpoint (the
/// simulator's, plain http and without a trailing slash as the README's
/// `http://<maas-ip>:5240/MAAS`) and the Kubernetes version.
pub fn capmaas_readme_variables(maas_endpoint: &str, api_key: &str, kubernetes: &str) -> String {
    // CAPMAAS's client appends `/api/2.0/` to the endpoint as written: with a trailing slash
    // its calls go to `/MAAS//api/2.0/`, which MAAS does not serve.
    let maas_endpoint = maas_endpoint.trim_end_matches('/');
    format!(
        "MAAS_ENDPOINT: {maas_endpoint}
MAAS_API_KEY: {api_key}
MAAS_DNS_DOMAIN: {DNS_DOMAIN}
KUBERNETES_VERSION: {kubernetes}
CONTROL_PLANE_MACHINE_IMAGE: custom/{IMAGE}
CONTROL_PLANE_MACHINE_MINCPU: 4
CONTROL_PLANE_MACHINE_MINMEMORY: 8192
CONTROL_PLANE_MACHINE_RESOURCEPOOL: {CONTROL_PLANE_POOL}
CONTROL_PLANE_MACHINE_TAG: {TAG}
WORKER_MACHINE_IMAGE: custom/{IMAGE}
WORKER_MACHINE_MINCPU: 4
WORKER_MACHINE_MINMEMORY: 8192
WORKER_MACHINE_RESOURCEPOOL: {WORKER_POOL}
WORKER_MACHINE_TAG: {TAG}
"
    )
}

/// The README's MAAS DNS domain.
pub const DNS_DOMAIN: &str = "maas.domain";
/// The README's image (uploaded to the simulated MAAS).
pub const IMAGE: &str = "u-2204-0-k-1264-0";
/// The README's control-plane pool.
pub const CONTROL_PLANE_POOL: &str = "resourcepool-controller";
/// The README's worker pool.
pub const WORKER_POOL: &str = "resourcepool-worker";
/// The README's tag.
pub const TAG: &str = "hello-world";
/// The image a user uploads for the Kubernetes upgrade.
pub const UPGRADE_IMAGE: &str = "u-2204-0-k-1332-0";
/// Where a world's simulated servers' addresses are: a /16 of loopback addresses of the test
/// machine, so the workload control planes booted on them (`crate::workload`) are reachable
/// there; picked at random so that two worlds on one machine (a demo and a test run) do not
/// share addresses and ports.
pub fn server_subnet() -> String {
    format!("127.{}.0.0/16", fastrand::u8(20..=250))
}

/// A simulator inventory: `control_planes` servers in the control-plane pool and `workers` in
/// the worker pool, all tagged and big enough (8 cores, 16 GiB), over three zones, with
/// addresses in `subnet`; the README's image and the upgrade's uploaded.
pub fn maas_inventory(control_planes: usize, workers: usize, subnet: &str) -> String {
    use std::fmt::Write as _;
    let mut text = format!(
        "provisioning_subnet: {subnet}\nzones: [z1, z2, z3]\npools: [{CONTROL_PLANE_POOL}, {WORKER_POOL}]\ntags: [{TAG}]\nimages:\n  - name: {IMAGE}\n    title: Ubuntu 22.04 with Kubernetes 1.26.4\n  - name: {UPGRADE_IMAGE}\n    title: Ubuntu 22.04 with Kubernetes 1.33.2\nmachines:\n"
    );
    let pools = std::iter::repeat_n(CONTROL_PLANE_POOL, control_planes)
        .chain(std::iter::repeat_n(WORKER_POOL, workers));
    for (i, pool) in pools.enumerate() {
        let _ = writeln!(
            text,
            "  - {{zone: z{}, pool: {pool}, cpu_count: 8, memory: 16384, tags: [{TAG}]}}",
            i % 3 + 1
        );
    }
    text
}

/// The user's world before anything is installed: a management cluster (API server,
/// controller-manager, cert-manager's CRDs), a MAAS whose servers sit in the README's pools
/// ([`maas_inventory`], 2 s deployments), and those servers' first boots
/// ([`crate::workload`]), whose hosts file is MAAS's DNS for the providers.
#[derive(Debug)]
pub struct UserWorld {
    pub management: capmaas_testenv::TestEnv,
    pub sim: maas_sim::RunningSim,
    pub boots: crate::workload::FirstBoots,
}

impl UserWorld {
    /// Starts it with files under `dir`.
    pub async fn start(dir: &Path, control_planes: usize, workers: usize) -> Result<Self> {
        let management = capmaas_testenv::TestEnv::builder()
            .our_crds(false)
            .capi_crds(false)
            .crd_dir(cache_dir().join("cert-manager-crds"))
            .start()
            .await?;
        let inventory_file = dir.join("maas-inventory.yaml");
        std::fs::write(
            &inventory_file,
            maas_inventory(control_planes, workers, &server_subnet()),
        )
        .map_err(Error::io("writing the MAAS inventory"))?;
        let sim = maas_sim::Simulator::start(maas_sim::SimConfig {
            inventory_file: Some(inventory_file),
            domain: DNS_DOMAIN.into(),
            timings: maas_sim::Timings {
                deploy: std::time::Duration::from_secs(2),
                release: std::time::Duration::from_millis(500),
                ..maas_sim::Timings::default()
            },
            ..maas_sim::SimConfig::default()
        })
        .await?;
        let boots = crate::workload::FirstBoots::start(
            sim.state(),
            sim_client(&sim)?,
            DNS_DOMAIN,
            dir.join("servers"),
            dir.join("hosts"),
        );
        Ok(Self {
            management,
            sim,
            boots,
        })
    }
}

/// A Kubernetes upgrade as a user does it: for the control plane and each MachineDeployment
/// of `cluster`, a copy of its MaasMachineTemplate with `image` (`<template>-<version>`), and
/// the KubeadmControlPlane's and MachineDeployment's version and template changed with
/// `kubectl patch`.
pub async fn upgrade(
    shell: &UserShell,
    namespace: &str,
    cluster: &str,
    version: &str,
    image: &str,
) -> Result<()> {
    let suffix = version.replace('.', "-");
    let control_plane = format!("{cluster}-control-plane");
    let workers = format!("{cluster}-md-0");
    for template in [&control_plane, &workers] {
        let json = shell
            .kubectl(
                &[
                    "get",
                    "maasmachinetemplate",
                    template,
                    "-n",
                    namespace,
                    "-o",
                    "json",
                ],
                None,
            )
            .await?;
        let mut upgraded: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| Error::Manifest {
                name: template.clone(),
                message: e.to_string(),
            })?;
        upgraded["metadata"] = serde_json::json!({"name": format!("{template}-{suffix}")});
        upgraded["spec"]["template"]["spec"]["image"] = serde_json::json!(image);
        shell
            .kubectl(
                &["apply", "-n", namespace, "-f", "-"],
                Some(&upgraded.to_string()),
            )
            .await?;
    }
    let control_plane_patch = serde_json::json!({"spec": {"version": version, "machineTemplate":
        {"spec": {"infrastructureRef": {"name": format!("{control_plane}-{suffix}")}}}}});
    let workers_patch = serde_json::json!({"spec": {"template": {"spec": {"version": version,
        "infrastructureRef": {"name": format!("{workers}-{suffix}")}}}}});
    for (kind, name, patch) in [
        ("kubeadmcontrolplane", &control_plane, control_plane_patch),
        ("machinedeployment", &workers, workers_patch),
    ] {
        shell
            .kubectl(
                &[
                    "patch",
                    kind,
                    name,
                    "-n",
                    namespace,
                    "--type=merge",
                    "-p",
                    &patch.to_string(),
                ],
                None,
            )
            .await?;
    }
    Ok(())
}

/// CAPMAAS's releases, as `hack/capmaas/build.sh` renders v0.9.0 into the cache.
pub fn capmaas_releases() -> PathBuf {
    cache_dir().join("capmaas-components")
}

/// The commands of the user's day, each with its own clean configuration folder (no home
/// folder of the machine's is read) and the management cluster's kubeconfig.
#[derive(Debug, Clone)]
pub struct UserShell {
    /// The rendered repository, whose `clusterctl.yaml` also holds the variables.
    pub repository: PathBuf,
    /// The management cluster's (admin) kubeconfig.
    pub kubeconfig: PathBuf,
}

impl UserShell {
    /// Renders the clusterctl repository into `dir` (`hack/clusterctl-repo.sh`, as
    /// `just clusterctl-repo` does) and appends `variables` to its `clusterctl.yaml`.
    pub async fn render(dir: &Path, kubeconfig: &Path, variables: &str) -> Result<Self> {
        Self::render_with(dir, kubeconfig, variables, &[]).await
    }

    /// [`Self::render`], with other releases of infrastructure-maas beside ours, each a folder
    /// holding `infrastructure-maas/<version>/`: CAPMAAS's v0.9.0 ([`capmaas_releases`]) or an
    /// earlier release of ours (`hack/previous-release.sh`).
    pub async fn render_with(
        dir: &Path,
        kubeconfig: &Path,
        variables: &str,
        other_releases: &[PathBuf],
    ) -> Result<Self> {
        let mut command = tokio::process::Command::new("bash");
        command
            .arg(repo_root().join("hack/clusterctl-repo.sh"))
            .arg(dir)
            .env("KUBECTL", kubectl());
        if !other_releases.is_empty() {
            let folders: Vec<String> = other_releases
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            command.env("OTHER_RELEASES", folders.join(" "));
        }
        run("hack/clusterctl-repo.sh", &mut command, None).await?;
        let config = dir.join("clusterctl.yaml");
        let mut text = std::fs::read_to_string(&config)
            .map_err(Error::io(format!("reading {}", config.display())))?;
        text.push_str(variables);
        std::fs::write(&config, text)
            .map_err(Error::io(format!("writing {}", config.display())))?;
        Ok(Self {
            repository: dir.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
        })
    }

    /// `clusterctl <args> --config <repository>/clusterctl.yaml --kubeconfig <management>`.
    pub async fn clusterctl(&self, args: &[&str]) -> Result<String> {
        self.clusterctl_with_env(args, &[]).await
    }

    /// [`Self::clusterctl`] with `env` set, as `NAME=value clusterctl ...` in a shell.
    pub async fn clusterctl_with_env(
        &self,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<String> {
        let mut command = tokio::process::Command::new(cache_dir().join("bin/clusterctl"));
        command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .arg("--config")
            .arg(self.repository.join("clusterctl.yaml"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("HOME", &self.repository)
            .env("XDG_CONFIG_HOME", &self.repository)
            .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true");
        run(
            &format!("clusterctl {}", args.join(" ")),
            &mut command,
            None,
        )
        .await
    }

    /// A `sh` block of the docs run by bash (`-eu -o pipefail`), as a user pastes it: the
    /// management cluster's kubeconfig in `KUBECONFIG`, the test control plane's kubectl first
    /// on `PATH`.
    pub async fn sh(&self, script: &str) -> Result<String> {
        let kubectl = kubectl();
        let mut path = std::env::var("PATH").unwrap_or_default();
        if let Some(bin) = kubectl.parent().filter(|p| !p.as_os_str().is_empty()) {
            path = format!("{}:{path}", bin.display());
        }
        let mut command = tokio::process::Command::new("bash");
        command
            .args(["-eu", "-o", "pipefail", "-c", script])
            .env("PATH", path)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.repository);
        run(&format!("sh: {}", script.trim()), &mut command, None).await
    }

    /// `kubectl <args>` against the management cluster, with `stdin` piped in.
    pub async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let mut command = tokio::process::Command::new(kubectl());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", &self.repository);
        run(&format!("kubectl {}", args.join(" ")), &mut command, stdin).await
    }
}

async fn run(
    what: &str,
    command: &mut tokio::process::Command,
    stdin: Option<&str>,
) -> Result<String> {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(Error::io(format!("starting {what}")))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .map_err(Error::io(format!("writing to {what}")))?;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(Error::io(format!("running {what}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(Error::Command {
            what: what.to_owned(),
            output: format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)),
        })
    }
}

/// The kubeconfig Secret that KubeadmControlPlane generated for `cluster`, its server set to the
/// first of the `addresses` MAAS's DNS serves for the endpoint and its serving certificate
/// checked for the endpoint's name (`tls-server-name`): what reaching the cluster through MAAS's
/// DNS amounts to from a shell that does not use it.
/// A MAAS API client of the simulator's user (a third-party client's view of it).
pub fn sim_client(sim: &maas_sim::RunningSim) -> Result<maas_api_client::MaasClient> {
    let key = maas_api_client::ApiKey::parse(&sim.api_key()).map_err(|e| Error::Manifest {
        name: "MAAS API key".into(),
        message: e.to_string(),
    })?;
    maas_api_client::Config::builder(&sim.url(), key)
        .build()
        .and_then(maas_api_client::MaasClient::new)
        .map_err(|e| Error::Manifest {
            name: "MAAS client".into(),
            message: e.to_string(),
        })
}

pub async fn workload_kubeconfig(
    management: &kube::Client,
    namespace: &str,
    cluster: &str,
    addresses: &[std::net::IpAddr],
) -> Result<kube::config::Kubeconfig> {
    let secret_name = format!("{cluster}-kubeconfig");
    let secret =
        kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(management.clone(), namespace)
            .get(&secret_name)
            .await
            .map_err(Error::kube(format!("reading {secret_name}")))?;
    let invalid = |message: String| Error::Manifest {
        name: secret_name.clone(),
        message,
    };
    // Read as our controllers read it.
    let mut kubeconfig = capmaas_runtime::controller::workload::kubeconfig_from_secret(
        &secret,
        &format!("{namespace}/{secret_name}"),
    )
    .map_err(|e| invalid(e.to_string()))?;
    let address = addresses
        .first()
        .ok_or_else(|| invalid("MAAS's DNS has no address for the endpoint".into()))?;
    for named in &mut kubeconfig.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            let server = cluster.server.clone().unwrap_or_default();
            let url = url::Url::parse(&server).map_err(|e| invalid(e.to_string()))?;
            cluster.tls_server_name = url.host_str().map(str::to_owned);
            cluster.server = Some(format!(
                "https://{address}:{}",
                url.port_or_known_default().unwrap_or(6443)
            ));
        }
    }
    Ok(kubeconfig)
}

/// A client of the workload cluster through [`workload_kubeconfig`].
pub async fn workload_client(
    management: &kube::Client,
    namespace: &str,
    cluster: &str,
    addresses: &[std::net::IpAddr],
) -> Result<kube::Client> {
    let kubeconfig = workload_kubeconfig(management, namespace, cluster, addresses).await?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| Error::Manifest {
        name: format!("{cluster}-kubeconfig"),
        message: e.to_string(),
    })?;
    kube::Client::try_from(config).map_err(Error::kube("building the workload client"))
}

/// Prints each step of a scenario with the time the one before took.
#[derive(Debug)]
pub struct Steps {
    current: Option<(String, Instant)>,
    started: Instant,
}

impl Default for Steps {
    fn default() -> Self {
        Self {
            current: None,
            started: Instant::now(),
        }
    }
}

impl Steps {
    /// Ends the current step (printing its duration) and starts `name`.
    pub fn step(&mut self, name: &str) {
        self.finish();
        eprintln!("step: {name}");
        self.current = Some((name.to_owned(), Instant::now()));
    }

    /// Ends the current step and prints the total.
    pub fn done(&mut self) {
        self.finish();
        eprintln!("all steps: {:.1} s", self.started.elapsed().as_secs_f64());
    }

    fn finish(&mut self) {
        if let Some((name, at)) = self.current.take() {
            eprintln!("  {name}: {:.1} s", at.elapsed().as_secs_f64());
        }
    }
}

/// The `sh` block of `docs/install.md` (its text, `install_md`) that holds `marker`.
pub fn sh_block<'a>(install_md: &'a str, marker: &str) -> Result<&'a str> {
    install_md
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .find(|block| block.contains(marker))
        .ok_or_else(|| Error::Manifest {
            name: "docs/install.md".into(),
            message: format!("no sh block with {marker}"),
        })
}

/// The commands of the `sh` block of `docs/install.md` that holds `marker`: one per line, each
/// as its words.
pub fn sh_block_commands(install_md: &str, marker: &str) -> Result<Vec<Vec<String>>> {
    Ok(sh_block(install_md, marker)?
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|words| !words.is_empty())
        .collect())
}

/// The commands `docs/install.md` shows for a first install, as the scenario runs them: the
/// `sh` block holding `clusterctl init`, its continued lines joined; per command the
/// clusterctl arguments without `--config` (the scenario passes its own repository's), and
/// whether its output is piped into `kubectl apply -f -`.
pub fn documented_commands(install_md: &str) -> Result<Vec<(Vec<String>, bool)>> {
    Ok(documented_block(install_md, "clusterctl init")?
        .into_iter()
        .map(|c| (c.args, c.piped))
        .collect())
}

/// One clusterctl command of `docs/install.md`, as a scenario runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentedCommand {
    /// Environment variables set before the command (`CLUSTER_TOPOLOGY=true clusterctl ...`).
    pub env: Vec<(String, String)>,
    /// clusterctl's arguments, without `--config`.
    pub args: Vec<String>,
    /// Whether its output is piped into `kubectl apply -f -`.
    pub piped: bool,
}

/// The clusterctl commands of the `sh` block of `docs/install.md` that holds `marker`, its
/// continued lines joined.
pub fn documented_block(install_md: &str, marker: &str) -> Result<Vec<DocumentedCommand>> {
    let invalid = |message: &str| Error::Manifest {
        name: "docs/install.md".into(),
        message: message.into(),
    };
    let block = sh_block(install_md, marker)?;
    let joined = block.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (command, piped) = match line.split_once('|') {
            Some((command, sink)) => {
                if sink.split_whitespace().collect::<Vec<_>>() != ["kubectl", "apply", "-f", "-"] {
                    return Err(invalid(&format!("unexpected pipe in {line:?}")));
                }
                (command, true)
            }
            None => (line, false),
        };
        let mut words = command.split_whitespace().peekable();
        let mut env = Vec::new();
        while let Some((name, value)) = words.peek().and_then(|w| w.split_once('=')) {
            env.push((name.to_owned(), value.to_owned()));
            words.next();
        }
        if words.next() != Some("clusterctl") {
            return Err(invalid(&format!("not a clusterctl command: {line:?}")));
        }
        let mut args = Vec::new();
        while let Some(word) = words.next() {
            if word == "--config" {
                words.next();
            } else if !word.starts_with("--config=") {
                args.push(word.to_owned());
            }
        }
        commands.push(DocumentedCommand { env, args, piped });
    }
    Ok(commands)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_guide_shows_init_then_generate_piped_into_kubectl() {
        let doc = std::fs::read_to_string(repo_root().join("docs/install.md")).unwrap();
        let commands = documented_commands(&doc).unwrap();
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert_eq!(commands[0].0[0], "init");
        assert!(!commands[0].1);
        assert_eq!(&commands[1].0[..2], ["generate", "cluster"]);
        assert!(commands[1].1);
    }
}
