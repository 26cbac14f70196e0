//! Zones, resource pools, tags, boot resources and the server version.

use crate::calls::collection;
use crate::error::MaasError;
use crate::form::Params;
use crate::model::{BootResource, CurrentUser, ResourcePool, Tag, TagUpdateResult, Version, Zone};
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
        self.get_json("zones.list", collection("zones")).await
    }

    /// `GET /resourcepools/`.
    pub async fn list_resource_pools(&self) -> Result<Vec<ResourcePool>, MaasError> {
        self.get_json("resourcepools.list", collection("resourcepools"))
            .await
    }

    /// `GET /tags/`.
    pub async fn list_tags(&self) -> Result<Vec<Tag>, MaasError> {
        self.get_json("tags.list", collection("tags")).await
    }

    /// `POST /tags/` (admin). Not retried; a duplicate name is a 400.
    pub async fn create_tag(&self, spec: &TagSpec) -> Result<Tag, MaasError> {
        let mut params = Params::new();
        params
            .push("name", spec.name.clone())
            .push_opt("comment", spec.comment.as_ref())
            .push_opt("definition", spec.definition.as_ref())
            .push_opt("kernel_opts", spec.kernel_opts.as_ref());
        self.create("tags.create", "tags", params).await
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
        let call = Call::post("tags.update_nodes", tag_path(tag)?)
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
        let call = Call::get("bootresources.list", collection("boot-resources")).params(params);
        self.json(call).await
    }

    /// `GET /version/` (anonymous in MAAS, signed anyway).
    pub async fn version(&self) -> Result<Version, MaasError> {
        self.get_json("version", collection("version")).await
    }

    /// `GET /users/?op=whoami`: the user of this key (in MAAS since 2.x).
    pub async fn whoami(&self) -> Result<CurrentUser, MaasError> {
        self.json(Call::get("users.whoami", collection("users")).op("whoami"))
            .await
    }
}
