//! What the controller decides, as pure functions of what it observed.
//!
//! [`decide`] picks the pass a reconcile makes; the rest plans the endpoint, the failure
//! domains and the order of deletion. `act.rs` reads the world, asks these functions what it
//! should look like, and writes only the differences; `status.rs` builds the status.

use capmaas_api::capi::{CAPI_GROUP, CLUSTER_KIND, Cluster};
use capmaas_api::cluster::{ApiEndpoint, FailureDomain, MaasClusterSpec};
use capmaas_api::conditions as cond;
use capmaas_api::keys::{ANNOTATION_MANAGED_BY, ANNOTATION_PAUSED, FINALIZER_MAAS_CLUSTER};
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasMachine};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition};
use kube::ResourceExt;

/// Port of the generated endpoint when the Cluster does not name one.
pub const DEFAULT_API_SERVER_PORT: i32 = 6443;

/// Reasons this controller uses besides the shared ones in `capmaas_api::conditions::reasons`.
pub mod reason {
    /// `LoadBalancerReady=True` (CAPMAAS name).
    pub const LOAD_BALANCER_READY: &str = "LoadBalancerReady";
    /// `APIServerAvailable=True` (CAPMAAS name).
    pub const API_SERVER_AVAILABLE: &str = "APIServerAvailable";
    /// The first probe of the workload API server has not finished.
    pub const PROBE_PENDING: &str = "ProbePending";
    /// Deletion waits for the cluster's MaasMachines to go.
    pub const WAITING_FOR_MACHINE_DELETION: &str = "WaitingForMachineDeletion";
    /// Deletion waits for the MAAS gateway to delete the DNS record.
    pub const DELETING_DNS_RECORD: &str = "DeletingDNSRecord";
    /// The user provided the endpoint; no DNS record is managed.
    pub const EXTERNAL_ENDPOINT: &str = "ExternalEndpoint";
    /// A hosted control plane's provider has not set the endpoint yet (`LoadBalancerReady`).
    pub const WAITING_FOR_CONTROL_PLANE_ENDPOINT: &str = "WaitingForControlPlaneEndpoint";
}

/// What one reconcile observed about a MaasCluster.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The MaasCluster.
    pub maas_cluster: &'a MaasCluster,
    /// Its owner Cluster, when the owner reference names one and it exists.
    pub cluster: Option<&'a Cluster>,
}

/// The pass one reconcile makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do until something changes (the why is for the log).
    AwaitChange(&'static str),
    /// The owner reference names a Cluster that is not there (yet).
    WaitForCluster,
    /// Paused: only the `Paused` condition changes, the probe stops.
    Pause(String),
    /// Add our finalizer, then make the normal pass.
    AddFinalizer,
    /// The normal pass: endpoint, DNS record, probe, status.
    Apply,
    /// One step of deletion (see [`deletion_step`]).
    Cleanup,
    /// Deleted by `clusterctl move`: drop our finalizer and leave the DNS records (moved too)
    /// and MAAS alone.
    MovedAway,
}

/// The pass to make. Deletion goes first (a paused deletion waits too); an externally managed
/// MaasCluster or one without an owner Cluster reference is left alone, as the contract asks.
pub fn decide(observed: &Observed<'_>) -> Step {
    let mc = observed.maas_cluster;
    if mc.metadata.deletion_timestamp.is_some() {
        if !has_finalizer(mc) {
            return Step::AwaitChange("being deleted; our finalizer is already gone");
        }
        if capmaas_api::keys::deleted_for_move(&mc.metadata) {
            return Step::MovedAway;
        }
        return match pause_reason(mc, observed.cluster) {
            Some(why) => Step::Pause(why),
            None => Step::Cleanup,
        };
    }
    if is_externally_managed(mc) {
        return Step::AwaitChange("externally managed (cluster.x-k8s.io/managed-by)");
    }
    if owner_cluster_name(mc).is_none() {
        // CAPI sets the owner reference; that update wakes us.
        return Step::AwaitChange("waiting for the owner Cluster reference");
    }
    let Some(cluster) = observed.cluster else {
        return Step::WaitForCluster;
    };
    if let Some(why) = pause_reason(mc, Some(cluster)) {
        return Step::Pause(why);
    }
    if has_finalizer(mc) {
        Step::Apply
    } else {
        Step::AddFinalizer
    }
}

/// Name of the owning CAPI Cluster, from the owner reference CAPI sets.
pub fn owner_cluster_name(mc: &MaasCluster) -> Option<&str> {
    mc.owner_references()
        .iter()
        .find(|o| {
            o.kind == CLUSTER_KIND
                && o.api_version.split('/').next() == Some(CAPI_GROUP)
                && !o.name.is_empty()
        })
        .map(|o| o.name.as_str())
}

/// Whether someone else manages this infrastructure (`cluster.x-k8s.io/managed-by`).
pub fn is_externally_managed(mc: &MaasCluster) -> bool {
    mc.annotations().contains_key(ANNOTATION_MANAGED_BY)
}

/// Whether our finalizer is present.
pub fn has_finalizer(mc: &MaasCluster) -> bool {
    capmaas_runtime::controller::finalizer::has(mc, FINALIZER_MAAS_CLUSTER)
}

/// Why reconciliation is paused, or `None`.
pub fn pause_reason(mc: &MaasCluster, cluster: Option<&Cluster>) -> Option<String> {
    if cluster.is_some_and(Cluster::is_paused) {
        Some("Cluster spec.paused is true".to_owned())
    } else if mc.annotations().contains_key(ANNOTATION_PAUSED) {
        Some(format!("annotation {ANNOTATION_PAUSED} is set"))
    } else {
        None
    }
}

/// The DNS name of a cluster's API server that a MaasDNSRecord serves: our deterministic
/// `<cluster>.<dnsDomain>`, or the `<cluster>-<6 hex>.<dnsDomain>` CAPMAAS generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsName {
    /// Host part (the Cluster's name, with CAPMAAS's suffix if any); also the MaasDNSRecord's
    /// name.
    pub name: String,
    /// MAAS DNS domain without a trailing dot.
    pub domain: String,
}

impl DnsName {
    /// The name for `cluster` in `domain`; an error when the cluster name cannot be a DNS label.
    pub fn for_cluster(cluster: &str, domain: &str) -> Result<Self, String> {
        let label_ok = !cluster.is_empty()
            && cluster.len() <= 63
            && cluster
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !cluster.starts_with('-')
            && !cluster.ends_with('-');
        if !label_ok {
            return Err(format!(
                "Cluster name {cluster:?} is not a DNS label (at most 63 of a-z, 0-9, '-'); set spec.controlPlaneEndpoint"
            ));
        }
        let domain = domain.trim().trim_end_matches('.');
        if domain.is_empty() {
            return Err("spec.dnsDomain is empty".to_owned());
        }
        Ok(Self {
            name: cluster.to_owned(),
            domain: domain.to_owned(),
        })
    }

    /// The name CAPMAAS generated for `cluster` when `host` has its exact shape,
    /// `<cluster>-<6 of [0-9a-f]>.<domain>`; `None` for any other host. The suffix is the tail
    /// of a random UUID, so the shape alone cannot tell CAPMAAS's name from a user's:
    /// [`plan_endpoint`] also asks the status.
    pub fn capmaas(cluster: &str, domain: &str, host: &str) -> Option<Self> {
        const SUFFIX_LEN: usize = 6;
        let domain = Self::for_cluster(cluster, domain).ok()?.domain;
        let (label, host_domain) = host.trim_end_matches('.').split_once('.')?;
        let suffix = label.strip_prefix(cluster)?.strip_prefix('-')?;
        let hex = suffix.len() == SUFFIX_LEN
            && suffix
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        // A label longer than DNS allows cannot be a MaasDNSRecord's name.
        (hex && host_domain == domain && label.len() <= 63).then(|| Self {
            name: label.to_owned(),
            domain,
        })
    }

    /// `<name>.<domain>`.
    pub fn fqdn(&self) -> String {
        format!("{}.{}", self.name, self.domain)
    }
}

/// The settled control-plane endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPlan {
    /// The endpoint `spec.controlPlaneEndpoint` must hold.
    pub endpoint: ApiEndpoint,
    /// Set when the endpoint is our generated name or CAPMAAS's, served by a MaasDNSRecord.
    pub dns: Option<DnsName>,
    /// The name is the one CAPMAAS generated: its MaasDNSRecord takes over the MAAS resource
    /// CAPMAAS made, and `status.network.dnsName` keeps CAPMAAS's value.
    pub adopt: bool,
    /// `spec.controlPlaneEndpoint` must be written.
    pub patch_spec: bool,
}

/// Settles the endpoint: the MaasCluster's own endpoint when set, else one the user put on the
/// Cluster, else `<cluster>.<dnsDomain>:<apiServerPort or 6443>` (deterministic: a retried or
/// failed status write can never create a second name, unlike CAPMAAS's random suffix).
///
/// A set endpoint is served by a MaasDNSRecord when it is our generated name, or CAPMAAS's
/// (`<cluster>-<6 hex>.<dnsDomain>`) that `status_dns_name` (`status.network.dnsName`, written
/// by CAPMAAS) names too: the status is what tells CAPMAAS's own name from a user's choice of
/// the same shape, and a user's name is never served or adopted.
pub fn plan_endpoint(
    cluster_name: &str,
    spec: &MaasClusterSpec,
    status_dns_name: Option<&str>,
    cluster: &Cluster,
) -> Result<EndpointPlan, String> {
    let generated = DnsName::for_cluster(cluster_name, &spec.dns_domain);
    let ours = |host: &str| -> (Option<DnsName>, bool) {
        let host = host.trim_end_matches('.');
        if let Some(g) = generated
            .as_ref()
            .ok()
            .filter(|g| g.fqdn().eq_ignore_ascii_case(host))
        {
            return (Some(g.clone()), false);
        }
        let capmaas = status_dns_name
            .filter(|s| s.trim_end_matches('.').eq_ignore_ascii_case(host))
            .and_then(|_| DnsName::capmaas(cluster_name, &spec.dns_domain, host));
        let adopt = capmaas.is_some();
        (capmaas, adopt)
    };
    let port = cluster
        .spec
        .cluster_network
        .as_ref()
        .and_then(|n| n.api_server_port)
        .unwrap_or(DEFAULT_API_SERVER_PORT);
    if let Some(own) = spec
        .control_plane_endpoint
        .as_ref()
        .filter(|e| !e.host.is_empty())
    {
        let (dns, adopt) = ours(&own.host);
        return Ok(EndpointPlan {
            dns,
            adopt,
            endpoint: own.clone(),
            patch_spec: false,
        });
    }
    let from_cluster = cluster.spec.control_plane_endpoint.as_ref().and_then(|e| {
        e.host
            .as_deref()
            .filter(|h| !h.is_empty())
            .map(|h| (h, e.port))
    });
    if let Some((host, cluster_port)) = from_cluster {
        let (dns, adopt) = ours(host);
        return Ok(EndpointPlan {
            dns,
            adopt,
            endpoint: ApiEndpoint {
                host: host.to_owned(),
                port: cluster_port.unwrap_or(port),
            },
            patch_spec: true,
        });
    }
    let name = generated?;
    Ok(EndpointPlan {
        endpoint: ApiEndpoint {
            host: name.fqdn(),
            port,
        },
        dns: Some(name),
        adopt: false,
        patch_spec: true,
    })
}

/// Failure domains for status: one per MAAS zone in the spec, all eligible for the control
/// plane, duplicates dropped (the status list is a map keyed by name).
pub fn failure_domains(spec: &MaasClusterSpec) -> Option<Vec<FailureDomain>> {
    let zones = spec.failure_domains.as_ref()?;
    let mut out: Vec<FailureDomain> = Vec::with_capacity(zones.len());
    for zone in zones.iter().map(|z| z.trim()).filter(|z| !z.is_empty()) {
        if !out.iter().any(|d| d.name == zone) {
            out.push(FailureDomain {
                name: zone.to_owned(),
                control_plane: Some(true),
                attributes: None,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The next step of deleting a MaasCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionStep {
    /// MaasMachines of the cluster still exist (names, sorted).
    WaitForMachines(Vec<String>),
    /// Delete these MaasDNSRecords.
    DeleteDnsRecords(Vec<String>),
    /// These records are being deleted; the gateway removes them from MAAS first.
    WaitForDnsRecords(Vec<String>),
    /// Nothing is left: remove the finalizer.
    RemoveFinalizer,
}

/// Deletion order: machines first (CAPMAAS issue #25: deleting the cluster first hung machine
/// deletion), then the DNS record, then the finalizer.
pub fn deletion_step(machines: &[MaasMachine], owned_records: &[MaasDNSRecord]) -> DeletionStep {
    if !machines.is_empty() {
        let mut names: Vec<String> = machines.iter().map(ResourceExt::name_any).collect();
        names.sort();
        return DeletionStep::WaitForMachines(names);
    }
    let (deleting, live): (Vec<_>, Vec<_>) = owned_records
        .iter()
        .partition(|r| r.metadata.deletion_timestamp.is_some());
    let names = |records: Vec<&MaasDNSRecord>| {
        let mut n: Vec<String> = records.into_iter().map(ResourceExt::name_any).collect();
        n.sort();
        n
    };
    if !live.is_empty() {
        DeletionStep::DeleteDnsRecords(names(live))
    } else if !deleting.is_empty() {
        DeletionStep::WaitForDnsRecords(names(deleting))
    } else {
        DeletionStep::RemoveFinalizer
    }
}

/// The `Ready=False` condition shown while deletion waits.
pub fn deletion_condition(step: &DeletionStep, generation: Option<i64>) -> Option<NewCondition> {
    let (reason, message) = match step {
        DeletionStep::WaitForMachines(names) => (
            reason::WAITING_FOR_MACHINE_DELETION,
            format!(
                "waiting for {} MaasMachine(s) to be deleted: {}",
                names.len(),
                short_list(names)
            ),
        ),
        DeletionStep::DeleteDnsRecords(names) | DeletionStep::WaitForDnsRecords(names) => (
            reason::DELETING_DNS_RECORD,
            format!("deleting MaasDNSRecord {}", short_list(names)),
        ),
        DeletionStep::RemoveFinalizer => return None,
    };
    Some(
        NewCondition::new(cond::READY, ConditionStatus::False, reason)
            .message(message)
            .observed_generation(generation),
    )
}

/// Whether `record` is owned by the MaasCluster with `uid`.
pub fn owned_by(record: &MaasDNSRecord, uid: &str) -> bool {
    record.owner_references().iter().any(|o| o.uid == uid)
}

fn short_list(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        out.push_str(" and ");
        out.push_str(&(names.len() - SHOWN).to_string());
        out.push_str(" more");
    }
    out
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
