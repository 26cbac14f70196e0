//! How one installed Deployment runs here, as a process: a pure function of the Deployment,
//! the Secrets and ConfigMaps it reads, and the local choices (folder, ports).
//!
//! What a pod would get and what stands in for it:
//! - the `manager` container's command line and environment, values from Secrets, ConfigMaps
//!   and the downward API (namespace, pod name and uid) resolved as the kubelet would;
//! - Secret, ConfigMap and emptyDir volumes laid out under `<dir>/root/<mountPath>` and
//!   bind-mounted at their `mountPath` in the process's own mount namespace, so the program
//!   reads the paths it would read in the pod ([`super`] makes the namespace);
//! - each container port moved to a free loopback port (every pod has its own network, these
//!   processes share one): an argument binding the port is rewritten, or, when the binary
//!   binds it by default, the flag for it is added.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Secret, Volume};

use crate::error::{Error, Result};

/// Everything needed to start one Deployment's `manager` container as a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// `<namespace>/<name>` of the Deployment.
    pub deployment: String,
    /// The image, which names the program ([`crate::installed::program_of_image`]).
    pub image: String,
    /// The container's command line after the rewrites above.
    pub args: Vec<String>,
    /// The container's environment, resolved, plus `TMPDIR`.
    pub env: Vec<(String, String)>,
    /// Files to write before the start: mounted Secret and ConfigMap keys.
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// Volumes: the local folder and the `mountPath` it is mounted at, parents first.
    pub mounts: Vec<(PathBuf, String)>,
    /// The pod's ServiceAccount.
    pub service_account: String,
    /// Local port of each named container port.
    pub ports: BTreeMap<String, u16>,
    /// The readiness probe as a local URL, when the container has an HTTP one.
    pub readiness_url: Option<String>,
}

/// The objects a pod's environment and volumes read, by name (in the Deployment's namespace).
#[derive(Debug, Default, Clone)]
pub struct Sources {
    /// Secrets by name.
    pub secrets: BTreeMap<String, Secret>,
    /// ConfigMaps by name.
    pub config_maps: BTreeMap<String, ConfigMap>,
}

/// Flags a binary binds a port with when its arguments do not say it, by port name: what
/// controller-runtime managers (CAPI) and our runtime default to.
const DEFAULT_PORT_FLAGS: [(&str, &str); 5] = [
    ("healthz", "--health-addr=127.0.0.1:{}"),
    ("health", "--health-addr=127.0.0.1:{}"),
    ("webhook-server", "--webhook-port={}"),
    ("webhook", "--webhook-port={}"),
    ("metrics", "--diagnostics-address=127.0.0.1:{}"),
];

fn invalid(deployment: &str, message: impl Into<String>) -> Error {
    Error::Manifest {
        name: deployment.to_owned(),
        message: message.into(),
    }
}

/// Plans the `manager` container of `deployment`; `free_port` gives each container port its
/// local replacement.
pub fn plan(
    deployment: &Deployment,
    sources: &Sources,
    dir: &Path,
    mut free_port: impl FnMut() -> Result<u16>,
) -> Result<Launch> {
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let id = format!("{namespace}/{name}");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .ok_or_else(|| invalid(&id, "no pod template"))?;
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == "manager")
        .or_else(|| pod.containers.first())
        .ok_or_else(|| invalid(&id, "no container"))?;
    let root = dir.join("root");
    let local = |mount: &str| root.join(mount.trim_start_matches('/'));

    // Volumes: their files and folders, and the mount points to rewrite.
    let volumes: BTreeMap<&str, &Volume> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let mut files = Vec::new();
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let target = local(&mount.mount_path);
        let volume = volumes
            .get(mount.name.as_str())
            .ok_or_else(|| invalid(&id, format!("volume {} is not defined", mount.name)))?;
        files.extend(volume_files(&id, volume, sources, &target)?);
        mounts.push((target, mount.mount_path.clone()));
    }
    // A parent before what is mounted inside it (`/tmp` before `/tmp/k8s-webhook-server/...`).
    mounts.sort_by_key(|(_, path)| path.matches('/').count());

    // Ports.
    let mut ports = BTreeMap::new();
    let mut args: Vec<String> = container
        .command
        .iter()
        .flatten()
        .skip(1)
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    for port in container.ports.iter().flatten() {
        let local_port = free_port()?;
        let name = port
            .name
            .clone()
            .unwrap_or_else(|| port.container_port.to_string());
        let bound = rebind(&mut args, port.container_port, local_port);
        if !bound && let Some((_, flag)) = DEFAULT_PORT_FLAGS.iter().find(|(n, _)| *n == name) {
            args.push(flag.replace("{}", &local_port.to_string()));
        }
        ports.insert(name, local_port);
    }
    let readiness_url = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .and_then(|get| {
            let port = match &get.port {
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(name) => {
                    ports.get(name).copied()
                }
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(number) => {
                    container_port_by_number(container, *number, &ports)
                }
            }?;
            Some(format!(
                "http://127.0.0.1:{port}{}",
                get.path.as_deref().unwrap_or("/")
            ))
        });

    let env = resolve_env(&id, container, sources, &namespace, &name)?;
    Ok(Launch {
        deployment: id,
        image: container.image.clone().unwrap_or_default(),
        args,
        env,
        files,
        mounts,
        service_account: pod
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into()),
        ports,
        readiness_url,
    })
}

fn container_port_by_number(
    container: &Container,
    number: i32,
    ports: &BTreeMap<String, u16>,
) -> Option<u16> {
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == number)?;
    let name = port.name.clone().unwrap_or_else(|| number.to_string());
    ports.get(&name).copied()
}

/// Rewrites every argument that binds `container_port` (`--flag=:P`, `--flag=0.0.0.0:P`,
/// `--flag=P`) to `local_port` on loopback; true when one did.
fn rebind(args: &mut [String], container_port: i32, local_port: u16) -> bool {
    let mut bound = false;
    for arg in args.iter_mut() {
        let Some((flag, value)) = arg.split_once('=') else {
            continue;
        };
        let port = container_port.to_string();
        let replacement = match value.rsplit_once(':') {
            Some((host, p))
                if p == port
                    && matches!(host, "" | "0.0.0.0" | "[::]" | "localhost" | "127.0.0.1") =>
            {
                format!("{flag}=127.0.0.1:{local_port}")
            }
            None if value == port => format!("{flag}={local_port}"),
            _ => continue,
        };
        *arg = replacement;
        bound = true;
    }
    bound
}

fn volume_files(
    id: &str,
    volume: &Volume,
    sources: &Sources,
    target: &Path,
) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let (data, items, optional): (BTreeMap<String, Vec<u8>>, _, bool) =
        if let Some(secret) = &volume.secret {
            let name = secret.secret_name.clone().unwrap_or_default();
            let data = sources
                .secrets
                .get(&name)
                .map(secret_data)
                .unwrap_or_default();
            if !sources.secrets.contains_key(&name) && secret.optional != Some(true) {
                return Err(invalid(
                    id,
                    format!("Secret {name} (volume {}) is missing", volume.name),
                ));
            }
            (data, secret.items.clone(), secret.optional == Some(true))
        } else if let Some(map) = &volume.config_map {
            let name = map.name.clone();
            let Some(found) = sources.config_maps.get(&name) else {
                if map.optional == Some(true) {
                    return Ok(Vec::new());
                }
                return Err(invalid(
                    id,
                    format!("ConfigMap {name} (volume {}) is missing", volume.name),
                ));
            };
            let data = found
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .collect();
            (data, map.items.clone(), map.optional == Some(true))
        } else if volume.empty_dir.is_some() {
            return Ok(Vec::new());
        } else {
            return Err(invalid(
                id,
                format!(
                    "volume {}: only Secret, ConfigMap and emptyDir volumes are laid out here",
                    volume.name
                ),
            ));
        };
    match items {
        None => Ok(data
            .into_iter()
            .map(|(key, bytes)| (target.join(key), bytes))
            .collect()),
        Some(items) => {
            let mut files = Vec::new();
            for item in items {
                match data.get(&item.key) {
                    Some(bytes) => files.push((target.join(&item.path), bytes.clone())),
                    None if optional => {}
                    None => {
                        return Err(invalid(
                            id,
                            format!("key {} of volume {} is missing", item.key, volume.name),
                        ));
                    }
                }
            }
            Ok(files)
        }
    }
}

fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

fn resolve_env(
    id: &str,
    container: &Container,
    sources: &Sources,
    namespace: &str,
    pod_name: &str,
) -> Result<Vec<(String, String)>> {
    let mut env: Vec<(String, String)> = Vec::new();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(r) = &from.secret_ref {
            let secret = sources.secrets.get(&r.name);
            if secret.is_none() && r.optional != Some(true) {
                return Err(invalid(
                    id,
                    format!("Secret {} (envFrom) is missing", r.name),
                ));
            }
            for (k, v) in secret.map(secret_data).unwrap_or_default() {
                env.push((
                    format!("{prefix}{k}"),
                    String::from_utf8_lossy(&v).into_owned(),
                ));
            }
        }
        if let Some(r) = &from.config_map_ref {
            for (k, v) in sources
                .config_maps
                .get(&r.name)
                .and_then(|m| m.data.clone())
                .unwrap_or_default()
            {
                env.push((format!("{prefix}{k}"), v));
            }
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = env_value(id, var, sources, namespace, pod_name)? {
            env.retain(|(k, _)| *k != var.name);
            env.push((var.name.clone(), value));
        }
    }
    Ok(env)
}

fn env_value(
    id: &str,
    var: &EnvVar,
    sources: &Sources,
    namespace: &str,
    pod_name: &str,
) -> Result<Option<String>> {
    let Some(from) = &var.value_from else {
        return Ok(var.value.clone());
    };
    if let Some(field) = &from.field_ref {
        return Ok(match field.field_path.as_str() {
            "metadata.namespace" => Some(namespace.to_owned()),
            "metadata.name" => Some(format!("{pod_name}-local")),
            // One process per Deployment: its "pod" is as stable as the Deployment.
            "metadata.uid" => Some(format!("local-{namespace}-{pod_name}")),
            other => {
                return Err(invalid(
                    id,
                    format!("env {}: fieldRef {other} is not simulated", var.name),
                ));
            }
        });
    }
    if let Some(key) = &from.secret_key_ref {
        let value = sources
            .secrets
            .get(&key.name)
            .and_then(|s| secret_data(s).remove(&key.key));
        return match value {
            Some(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            None if key.optional == Some(true) => Ok(None),
            None => Err(invalid(
                id,
                format!(
                    "env {}: Secret {} has no key {}",
                    var.name, key.name, key.key
                ),
            )),
        };
    }
    if let Some(key) = &from.config_map_key_ref {
        let value = sources
            .config_maps
            .get(&key.name)
            .and_then(|m| m.data.as_ref()?.get(&key.key).cloned());
        return match value {
            Some(v) => Ok(Some(v)),
            None if key.optional == Some(true) => Ok(None),
            None => Err(invalid(
                id,
                format!(
                    "env {}: ConfigMap {} has no key {}",
                    var.name, key.name, key.key
                ),
            )),
        };
    }
    Err(invalid(
        id,
        format!("env {}: this valueFrom is not simulated", var.name),
    ))
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
