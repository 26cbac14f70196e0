//! Validation of every kind: pure functions from the request (and, for cross-object rules, a
//! read-only view of other objects) to a [`Verdict`].
//!
//! What the CRD schemas and CEL rules already enforce is not repeated here: those hold even
//! when this server is down. These rules are the ones CEL cannot express: rules that look at
//! other objects, at status (a claimed host), at the request itself (deletion during
//! `clusterctl move`), or that need real parsing (IP arithmetic, label syntax).

mod cluster;
mod data;
mod host;
mod inventory;
mod ipam;
mod machine;
mod remediation;
mod selector;
mod template;

use std::sync::Arc;

use capmaas_api::dns::AllowedDomains;
use capmaas_api::{MaasIPPool, MaasInventory};

pub(crate) use cluster::{maas_cluster, maas_cluster_template, maas_dns_record};
pub(crate) use data::{maas_data, maas_data_claim, maas_data_template};
pub(crate) use host::maas_host;
pub(crate) use inventory::maas_inventory;
pub(crate) use ipam::maas_ip_pool;
pub(crate) use machine::{maas_machine, maas_machine_template};
pub(crate) use remediation::{maas_remediation, maas_remediation_template};
pub(crate) use template::template_frozen;

/// The admission operation being validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object (`old` is set).
    Update,
    /// A deletion (`object` is unset, `old` is the object being deleted).
    Delete,
}

/// One admission request for an object of type `K`, decoded.
#[derive(Debug)]
pub struct Request<'a, K> {
    /// What is being done.
    pub operation: Operation,
    /// Namespace of the object.
    pub namespace: &'a str,
    /// Name of the object (empty on a create with `generateName`).
    pub name: &'a str,
    /// The object as it will be stored; `None` on delete.
    pub object: Option<&'a K>,
    /// The object as it is stored now; `None` on create.
    pub old: Option<&'a K>,
}

#[cfg(test)]
impl<'a, K> Request<'a, K> {
    /// A create of `object` named `name` in `namespace` (nothing stored yet): the request the
    /// validators' unit tests build.
    pub fn create(namespace: &'a str, name: &'a str, object: &'a K) -> Self {
        Self {
            operation: Operation::Create,
            namespace,
            name,
            object: Some(object),
            old: None,
        }
    }
}

impl<K> Request<'_, K> {
    /// The object the request is about: the new one, or on delete the one being deleted.
    pub fn current(&self) -> Option<&K> {
        self.object.or(self.old)
    }
}

/// Read access to objects other than the one being admitted, for cross-object rules. The
/// server answers from watch caches (see `crate::cache`), tests from plain lists.
pub trait Lookups: Send + Sync {
    /// Every MaasIPPool in the cluster.
    fn ip_pools(&self) -> Vec<Arc<MaasIPPool>>;
    /// Every MaasInventory in the cluster.
    fn inventories(&self) -> Vec<Arc<MaasInventory>>;
    /// The MAAS DNS domains the installation publishes in (`--dns-domains`).
    fn dns_domains(&self) -> &AllowedDomains;
}

/// Fixed lists of objects, for tests and for tools that validate offline.
#[derive(Clone, Debug, Default)]
pub struct StaticLookups {
    /// MaasIPPools.
    pub pools: Vec<Arc<MaasIPPool>>,
    /// MaasInventories.
    pub inventories: Vec<Arc<MaasInventory>>,
    /// The allowed DNS domains (default: any).
    pub dns_domains: AllowedDomains,
}

impl Lookups for StaticLookups {
    fn ip_pools(&self) -> Vec<Arc<MaasIPPool>> {
        self.pools.clone()
    }

    fn inventories(&self) -> Vec<Arc<MaasInventory>> {
        self.inventories.clone()
    }

    fn dns_domains(&self) -> &AllowedDomains {
        &self.dns_domains
    }
}

/// `clusterctl move` marks every object it is about to delete from the source cluster with this
/// annotation; deletions that are refused otherwise are allowed then, because the object lives
/// on in the target cluster.
pub use capmaas_api::keys::ANNOTATION_DELETE_FOR_MOVE as DELETE_FOR_MOVE;
/// Whether `meta` carries the `clusterctl move` deletion annotation.
pub use capmaas_api::keys::deleted_for_move as deleting_for_move;

/// Namespace and name of an object, `<namespace>/<name>`.
pub(crate) fn key_of(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}
