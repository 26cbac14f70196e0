//! Zones, resource pools, tags, boot resources and the server version.

use http::Method;

use crate::error::MaasError;
use crate::form::Params;
use crate::model::{BootResource, ResourcePool, Tag, TagUpdateResult, Version, Zone};
use crate::transport::{Call, MaasClient, segment};

/// Which boot resources to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BootResourceKind {
    /// Synced and uploaded.
    #[default]
    All,
    /// Images synced from a stream.
    Synced,
    /// Uploaded (custom) images.
    Uploaded,
}

impl BootResourceKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Synced => "synced",
            Self::Uploaded => "uploaded",
        }
    }
}

/// Fields of a new tag (admin only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagSpec {
    /// Name (`^[a-zA-Z0-9_-]+$`).
    pub name: String,
    /// Comment.
    pub comment: Option<String>,
    /// XPath definition; empty for a manual tag.
    pub definition: Option<String>,
    /// Kernel options.
    pub kernel_opts: Option<String>,
}

fn tag_path(name: &str) -> Result<Vec<String>, MaasError> {
    Ok(vec!["tags".to_owned(), segment("tag", name)?])
}

impl MaasClient {
    /// `GET /zones/`.
    pub async fn list_zones(&self) -> Result<Vec<Zone>, MaasError> {
        self.json(Call::new(
            "zones.list",
            Method::GET,
            vec!["zones".to_owned()],
        ))
        .await
    }

    /// `GET /resourcepools/`.
    pub async fn list_resource_pools(&self) -> Result<Vec<ResourcePool>, MaasError> {
        self.json(Call::new(
            "resourcepools.list",
            Method::GET,
            vec!["resourcepools".to_owned()],
        ))
        .await
    }

    /// `GET /tags/`.
    pub async fn list_tags(&self) -> Result<Vec<Tag>, MaasError> {
        self.json(Call::new("tags.list", Method::GET, vec!["tags".to_owned()]))
            .await
    }

    /// `POST /tags/` (admin). Not retried; a duplicate name is a 400.
    pub async fn create_tag(&self, spec: &TagSpec) -> Result<Tag, MaasError> {
        let mut params = Params::new();
        params
            .push("name", spec.name.clone())
            .push_opt("comment", spec.comment.as_ref())
            .push_opt("definition", spec.definition.as_ref())
            .push_opt("kernel_opts", spec.kernel_opts.as_ref());
        let call = Call::new("tags.create", Method::POST, vec!["tags".to_owned()]).params(params);
        self.json(call).await
    }

    /// Tags machines (`POST /tags/{name}/?op=update_nodes` with `add=`). Idempotent, retried.
    pub async fn add_tag_to_machines(
        &self,
        tag: &str,
        system_ids: &[&str],
    ) -> Result<TagUpdateResult, MaasError> {
        self.update_tag_nodes(tag, "add", system_ids).await
    }

    /// Untags machines (`remove=`). Idempotent, retried.
    pub async fn remove_tag_from_machines(
        &self,
        tag: &str,
        system_ids: &[&str],
    ) -> Result<TagUpdateResult, MaasError> {
        self.update_tag_nodes(tag, "remove", system_ids).await
    }

    async fn update_tag_nodes(
        &self,
        tag: &str,
        key: &str,
        system_ids: &[&str],
    ) -> Result<TagUpdateResult, MaasError> {
        let mut params = Params::new();
        params.push_all(key, system_ids);
        let call = Call::new("tags.update_nodes", Method::POST, tag_path(tag)?)
            .op("update_nodes")
            .params(params)
            .idempotent();
        self.json(call).await
    }

    /// `GET /boot-resources/?type=...`.
    pub async fn list_boot_resources(
        &self,
        kind: BootResourceKind,
    ) -> Result<Vec<BootResource>, MaasError> {
        let mut params = Params::new();
        if kind != BootResourceKind::All {
            params.push("type", kind.as_str());
        }
        let call = Call::new(
            "bootresources.list",
            Method::GET,
            vec!["boot-resources".to_owned()],
        )
        .params(params);
        self.json(call).await
    }

    /// `GET /version/` (anonymous in MAAS, signed anyway).
    pub async fn version(&self) -> Result<Version, MaasError> {
        self.json(Call::new(
            "version",
            Method::GET,
            vec!["version".to_owned()],
        ))
        .await
    }
}
