//! Pure rules of address holds: when a released data claim's addresses are kept for its host,
//! which claim may take them over, and when a hold is let go.

use std::time::Duration;

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::common::PoolReference;
use capmaas_api::{MaasDataClaim, MaasHost, keys};
use jiff::Timestamp;
use kube::{Resource, ResourceExt};

/// Annotation of a held IPAddressClaim: the host it is kept for, `<namespace>/<name>`.
pub const ANNOTATION_HELD_FOR_HOST: &str = "maas.cluster.x-k8s.io/held-for-host";
/// Annotation of a held IPAddressClaim: when the hold lapses (RFC 3339).
pub const ANNOTATION_HELD_UNTIL: &str = "maas.cluster.x-k8s.io/held-until";
/// Annotation of a held IPAddressClaim: UID of the node-reuse owner (MachineDeployment or
/// control plane) the host was reserved for, when it was reserved.
pub const ANNOTATION_HELD_FOR_OWNER: &str = "maas.cluster.x-k8s.io/held-for-owner";

/// How long addresses are kept for a host that the next machine of the same cluster has
/// claimed already (its data claim takes them over within seconds), and how long that data
/// claim waits for the host's previous data claim to hand them over.
pub const HANDOVER_GRACE: Duration = Duration::from_secs(300);

/// A held IPAddressClaim, read from its annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// Namespace of the host.
    pub host_namespace: String,
    /// Name of the host.
    pub host: String,
    /// When the hold lapses.
    pub until: Timestamp,
    /// The node-reuse owner the host was reserved for, if it was reserved.
    pub owner_uid: Option<String>,
    /// Namespace of the IPAddressClaim (and of the data claims that may take it over).
    pub namespace: String,
    /// `cluster.x-k8s.io/cluster-name` of the IPAddressClaim.
    pub cluster: Option<String>,
}

impl Hold {
    /// The hold an IPAddressClaim is, if it is one: it carries the hold annotations and no
    /// MaasDataClaim owns it.
    pub fn of(ip_claim: &IPAddressClaim) -> Option<Self> {
        let owned = ip_claim
            .owner_references()
            .iter()
            .any(|o| o.kind == MaasDataClaim::kind(&()));
        if owned {
            return None;
        }
        let a = ip_claim.annotations();
        let (host_namespace, host) = a.get(ANNOTATION_HELD_FOR_HOST)?.split_once('/')?;
        let until = a.get(ANNOTATION_HELD_UNTIL)?.parse().ok()?;
        Some(Self {
            host_namespace: host_namespace.to_owned(),
            host: host.to_owned(),
            until,
            owner_uid: a.get(ANNOTATION_HELD_FOR_OWNER).cloned(),
            namespace: ip_claim.namespace()?,
            cluster: ip_claim.labels().get(keys::LABEL_CLUSTER_NAME).cloned(),
        })
    }
}

/// What a data claim being released keeps for its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldTerms {
    /// The host, `<namespace>/<name>`.
    pub host: String,
    /// Until when.
    pub until: Timestamp,
    /// The node-reuse owner, when the host is reserved.
    pub owner_uid: Option<String>,
}

/// The `(namespace, name)` of the host a data claim renders for.
pub fn host_of(claim: &MaasDataClaim) -> Option<(String, String)> {
    let ns = claim.namespace()?;
    let h = claim.spec.host_ref.as_ref()?;
    Some((h.namespace_or(&ns).to_owned(), h.name.clone()))
}

fn cluster_of<K: Resource>(obj: &K) -> Option<&String> {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::LABEL_CLUSTER_NAME))
}

fn plus(now: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(now)
}

/// Whether the addresses of `claim`, being released, are kept for its host, and on what terms.
/// `successor` is another live data claim of the same namespace on the same host (the next
/// machine's). Kept when:
/// - the host is reserved for node reuse (`spec.reservation`, not expired) and unclaimed: until
///   the reservation's `expiresAt`, for its owner; or
/// - the next machine has claimed the host already and its data claim (the successor) is of the
///   same Cluster: for [`HANDOVER_GRACE`].
///
/// Otherwise (no node reuse, the host gone, claimed from another namespace or Cluster) the
/// addresses are released as before.
pub fn hold_terms(
    claim: &MaasDataClaim,
    host: Option<&MaasHost>,
    successor: Option<&MaasDataClaim>,
    now: Timestamp,
) -> Option<HoldTerms> {
    let (host_ns, host_name) = host_of(claim)?;
    let host = host?;
    let ns = claim.namespace()?;
    let name = format!("{host_ns}/{host_name}");
    match (&host.spec.consumer_ref, &host.spec.reservation) {
        (None, Some(r)) if r.expires_at.0 > now => Some(HoldTerms {
            host: name,
            until: r.expires_at.0,
            owner_uid: Some(r.owner.uid.clone()),
        }),
        (Some(c), _) if c.namespace_or(&host_ns) == ns => {
            let next = successor.filter(|s| {
                s.uid() != claim.uid()
                    && s.metadata.deletion_timestamp.is_none()
                    && host_of(s) == host_of(claim)
                    && cluster_of(*s) == cluster_of(claim)
            })?;
            // The successor must not be rendered without them already.
            next.status
                .as_ref()
                .and_then(|s| s.rendered_data.as_ref())
                .is_none()
                .then(|| HoldTerms {
                    host: name,
                    until: plus(now, HANDOVER_GRACE),
                    owner_uid: None,
                })
        }
        _ => None,
    }
}

/// What becomes of a hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HoldStep {
    /// Keep it; look again after this long (or when the host or a data claim on it changes).
    Keep(Duration),
    /// Let it go (the address returns to its pool): why.
    Release(String),
}

/// The next step of `hold`, given its host and the live data claim on that host in the hold's
/// namespace, if any.
pub fn hold_step(
    hold: &Hold,
    host: Option<&MaasHost>,
    successor: Option<&MaasDataClaim>,
    now: Timestamp,
) -> HoldStep {
    let host_name = format!("MaasHost {}/{}", hold.host_namespace, hold.host);
    if now >= hold.until {
        return HoldStep::Release(format!("the hold for {host_name} lapsed at {}", hold.until));
    }
    let Some(host) = host else {
        return HoldStep::Release(format!("{host_name} is gone"));
    };
    let left = hold.until.duration_since(now).unsigned_abs();
    match (&host.spec.consumer_ref, &host.spec.reservation) {
        (Some(c), _) => {
            let consumer_ns = c.namespace_or(&hold.host_namespace);
            if consumer_ns != hold.namespace {
                return HoldStep::Release(format!(
                    "{host_name} went to a machine of namespace {consumer_ns}"
                ));
            }
            match successor {
                Some(s) if cluster_of(s) != hold.cluster.as_ref() => HoldStep::Release(format!(
                    "{host_name} went to Cluster {}",
                    cluster_of(s).map_or("(none)", String::as_str)
                )),
                Some(s)
                    if s.status
                        .as_ref()
                        .and_then(|st| st.rendered_data.as_ref())
                        .is_some() =>
                {
                    HoldStep::Release(format!(
                        "MaasDataClaim {} on {host_name} was rendered without it",
                        s.name_any()
                    ))
                }
                _ => HoldStep::Keep(left),
            }
        }
        (None, Some(r)) => match &hold.owner_uid {
            Some(owner) if *owner != r.owner.uid => HoldStep::Release(format!(
                "{host_name} is reserved for another owner ({} {})",
                r.owner.kind, r.owner.name
            )),
            _ => HoldStep::Keep(left),
        },
        (None, None) => HoldStep::Release(format!(
            "{host_name} is neither reserved nor claimed any more"
        )),
    }
}

/// Whether `claim` (not rendered yet, its addresses missing) may take over the hold `hold` of
/// `ip_claim` for `pool`: same host, same namespace and Cluster, same pool, the hold not lapsed
/// and its address served.
pub fn adoptable(
    hold: &Hold,
    ip_claim: &IPAddressClaim,
    claim: &MaasDataClaim,
    pool: &PoolReference,
    now: Timestamp,
) -> bool {
    let p = &ip_claim.spec.pool_ref;
    host_of(claim) == Some((hold.host_namespace.clone(), hold.host.clone()))
        && claim.namespace().as_ref() == Some(&hold.namespace)
        && cluster_of(claim) == hold.cluster.as_ref()
        && p.name == pool.name
        && p.kind == pool.kind
        && p.api_group == pool.api_group
        && now < hold.until
        && ip_claim.metadata.deletion_timestamp.is_none()
        && ip_claim.address_ref().is_some()
}

/// The data claim that held `claim`'s host before it and may hand its addresses over: another
/// data claim of the namespace on the same host. `claim` waits for it at most
/// [`HANDOVER_GRACE`] after its own creation, so a stuck one costs a delay, never the machine.
pub fn predecessor<'a>(
    claims: impl IntoIterator<Item = &'a MaasDataClaim>,
    claim: &MaasDataClaim,
    now: Timestamp,
) -> Option<&'a MaasDataClaim> {
    let created = claim.metadata.creation_timestamp.as_ref()?.0;
    if now >= plus(created, HANDOVER_GRACE) {
        return None;
    }
    let host = host_of(claim)?;
    let ns = claim.namespace();
    claims.into_iter().find(|c| {
        c.uid() != claim.uid() && c.namespace() == ns && host_of(c).as_ref() == Some(&host)
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
