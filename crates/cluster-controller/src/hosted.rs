//! Hosted control planes (Kamaji, k0smotron, ...): whether a cluster's API server runs outside
//! its MAAS machines, and the endpoint such a cluster settles on. Pure.
//!
//! The rule, in order:
//! 1. annotation `maas.cluster.x-k8s.io/hosted-control-plane` on the MaasCluster: `"true"` or
//!    `"false"` decides (for a provider not in the list, or to overrule it);
//! 2. the Cluster's `spec.controlPlaneRef` names one of the [`HostedKinds`]: the built-in
//!    [`BUILT_IN`] plus `--hosted-control-plane-kinds`;
//! 3. anything else (KubeadmControlPlane, no `controlPlaneRef`): the control plane runs on this
//!    cluster's machines, and the endpoint is settled as always ([`plan_endpoint`]).
//!
//! A hosted control plane's provider owns the endpoint: cluster-controller never writes one of
//! its own and never publishes a DNS record for it. It takes the endpoint the provider set on
//! the MaasCluster (Kamaji with `DynamicInfrastructureClusterPatch`, k0smotron, teutonet's
//! HostedControlPlane) or on the Cluster (copied, as the InfraCluster contract asks of a provider
//! that does not own the endpoint), and waits until one is there.

use std::collections::BTreeMap;
use std::fmt;

use capmaas_api::capi::{Cluster, ContractObjectReference};
use capmaas_api::cluster::{ANNOTATION_HOSTED_CONTROL_PLANE, ApiEndpoint, MaasClusterSpec};
use capmaas_api::conditions as cond;
use capmaas_runtime::conditions::{ConditionStatus, NewCondition};

use crate::decide::{DEFAULT_API_SERVER_PORT, EndpointPlan, plan_endpoint, reason};

/// API group of Cluster API control-plane providers' kinds.
pub const CONTROL_PLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";

/// Control-plane kinds whose API server runs outside the cluster's machines and whose provider
/// sets the endpoint itself, each checked against its provider's source: Kamaji's
/// `KamajiControlPlane`, k0smotron's `K0smotronControlPlane` (not `K0sControlPlane`, which runs
/// on machines), teutonet's `HostedControlPlane`.
pub const BUILT_IN: [(&str, &str); 3] = [
    ("KamajiControlPlane", CONTROL_PLANE_GROUP),
    ("K0smotronControlPlane", CONTROL_PLANE_GROUP),
    ("HostedControlPlane", CONTROL_PLANE_GROUP),
];

/// A hosted control-plane kind: `Kind` (any group) or `Kind.group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedKind {
    /// Kind, e.g. `KamajiControlPlane`.
    pub kind: String,
    /// API group; `None` matches any.
    pub group: Option<String>,
}

impl HostedKind {
    /// Parses `Kind` or `Kind.group` (the flag's syntax, as `kubectl` writes resources).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (kind, group) = match text.split_once('.') {
            Some((kind, group)) => (kind, Some(group)),
            None => (text, None),
        };
        let kind_ok = kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !kind_ok {
            return Err(format!(
                "{text:?} is not a kind: write Kind or Kind.group, e.g. KamajiControlPlane or KamajiControlPlane.{CONTROL_PLANE_GROUP}"
            ));
        }
        if group.is_some_and(|g| g.is_empty() || g.split('.').any(str::is_empty)) {
            return Err(format!("{text:?} has an empty API group part"));
        }
        Ok(Self {
            kind: kind.to_owned(),
            group: group.map(str::to_owned),
        })
    }

    /// Whether `reference` names this kind.
    pub fn matches(&self, reference: &ContractObjectReference) -> bool {
        reference.kind == self.kind
            && self
                .group
                .as_deref()
                .is_none_or(|g| g.eq_ignore_ascii_case(&reference.api_group))
    }
}

impl fmt::Display for HostedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.group {
            Some(group) => write!(f, "{}.{group}", self.kind),
            None => f.write_str(&self.kind),
        }
    }
}

/// The hosted control-plane kinds this controller knows: [`BUILT_IN`] and the flag's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedKinds(Vec<HostedKind>);

impl Default for HostedKinds {
    fn default() -> Self {
        Self::with_extra(&[])
    }
}

impl HostedKinds {
    /// [`BUILT_IN`] and `extra` (from `--hosted-control-plane-kinds`).
    pub fn with_extra(extra: &[HostedKind]) -> Self {
        let built_in = BUILT_IN.iter().map(|(kind, group)| HostedKind {
            kind: (*kind).to_owned(),
            group: Some((*group).to_owned()),
        });
        Self(built_in.chain(extra.iter().cloned()).collect())
    }

    /// The entry naming `reference`'s kind, if any.
    pub fn find(&self, reference: &ContractObjectReference) -> Option<&HostedKind> {
        self.0.iter().find(|k| k.matches(reference))
    }
}

/// Where the cluster's control plane runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosting {
    /// On this cluster's MAAS machines (KubeadmControlPlane, no `controlPlaneRef`, ...): the
    /// endpoint is settled as always.
    Machines,
    /// Elsewhere; the provider sets the endpoint. Says why, for messages.
    Hosted(String),
}

/// Applies the rule of this module's documentation.
pub fn hosting(
    annotations: &BTreeMap<String, String>,
    control_plane_ref: Option<&ContractObjectReference>,
    kinds: &HostedKinds,
) -> Result<Hosting, String> {
    match annotations
        .get(ANNOTATION_HOSTED_CONTROL_PLANE)
        .map(String::as_str)
    {
        Some("true") => {
            return Ok(Hosting::Hosted(format!(
                "annotation {ANNOTATION_HOSTED_CONTROL_PLANE} is \"true\""
            )));
        }
        Some("false") => return Ok(Hosting::Machines),
        Some(other) => {
            return Err(format!(
                "annotation {ANNOTATION_HOSTED_CONTROL_PLANE} must be \"true\" or \"false\", not {other:?}"
            ));
        }
        None => {}
    }
    Ok(
        match control_plane_ref.filter(|r| kinds.find(r).is_some()) {
            Some(r) => Hosting::Hosted(format!(
                "Cluster spec.controlPlaneRef is {} {}",
                r.kind, r.name
            )),
            None => Hosting::Machines,
        },
    )
}

/// `spec.controlPlaneRef` of a Cluster, when it names a kind.
pub fn control_plane_ref(cluster: &Cluster) -> Option<ContractObjectReference> {
    cluster
        .spec
        .control_plane_ref
        .clone()
        .filter(|r| !r.kind.is_empty())
}

/// What the endpoint step of a normal pass does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointStep {
    /// The endpoint is settled (or settles now when `patch_spec`).
    Settled(EndpointPlan),
    /// A hosted control plane whose provider has not set the endpoint yet; the why of
    /// [`Hosting::Hosted`].
    WaitForProvider(String),
}

/// The endpoint step for a cluster whose control plane runs as `hosting` says; an error is a
/// spec problem (see [`plan_endpoint`]).
pub fn settle_endpoint(
    cluster_name: &str,
    spec: &MaasClusterSpec,
    status_dns_name: Option<&str>,
    cluster: &Cluster,
    hosting: &Hosting,
) -> Result<EndpointStep, String> {
    match hosting {
        Hosting::Machines => {
            plan_endpoint(cluster_name, spec, status_dns_name, cluster).map(EndpointStep::Settled)
        }
        Hosting::Hosted(why) => Ok(provider_endpoint(spec, cluster).map_or_else(
            || EndpointStep::WaitForProvider(why.clone()),
            EndpointStep::Settled,
        )),
    }
}

/// The endpoint a hosted control plane's provider set: on the MaasCluster (kept), else on the
/// Cluster (copied into the MaasCluster, the port defaulting as [`plan_endpoint`] does).
/// Never served by a MaasDNSRecord.
pub fn provider_endpoint(spec: &MaasClusterSpec, cluster: &Cluster) -> Option<EndpointPlan> {
    if let Some(own) = spec
        .control_plane_endpoint
        .as_ref()
        .filter(|e| !e.host.is_empty())
    {
        return Some(EndpointPlan {
            endpoint: own.clone(),
            dns: None,
            adopt: false,
            patch_spec: false,
        });
    }
    let on_cluster = cluster.spec.control_plane_endpoint.as_ref()?;
    let host = on_cluster.host.as_deref().filter(|h| !h.is_empty())?;
    let port = on_cluster
        .port
        .or_else(|| cluster.spec.cluster_network.as_ref()?.api_server_port)
        .unwrap_or(DEFAULT_API_SERVER_PORT);
    Some(EndpointPlan {
        endpoint: ApiEndpoint {
            host: host.to_owned(),
            port,
        },
        dns: None,
        adopt: false,
        patch_spec: true,
    })
}

/// `LoadBalancerReady=False` while a hosted control plane's provider has not set the endpoint.
pub fn waiting_condition(why: &str, cluster_name: &str) -> NewCondition {
    NewCondition::new(
        cond::LOAD_BALANCER_READY,
        ConditionStatus::False,
        reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
    )
    .message(format!(
        "the control plane is hosted ({why}): waiting for its provider to set \
         spec.controlPlaneEndpoint on this MaasCluster or on Cluster {cluster_name}"
    ))
}

#[cfg(test)]
#[path = "hosted_tests.rs"]
mod tests;
