//! Installing CustomResourceDefinitions from YAML files and waiting until they are served.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

use crate::error::{Error, Result};

/// Every `.yaml`/`.yml` file of `dir` (sorted), parsed into CRDs; other kinds are skipped.
pub fn load_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io(format!("reading {}", dir.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        crds.extend(load_file(&file)?);
    }
    Ok(crds)
}

/// The CRDs in one (possibly multi-document) YAML file.
pub fn load_file(path: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let text =
        std::fs::read_to_string(path).map_err(Error::io(format!("reading {}", path.display())))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Manifest {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    docs.into_iter()
        .filter(|doc| {
            doc.get("kind").and_then(serde_json::Value::as_str) == Some("CustomResourceDefinition")
        })
        .map(|doc| {
            serde_json::from_value(doc).map_err(|e| Error::Manifest {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Creates each CRD, or replaces it when it already exists.
pub async fn install(client: &kube::Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(Error::kube(format!("reading CRD {name}")))?;
                let mut updated = crd.clone();
                updated.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &updated)
                    .await
                    .map_err(Error::kube(format!("updating CRD {name}")))?;
            }
            Err(e) => return Err(Error::kube(format!("creating CRD {name}"))(e)),
        }
    }
    Ok(())
}

/// Waits until every CRD is `Established` and discovery lists each served version.
pub(crate) async fn wait_served(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + timeout;
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            if is_served(client, &api, crd).await? {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("CRD {name} to be established and served"),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

async fn is_served(
    client: &kube::Client,
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<bool> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let current = api
        .get(&name)
        .await
        .map_err(Error::kube(format!("reading CRD {name}")))?;
    let established = current
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conds| {
            conds
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    if !established {
        return Ok(false);
    }
    let group = &crd.spec.group;
    let plural = &crd.spec.names.plural;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let served = match client
            .list_api_group_resources(&format!("{group}/{}", version.name))
            .await
        {
            Ok(list) => list.resources.iter().any(|r| &r.name == plural),
            Err(kube::Error::Api(status)) if status.code == 404 => false,
            Err(e) => return Err(Error::kube(format!("discovering {group}/{}", version.name))(e)),
        };
        if !served {
            return Ok(false);
        }
    }
    Ok(true)
}
