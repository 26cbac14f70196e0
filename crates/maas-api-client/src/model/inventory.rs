//! Zones, resource pools, tags, boot resources and the server version.

use serde::{Deserialize, Serialize};

use super::null_default;

/// An availability zone (addressed by name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Zone {
    /// Id.
    pub id: i64,
    /// Name, e.g. `default`.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// Description.
    #[serde(deserialize_with = "null_default")]
    pub description: String,
    /// API path, `/MAAS/api/2.0/zones/<name>/`.
    #[serde(deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// A resource pool (item path is singular: `/resourcepool/<id>/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourcePool {
    /// Id (`default` is 0).
    pub id: i64,
    /// Name.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// Description.
    #[serde(deserialize_with = "null_default")]
    pub description: String,
    /// API path.
    #[serde(deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// A machine tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    /// Name (`^[a-zA-Z0-9_-]+$`).
    pub name: String,
    /// XPath definition; non-empty means an automatic tag.
    #[serde(default, deserialize_with = "null_default")]
    pub definition: String,
    /// Comment.
    #[serde(default, deserialize_with = "null_default")]
    pub comment: String,
    /// Kernel options applied to tagged machines.
    #[serde(default)]
    pub kernel_opts: Option<String>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// Answer of `POST /tags/{name}/?op=update_nodes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TagUpdateResult {
    /// Machines newly tagged.
    pub added: u64,
    /// Machines untagged.
    pub removed: u64,
}

/// A boot resource (an OS image).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootResource {
    /// Id.
    pub id: i64,
    /// `Synced` or `Uploaded`.
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
    /// e.g. `ubuntu/jammy`, or a bare custom image name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// e.g. `amd64/ga-22.04`.
    #[serde(default, deserialize_with = "null_default")]
    pub architecture: String,
    /// Sub-architectures.
    #[serde(default)]
    pub subarches: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Base image of a custom image, e.g. `ubuntu/jammy`.
    #[serde(default)]
    pub base_image: Option<String>,
    /// Last deployment time (3.4+).
    #[serde(default)]
    pub last_deployed: Option<String>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// Answer of `GET /version/`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Version {
    /// e.g. `3.7.3`.
    #[serde(deserialize_with = "null_default")]
    pub version: String,
    /// Sub-version.
    #[serde(deserialize_with = "null_default")]
    pub subversion: String,
    /// API capabilities.
    #[serde(deserialize_with = "null_default")]
    pub capabilities: Vec<String>,
}

/// Answer of `GET /users/?op=whoami`: the user the API key belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CurrentUser {
    /// The username, as machines show it in `owner`.
    #[serde(deserialize_with = "null_default")]
    pub username: String,
    /// Whether the user is a MAAS administrator.
    #[serde(deserialize_with = "null_default")]
    pub is_superuser: bool,
}
