//! One MAAS machine, one MaasHost, in the whole cluster.
//!
//! A MaasHost may read or act on its MAAS machine only while it holds the machine's
//! *binding*: a `coordination.k8s.io` Lease in the gateway's namespace
//! (`--host-binding-namespace`, default the pod's), named after the installation and the
//! system id ([`binding_name`]), whose `holderIdentity` is the host's `<namespace>/<name>`.
//! The API server keeps names unique, so two hosts in any namespaces can never both hold one
//! machine: the second create answers 409, whatever the timing, replicas or crashes.
//!
//! The binding is taken by the inventory before it creates a host (a machine another
//! namespace already imported is not imported again), checked by the host controller before
//! it reads the machine, taken on first reconcile by a hand-made host, and read again from the
//! API server right before every allocation.
//!
//! A binding is stale, and is taken over (an update with the resourceVersion it was decided
//! from), only when its holder no longer refers to the machine — the host is gone (404) or
//! names another system id — and the binding is older than [`TAKEOVER_GRACE`] (an import
//! takes the binding a moment before it creates the host). A holder that cannot be read
//! (a namespace-scoped gateway gets 403 for other namespaces) counts as alive. Stale bindings
//! are deleted by the sweeper ([`Bindings::collect_stale`]).
//!
//! [`Bindings`] is the narrow handle all of this goes through: the API client, the binding
//! namespace, the installation, and the lease and host reflectors — nothing else of the gateway.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_runtime::error::failed;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use sha1::{Digest, Sha1};
use tracing::{debug, info};

use crate::args::BINARY;
use crate::context::Gateway;
use crate::error::{Error, Result};

/// Label on every binding: the hash of the installation it belongs to.
pub const LABEL_BINDING: &str = "maas.cluster.x-k8s.io/host-binding";
/// Annotation on a binding: the MAAS system id.
pub const ANNOTATION_SYSTEM_ID: &str = "maas.cluster.x-k8s.io/system-id";
/// Annotation on a binding: the installation (MAAS `agent_name`).
pub const ANNOTATION_INSTALLATION: &str = "maas.cluster.x-k8s.io/installation";
/// How old a binding whose holder is gone must be before it is taken over or deleted.
pub const TAKEOVER_GRACE: Duration = Duration::from_secs(120);
/// Updates of one binding tried before a reconcile gives up and retries later.
const ATTEMPTS: usize = 3;

/// Who holds a machine: `<namespace>/<name>` of a MaasHost.
pub fn holder_identity(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The first `len` hex digits of `bytes`.
pub(crate) fn hex(bytes: &[u8], len: usize) -> String {
    bytes
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(len)
        .map(|n| char::from_digit(u32::from(n), 16).unwrap_or('0'))
        .collect()
}

/// The value of [`LABEL_BINDING`] for an installation (its ids may hold characters a label
/// value cannot).
pub fn installation_label(installation: &str) -> String {
    hex(&Sha1::digest(installation.as_bytes()), 12)
}

/// The Lease name of a machine's binding: readable when the system id is a DNS label (as
/// MAAS system ids are), hashed otherwise.
pub fn binding_name(installation: &str, system_id: &str) -> String {
    let readable = !system_id.is_empty()
        && system_id.len() <= 40
        && system_id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !system_id.starts_with('-')
        && !system_id.ends_with('-');
    let machine = if readable {
        system_id.to_owned()
    } else {
        format!("x{}", hex(&Sha1::digest(system_id.as_bytes()), 20))
    };
    format!("host-{machine}-{}", installation_label(installation))
}

/// What a read of the binding's holder showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderState {
    /// The holder exists and refers to the machine, or cannot be read.
    Alive,
    /// The holder is gone or refers to another machine.
    Gone,
}

/// Whether a binding held by someone else may be taken over.
pub fn may_take_over(holder: HolderState, age: Option<Duration>) -> bool {
    holder == HolderState::Gone && age.is_some_and(|a| a >= TAKEOVER_GRACE)
}

/// The outcome of [`acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// The host holds the machine.
    Ours,
    /// Another host (`<namespace>/<name>`) holds the machine.
    TakenBy(String),
}

fn binding_age(lease: &Lease) -> Option<Duration> {
    let acquired = lease.spec.as_ref()?.acquire_time.as_ref()?.0;
    let age = jiff::Timestamp::now().duration_since(acquired);
    Duration::try_from(age).ok()
}

/// What binding decisions need of the gateway.
#[derive(Clone, Copy)]
pub struct Bindings<'a> {
    client: &'a Client,
    /// Where the bindings live (`--host-binding-namespace`).
    namespace: &'a str,
    installation: &'a str,
    /// The one namespace a namespaced gateway serves.
    served_namespace: Option<&'a str>,
    leases: &'a Store<Lease>,
    hosts: &'a Store<MaasHost>,
}

impl std::fmt::Debug for Bindings<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings")
            .field("namespace", &self.namespace)
            .field("installation", &self.installation)
            .field("served_namespace", &self.served_namespace)
            .finish_non_exhaustive()
    }
}

impl<'a> Bindings<'a> {
    /// The gateway's bindings.
    pub fn of(gw: &'a Gateway) -> Self {
        Self {
            client: &gw.base.client,
            namespace: &gw.settings.binding_namespace,
            installation: &gw.settings.installation_id,
            served_namespace: gw.settings.namespace.as_deref(),
            leases: &gw.bindings,
            hosts: &gw.hosts,
        }
    }

    /// Who holds `system_id` according to the gateway's reflector (no API call); `None` when no
    /// binding is known.
    pub fn known_holder(self, system_id: &str) -> Option<String> {
        let name = binding_name(self.installation, system_id);
        self.leases
            .get(&ObjectRef::new(&name).within(self.namespace))
            .and_then(|lease| lease.spec.as_ref()?.holder_identity.clone())
    }

    fn new_binding(self, system_id: &str, holder: &str) -> Lease {
        let installation = self.installation;
        Lease {
            metadata: ObjectMeta {
                name: Some(binding_name(installation, system_id)),
                namespace: Some(self.namespace.to_owned()),
                labels: Some(
                    [
                        (LABEL_BINDING.to_owned(), installation_label(installation)),
                        ("app.kubernetes.io/managed-by".to_owned(), BINARY.to_owned()),
                    ]
                    .into(),
                ),
                annotations: Some(
                    [
                        (ANNOTATION_SYSTEM_ID.to_owned(), system_id.to_owned()),
                        (ANNOTATION_INSTALLATION.to_owned(), installation.to_owned()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                acquire_time: Some(MicroTime(jiff::Timestamp::now())),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Reads the holder `<namespace>/<name>` of a binding for `system_id`.
    async fn holder_state(self, holder: &str, system_id: &str) -> Result<HolderState> {
        let Some((namespace, name)) = holder.split_once('/') else {
            return Ok(HolderState::Gone);
        };
        let api: Api<MaasHost> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(host)) if host.spec.system_id == system_id => Ok(HolderState::Alive),
            Ok(_) => Ok(HolderState::Gone),
            // Not ours to judge (a namespace-scoped gateway): the holder may well be alive.
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(HolderState::Alive),
            Err(e) => Err(failed("read binding holder")(e).into()),
        }
    }

    /// Takes (or confirms) the binding of `system_id` for the host `<namespace>/<name>`, asking
    /// the API server: the authority before an import or an allocation.
    pub async fn acquire(self, system_id: &str, namespace: &str, name: &str) -> Result<Bound> {
        let me = holder_identity(namespace, name);
        let api: Api<Lease> = Api::namespaced(self.client.clone(), self.namespace);
        let lease_name = binding_name(self.installation, system_id);
        for _ in 0..ATTEMPTS {
            let Some(lease) = api
                .get_opt(&lease_name)
                .await
                .map_err(failed("read host binding"))?
            else {
                match api
                    .create(&PostParams::default(), &self.new_binding(system_id, &me))
                    .await
                {
                    Ok(_) => return Ok(Bound::Ours),
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    Err(e) => return Err(failed("create host binding")(e).into()),
                }
            };
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default();
            if holder == me {
                return Ok(Bound::Ours);
            }
            let state = self.holder_state(&holder, system_id).await?;
            if !may_take_over(state, binding_age(&lease)) {
                return Ok(Bound::TakenBy(holder));
            }
            let mut taken = self.new_binding(system_id, &me);
            taken.metadata.resource_version = lease.resource_version();
            match api
                .replace(&lease_name, &PostParams::default(), &taken)
                .await
            {
                Ok(_) => {
                    info!(%system_id, from = %holder, to = %me, "took over the binding of a machine whose host is gone");
                    return Ok(Bound::Ours);
                }
                Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {}
                Err(e) => return Err(failed("take over host binding")(e).into()),
            }
        }
        Err(Error::BindingContended {
            system_id: system_id.to_owned(),
        })
    }

    /// [`Bindings::acquire`] for a machine whose binding the reflector does not show (every machine of a
    /// first import): creates the binding straight away, which is what succeeds then, and asks
    /// [`Bindings::acquire`] only when the create meets an existing binding. One API call per new machine
    /// instead of a read that finds nothing and then the create.
    pub async fn acquire_new(self, system_id: &str, namespace: &str, name: &str) -> Result<Bound> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), self.namespace);
        let me = holder_identity(namespace, name);
        match api
            .create(&PostParams::default(), &self.new_binding(system_id, &me))
            .await
        {
            Ok(_) => Ok(Bound::Ours),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                self.acquire(system_id, namespace, name).await
            }
            Err(e) => Err(failed("create host binding")(e).into()),
        }
    }

    /// Deletes bindings whose holder is gone and that are older than [`TAKEOVER_GRACE`], within
    /// the namespaces this gateway watches, except those of machines still `allocated` to this
    /// installation (an orphan is recognised by the host its binding names, until the sweeper
    /// has released it); returns how many were deleted. Each delete carries
    /// the resourceVersion it was decided from, so a binding taken in between is kept.
    pub async fn collect_stale(
        self,
        bindings: &[Arc<Lease>],
        allocated: &std::collections::BTreeSet<String>,
    ) -> Result<usize> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), self.namespace);
        let mut deleted = 0;
        for lease in bindings {
            let Some(holder) = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()) else {
                continue;
            };
            let in_scope = self
                .served_namespace
                .is_none_or(|ns| holder.split_once('/').is_some_and(|(h, _)| h == ns));
            let system_id = lease.annotations().get(ANNOTATION_SYSTEM_ID).cloned();
            let (true, Some(system_id)) = (in_scope, system_id) else {
                continue;
            };
            // Still allocated to us: the binding names the host its identity was built from.
            if allocated.contains(&system_id) {
                continue;
            }
            let known_alive = holder
                .split_once('/')
                .and_then(|(ns, name)| self.hosts.get(&ObjectRef::new(name).within(ns)))
                .is_some_and(|h| h.spec.system_id == system_id);
            // The reflector spares a read for every live binding; the API server confirms the rest.
            if known_alive
                || binding_age(lease).is_none_or(|a| a < TAKEOVER_GRACE)
                || self.holder_state(&holder, &system_id).await? == HolderState::Alive
            {
                continue;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: lease.uid(),
                    resource_version: lease.resource_version(),
                }),
                ..DeleteParams::default()
            };
            match api.delete(&lease.name_any(), &params).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {
                    debug!(binding = %lease.name_any(), "binding changed before its collection; kept");
                }
                Err(e) => return Err(failed("delete stale host binding")(e).into()),
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_lease_names_and_differ_per_installation() {
        let a = binding_name("capmaas-prod", "4y3h7n");
        assert!(a.starts_with("host-4y3h7n-"), "{a}");
        assert_ne!(a, binding_name("capmaas-dev", "4y3h7n"));
        assert_ne!(a, binding_name("capmaas-prod", "4y3h7m"));
        for odd in ["Upper_Case", "-x", "a.b", &"z".repeat(64)] {
            let name = binding_name("Capmaas_Prod", odd);
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
        assert_ne!(binding_name("i", "A"), binding_name("i", "a"));
    }

    #[test]
    fn only_a_gone_holder_past_the_grace_is_displaced() {
        let old = Some(TAKEOVER_GRACE + Duration::from_secs(1));
        let young = Some(Duration::from_secs(5));
        assert!(may_take_over(HolderState::Gone, old));
        assert!(
            !may_take_over(HolderState::Gone, young),
            "import in progress"
        );
        assert!(!may_take_over(HolderState::Gone, None));
        assert!(!may_take_over(HolderState::Alive, old));
    }
}
