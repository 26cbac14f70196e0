//! A control-plane node's first boot, as `kubeadm init` or `kubeadm join --control-plane` does it
//! on the server: the node's certificates from the cluster's CAs in the user data, a stacked etcd
//! member (a new cluster, or added to the members the existing etcd pods advertise), and a
//! kube-apiserver with kubeadm's flags and the configuration's `apiServer.extraArgs`, both the
//! real programs of the test control plane, listening on the server's address.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capmaas_testenv::{Process, cache_dir};
use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};

use super::cloud_config::BootData;
use super::pki::{Ca, Pair};

/// The cluster's CAs and service-account key, as the user data carries them.
#[derive(Debug)]
pub struct ClusterPki {
    pub ca: Ca,
    pub etcd_ca: Ca,
    pub front_proxy_ca: Ca,
    pub sa_key: String,
    pub sa_pub: String,
}

impl ClusterPki {
    /// Reads the CAs from `/etc/kubernetes/pki` of the user data.
    pub fn from_boot(boot: &BootData) -> Result<Self, String> {
        let pki = |name: &str| boot.text(&format!("/etc/kubernetes/pki/{name}"));
        Ok(Self {
            ca: Ca::load(&pki("ca.crt")?, &pki("ca.key")?)?,
            etcd_ca: Ca::load(&pki("etcd/ca.crt")?, &pki("etcd/ca.key")?)?,
            front_proxy_ca: Ca::load(&pki("front-proxy-ca.crt")?, &pki("front-proxy-ca.key")?)?,
            sa_key: pki("sa.key")?,
            sa_pub: pki("sa.pub")?,
        })
    }

    /// A client certificate in `system:masters`, for the stand-ins acting on the cluster.
    pub fn admin(&self, who: &str) -> Result<Pair, String> {
        self.ca
            .sign(who, Some("system:masters"), &[], &[], &[ClientAuth])
    }
}

/// The ports kubeadm's control plane listens on.
pub const API_SERVER_PORT: u16 = 6443;
pub const ETCD_CLIENT_PORT: u16 = 2379;
pub const ETCD_PEER_PORT: u16 = 2380;

/// A running control-plane node's programs.
#[derive(Debug)]
pub struct ControlPlaneNode {
    pub etcd: Process,
    pub api_server: Process,
}

/// Where the node's etcd client certificate is (kube-apiserver's, reused to add members).
#[derive(Debug, Clone)]
pub struct EtcdClient {
    pub ca: String,
    pub identity: Pair,
}

/// The etcd members to join: `None` starts a new cluster.
pub type Join = Option<Vec<(String, String)>>;

/// Writes the node's certificates under `dir/pki` and starts etcd and kube-apiserver.
#[allow(clippy::too_many_arguments)]
pub fn start(
    dir: &Path,
    node: &str,
    address: IpAddr,
    endpoint_host: &str,
    cluster_configuration: &serde_json::Value,
    pki: &ClusterPki,
    etcd_members: Join,
) -> Result<(ControlPlaneNode, EtcdClient), String> {
    let pki_dir = dir.join("pki");
    std::fs::create_dir_all(pki_dir.join("etcd")).map_err(|e| e.to_string())?;
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let path = pki_dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    };
    let pair = |name: &str, pair: &Pair| -> Result<(PathBuf, PathBuf), String> {
        Ok((
            write(&format!("{name}.crt"), &pair.cert)?,
            write(&format!("{name}.key"), &pair.key)?,
        ))
    };
    let ca = write("ca.crt", &pki.ca.cert)?;
    let etcd_ca = write("etcd/ca.crt", &pki.etcd_ca.cert)?;
    let front_proxy_ca = write("front-proxy-ca.crt", &pki.front_proxy_ca.cert)?;
    let sa_key = write("sa.key", &pki.sa_key)?;
    let sa_pub = write("sa.pub", &pki.sa_pub)?;
    let loopback: IpAddr = [127, 0, 0, 1].into();
    // kubeadm gives etcd's server and peer certificates the same subject and names.
    let etcd_member = |name: &str| -> Result<(PathBuf, PathBuf), String> {
        let signed = pki.etcd_ca.sign(
            node,
            None,
            &[node, "localhost"],
            &[address, loopback],
            &[ServerAuth, ClientAuth],
        )?;
        pair(name, &signed)
    };
    let etcd_server = etcd_member("etcd/server")?;
    let etcd_peer = etcd_member("etcd/peer")?;
    let etcd_client_pair =
        pki.etcd_ca
            .sign("kube-apiserver-etcd-client", None, &[], &[], &[ClientAuth])?;
    let etcd_client = pair("apiserver-etcd-client", &etcd_client_pair)?;
    let service_ip: IpAddr = [10, 96, 0, 1].into();
    let api_server_cert = pair(
        "apiserver",
        &pki.ca.sign(
            "kube-apiserver",
            None,
            &[
                node,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                endpoint_host,
            ],
            &[service_ip, address],
            &[ServerAuth],
        )?,
    )?;
    let kubelet_client = pair(
        "apiserver-kubelet-client",
        &pki.ca.sign(
            "kube-apiserver-kubelet-client",
            Some("kubeadm:cluster-admins"),
            &[],
            &[],
            &[ClientAuth],
        )?,
    )?;
    let front_proxy_client = pair(
        "front-proxy-client",
        &pki.front_proxy_ca
            .sign("front-proxy-client", None, &[], &[], &[ClientAuth])?,
    )?;

    let peer_url = format!("https://{address}:{ETCD_PEER_PORT}");
    let client_url = format!("https://{address}:{ETCD_CLIENT_PORT}");
    let (initial_cluster, state) = match etcd_members {
        None => (format!("{node}={peer_url}"), "new"),
        Some(members) => (
            members
                .iter()
                .map(|(name, url)| format!("{name}={url}"))
                .chain(std::iter::once(format!("{node}={peer_url}")))
                .collect::<Vec<_>>()
                .join(","),
            "existing",
        ),
    };
    let path = |p: &PathBuf| p.display().to_string();
    let etcd_args = vec![
        format!("--name={node}"),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster={initial_cluster}"),
        format!("--initial-cluster-state={state}"),
        "--client-cert-auth=true".into(),
        format!("--trusted-ca-file={}", path(&etcd_ca)),
        format!("--cert-file={}", path(&etcd_server.0)),
        format!("--key-file={}", path(&etcd_server.1)),
        "--peer-client-cert-auth=true".into(),
        format!("--peer-trusted-ca-file={}", path(&etcd_ca)),
        format!("--peer-cert-file={}", path(&etcd_peer.0)),
        format!("--peer-key-file={}", path(&etcd_peer.1)),
        "--snapshot-count=10000".into(),
        // The test machine's disk is shared by every process of the suite.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ];
    let etcd = Process::start("etcd", &cache_dir().join("bin/etcd"), &etcd_args, &[], dir)
        .map_err(|e| e.to_string())?;
    let etcd_access = EtcdClient {
        ca: pki.etcd_ca.cert.clone(),
        identity: etcd_client_pair,
    };

    let mut api_args = vec![
        format!("--advertise-address={address}"),
        format!("--bind-address={address}"),
        format!("--secure-port={API_SERVER_PORT}"),
        "--allow-privileged=true".into(),
        "--authorization-mode=Node,RBAC".into(),
        format!("--client-ca-file={}", path(&ca)),
        "--enable-admission-plugins=NodeRestriction".into(),
        "--enable-bootstrap-token-auth=true".into(),
        format!("--etcd-cafile={}", path(&etcd_ca)),
        format!("--etcd-certfile={}", path(&etcd_client.0)),
        format!("--etcd-keyfile={}", path(&etcd_client.1)),
        format!("--etcd-servers={client_url}"),
        format!("--kubelet-client-certificate={}", path(&kubelet_client.0)),
        format!("--kubelet-client-key={}", path(&kubelet_client.1)),
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".into(),
        format!("--proxy-client-cert-file={}", path(&front_proxy_client.0)),
        format!("--proxy-client-key-file={}", path(&front_proxy_client.1)),
        "--requestheader-allowed-names=front-proxy-client".into(),
        format!("--requestheader-client-ca-file={}", path(&front_proxy_ca)),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", path(&sa_pub)),
        format!("--service-account-signing-key-file={}", path(&sa_key)),
        format!(
            "--service-cluster-ip-range={}",
            cluster_configuration["networking"]["serviceSubnet"]
                .as_str()
                .unwrap_or("10.96.0.0/12")
        ),
        format!("--tls-cert-file={}", path(&api_server_cert.0)),
        format!("--tls-private-key-file={}", path(&api_server_cert.1)),
        // Kubernetes refuses loopback addresses in Endpoints, and every server address here is
        // one; the `kubernetes` Service is not used by anything in the test world.
        "--endpoint-reconciler-type=none".into(),
        format!("--cert-dir={}", pki_dir.display()),
    ];
    // The template's apiServer.extraArgs, as kubeadm passes them: one replaces kubeadm's own
    // flag of that name (a list flag such as --authorization-mode given twice would append).
    for arg in cluster_configuration["apiServer"]["extraArgs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let (Some(name), Some(value)) = (arg["name"].as_str(), arg["value"].as_str()) {
            let flag = format!("--{name}=");
            api_args.retain(|a| !a.starts_with(&flag));
            api_args.push(format!("{flag}{value}"));
        }
    }
    let api_server = Process::start(
        "kube-apiserver",
        &cache_dir().join("bin/kube-apiserver"),
        &api_args,
        &[],
        dir,
    )
    .map_err(|e| e.to_string())?;
    Ok((ControlPlaneNode { etcd, api_server }, etcd_access))
}

/// A client of etcd's gRPC gateway (`/v3/...` JSON over the client port), with kube-apiserver's
/// etcd client certificate.
pub fn etcd_http(access: &EtcdClient) -> Result<reqwest::Client, String> {
    let identity = reqwest::Identity::from_pem(
        format!("{}{}", access.identity.cert, access.identity.key).as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let ca = reqwest::Certificate::from_pem(access.ca.as_bytes()).map_err(|e| e.to_string())?;
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .identity(identity)
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())
}

/// `etcdctl member add`: adds a member with `peer_url` through `client_url` unless one was
/// added already (a boot tried again), returning the members to list in `--initial-cluster`
/// (the new one, still unnamed, left out).
pub async fn add_etcd_member(
    http: &reqwest::Client,
    client_url: &str,
    peer_url: &str,
) -> Result<Vec<(String, String)>, String> {
    let call = |op: &'static str, body: serde_json::Value| async move {
        http.post(format!("{client_url}/v3/cluster/member/{op}"))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("etcd member {op} through {client_url}: {e}"))?
            .error_for_status()
            .map_err(|e| format!("etcd member {op} through {client_url}: {e}"))?
            .json::<serde_json::Value>()
            .await
            .map_err(|e| format!("etcd member {op} answer: {e}"))
    };
    let listed = call("list", serde_json::json!({})).await?;
    let added = listed["members"].as_array().into_iter().flatten().any(|m| {
        m["peerURLs"]
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u == peer_url))
    });
    let answer = if added {
        listed
    } else {
        call("add", serde_json::json!({"peerURLs": [peer_url]})).await?
    };
    Ok(answer["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let name = m["name"].as_str().filter(|n| !n.is_empty())?;
            let url = m["peerURLs"].as_array()?.first()?.as_str()?;
            Some((name.to_owned(), url.to_owned()))
        })
        .collect())
}

/// Waits until `url` (etcd's `/health`, kube-apiserver's `/readyz`) answers 200 with the given
/// client.
pub async fn wait_healthy(
    http: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match http.get(url).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => format!("HTTP {}", r.status()),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{url} not healthy after {timeout:?}: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
