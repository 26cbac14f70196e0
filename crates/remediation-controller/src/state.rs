//! What one reconcile knows about a MaasRemediation's world, and how it is read. Below `act`
//! and the step modules: it imports neither. A workload cluster that does not answer is
//! recorded, not returned: deleting a remediation must still stop holding its server off.

use capmaas_runtime::error::{Failed, failed};
use std::time::Duration;

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::remediation::RemediationPhase;
use capmaas_api::{MaasHost, MaasMachine, MaasRemediation, keys};
use capmaas_runtime::controller::workload::WorkloadError;
use k8s_openapi::api::core::v1::Node;
use kube::api::ApiResource;
use kube::core::DynamicObject;
use kube::{Api, ResourceExt};

use crate::args::FenceMode;
use crate::context::Ctx;
use crate::error::{Error, Result, is_not_found};
use crate::keys::{ANNOTATION_NODE_NAME_BACKUP, CONDITION_OWNER_REMEDIATED, reboot_key};

/// The reason of the `Ready=True` condition of a remediation that brought its Node back.
pub const REASON_REMEDIATED: &str = "Remediated";

/// What is known of the workload Node.
#[derive(Debug, Clone)]
pub enum NodeView {
    /// No Node is known (the Machine has no `nodeRef`, no backup names one), or it was not
    /// read because the remediation is settled.
    Unknown,
    /// The workload cluster answered: no Node of this name.
    Absent(String),
    /// The Node.
    Present(Box<Node>),
    /// The workload cluster could not be asked; `gone` when its kubeconfig Secret no longer
    /// exists (the cluster is being deleted).
    Unreachable {
        /// The kubeconfig Secret is missing.
        gone: bool,
    },
}

/// What one reconcile knows; updated from the API's answers after each write.
#[derive(Debug)]
pub struct State {
    /// The MaasRemediation.
    pub remediation: MaasRemediation,
    /// The Machine of the same name.
    pub machine: Option<Machine>,
    /// The Machine's v1beta2 `OwnerRemediated` condition is already `False`.
    pub owner_remediated: bool,
    /// The Machine's Cluster.
    pub cluster: Option<Cluster>,
    /// The Machine's MaasMachine.
    pub maas_machine: Option<MaasMachine>,
    /// The MaasMachine's host.
    pub host: Option<MaasHost>,
    /// Other hosts that still carry our reboot request (the MaasMachine moved on or is gone).
    pub held: Vec<MaasHost>,
    /// The MaasHost cache [`State::held`] comes from has had its first full list.
    pub hosts_synced: bool,
    /// The workload Node.
    pub node: NodeView,
    /// `--fence`.
    pub fence: FenceMode,
    /// Why the workload cluster could not be asked (returned when a step needs the Node).
    pub workload_error: Option<Error>,
}

impl State {
    /// The UID of the remediation (always set on objects read from the API server).
    pub fn uid(&self) -> &str {
        self.remediation.metadata.uid.as_deref().unwrap_or_default()
    }

    /// Our reboot request key.
    pub fn reboot_key(&self) -> String {
        reboot_key(self.uid())
    }

    /// Whether `host` carries our reboot request.
    pub fn holds(&self, host: &MaasHost) -> bool {
        host.annotations().contains_key(&self.reboot_key())
    }

    /// The Node, when it was read and exists.
    pub fn node(&self) -> Option<&Node> {
        match &self.node {
            NodeView::Present(node) => Some(node),
            _ => None,
        }
    }

    /// Name of the workload cluster: the Machine's, else CAPI's label on the remediation.
    pub fn cluster_name(&self) -> Option<String> {
        cluster_name(&self.remediation, self.machine.as_ref())
    }
}

/// The recorded phase.
pub fn phase(r: &MaasRemediation) -> Option<RemediationPhase> {
    r.status.as_ref().and_then(|s| s.phase)
}

/// Whether the remediation brought its Node back (`Ready=True`, reason `Remediated`).
pub fn remediated(r: &MaasRemediation) -> bool {
    r.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| capmaas_runtime::get_condition(c, capmaas_api::conditions::READY))
        .is_some_and(|c| c.status == "True" && c.reason == REASON_REMEDIATED)
}

/// Whether nothing is left to do but wait for CAPI (remediated, or handed back).
pub fn settled(r: &MaasRemediation) -> bool {
    remediated(r) || phase(r) == Some(RemediationPhase::DeletingMachine)
}

/// The namespace of `r` (always set on objects read from the API server).
pub fn namespace(r: &MaasRemediation) -> Result<String> {
    r.namespace()
        .ok_or_else(|| Failed::missing("namespace").into())
}

/// The MaasRemediation API of `r`'s namespace.
pub fn api(ctx: &Ctx, r: &MaasRemediation) -> Result<Api<MaasRemediation>> {
    Ok(Api::namespaced(ctx.base.client.clone(), &namespace(r)?))
}

fn cluster_name(r: &MaasRemediation, machine: Option<&Machine>) -> Option<String> {
    machine
        .map(|m| m.spec.cluster_name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| r.labels().get(keys::LABEL_CLUSTER_NAME).cloned())
}

impl State {
    /// [`State::observe`] from a fresh read of the remediation; `None` when it is gone.
    pub async fn observe_fresh(ctx: &Ctx, r: &MaasRemediation) -> Result<Option<Self>> {
        let fresh = api(ctx, r)?
            .get_opt(&r.name_any())
            .await
            .map_err(failed("reading the MaasRemediation"))?;
        match fresh {
            Some(fresh) => Ok(Some(Self::observe(ctx, fresh).await?)),
            None => Ok(None),
        }
    }

    /// Reads the Machine, its Cluster, MaasMachine, host, the hosts still carrying our
    /// request, and the workload Node.
    pub async fn observe(ctx: &Ctx, remediation: MaasRemediation) -> Result<Self> {
        let ns = namespace(&remediation)?;
        if remediation.metadata.uid.is_none() {
            return Err(Failed::missing("uid").into());
        }
        let (machine, owner_remediated) = read_machine(ctx, &ns, &remediation.name_any()).await?;
        // A Machine re-created under the remediation's name is not the one it was made for.
        let machine = machine.filter(|m| remediation_is_for(&remediation, m));
        let cluster = match cluster_name(&remediation, machine.as_ref()) {
            Some(name) => Api::<Cluster>::namespaced(ctx.base.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(failed(format!("reading Cluster {name}")))?,
            None => None,
        };
        let mm_name = machine
            .as_ref()
            .map(|m| m.spec.infrastructure_ref.name.clone())
            .filter(|n| !n.is_empty());
        let maas_machine = match mm_name {
            Some(name) => Api::<MaasMachine>::namespaced(ctx.base.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(failed(format!("reading MaasMachine {name}")))?,
            None => None,
        };
        let host_ref = maas_machine
            .as_ref()
            .and_then(|m| m.status.as_ref())
            .and_then(|s| s.host_ref.as_ref())
            .filter(|r| !r.name.is_empty());
        let host_name = host_ref.map(|r| r.name.clone());
        // The host may sit in another namespace (an inventory open to the machine's).
        let host_ns = host_ref.map_or(ns.as_str(), |r| r.namespace_or(&ns));
        let hosts: Api<MaasHost> = Api::namespaced(ctx.base.client.clone(), host_ns);
        let host = match &host_name {
            Some(name) => hosts
                .get_opt(name)
                .await
                .map_err(failed(format!("reading MaasHost {name}")))?,
            None => None,
        };
        // `status.hostRef` is only the machine's claim intent: a host claimed by anyone else
        // (the intent was lost, or the host changed hands) is never power-cycled for it.
        let host = host.filter(|h| maas_machine.as_ref().is_some_and(|mm| claimed_by(h, mm)));
        let mut state = Self {
            remediation,
            machine,
            owner_remediated,
            cluster,
            maas_machine,
            host,
            held: Vec::new(),
            hosts_synced: hosts_synced(ctx).await,
            node: NodeView::Unknown,
            fence: ctx.fence,
            workload_error: None,
        };
        let current = state
            .host
            .as_ref()
            .map(|h| (h.namespace().unwrap_or_default(), h.name_any()));
        state.held = held_elsewhere(ctx, &state, current.as_ref()).await?;
        if !settled(&state.remediation) {
            state.read_node(ctx, &ns).await;
        }
        Ok(state)
    }

    async fn read_node(&mut self, ctx: &Ctx, ns: &str) {
        let recorded = self
            .remediation
            .annotations()
            .get(ANNOTATION_NODE_NAME_BACKUP)
            .cloned();
        let name = self
            .machine
            .as_ref()
            .and_then(|m| m.status.as_ref())
            .and_then(|s| s.node_ref.as_ref())
            .map(|n| n.name.clone())
            .filter(|n| !n.is_empty())
            .or(recorded);
        let (Some(name), Some(cluster)) = (name, self.cluster_name()) else {
            return;
        };
        let client = match ctx.workload.client(ns, &cluster).await {
            Ok(client) => client,
            Err(e) => {
                self.node = NodeView::Unreachable {
                    gone: matches!(e, WorkloadError::Missing { .. }),
                };
                self.workload_error = Some(e.into());
                return;
            }
        };
        let label = format!("{ns}/{cluster}");
        match Api::<Node>::all(client).get_opt(&name).await {
            Ok(Some(node)) => self.node = NodeView::Present(Box::new(node)),
            Ok(None) => self.node = NodeView::Absent(name),
            Err(e) if is_not_found(&e) => self.node = NodeView::Absent(name),
            Err(e) => {
                self.node = NodeView::Unreachable { gone: false };
                self.workload_error =
                    Some(Error::workload(&label, format!("reading Node {name}"))(e));
            }
        }
    }
}

/// The Machine of the same name, read untyped for its v1beta2 conditions (the shared mirror
/// type models only what the infrastructure controllers need), and whether its
/// `OwnerRemediated` condition is already `False`.
async fn read_machine(ctx: &Ctx, ns: &str, name: &str) -> Result<(Option<Machine>, bool)> {
    let resource = ApiResource::erase::<Machine>(&());
    let raw = Api::<DynamicObject>::namespaced_with(ctx.base.client.clone(), ns, &resource)
        .get_opt(name)
        .await
        .map_err(failed(format!("reading Machine {name}")))?;
    let Some(raw) = raw else {
        return Ok((None, false));
    };
    let owner_remediated = raw.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == CONDITION_OWNER_REMEDIATED && c["status"] == "False");
    let machine = serde_json::to_value(raw)
        .and_then(serde_json::from_value::<Machine>)
        .map_err(failed("decoding the Machine"))?;
    Ok((Some(machine), owner_remediated))
}

/// Whether the MaasHost cache is filled, without waiting: the controller's own trigger stream
/// fills it, and a reconcile waiting for it would hold that stream up.
async fn hosts_synced(ctx: &Ctx) -> bool {
    tokio::time::timeout(Duration::ZERO, ctx.hosts.wait_until_ready())
        .await
        .is_ok_and(|ready| ready.is_ok())
}

/// Hosts other than `current` (`(namespace, name)`: the machine's host, when it is ours) that
/// the cache shows with our reboot request, in any namespace (the key names our UID),
/// confirmed by a fresh read.
async fn held_elsewhere(
    ctx: &Ctx,
    state: &State,
    current: Option<&(String, String)>,
) -> Result<Vec<MaasHost>> {
    let mut out = Vec::new();
    let candidates = ctx.hosts.state().into_iter().filter(|h| {
        let key = (h.namespace().unwrap_or_default(), h.name_any());
        Some(&key) != current && state.holds(h)
    });
    for cached in candidates {
        let (ns, name) = (cached.namespace().unwrap_or_default(), cached.name_any());
        let fresh = Api::<MaasHost>::namespaced(ctx.base.client.clone(), &ns)
            .get_opt(&name)
            .await
            .map_err(failed(format!("reading MaasHost {ns}/{name}")))?;
        out.extend(fresh.filter(|h| state.holds(h)));
    }
    Ok(out)
}

/// Whether `host` is claimed by `mm` (the contract machine-controller claims by).
pub use capmaas_api::host_request::claimed_by;

/// Whether `remediation` was made for `machine`: CAPI's MachineHealthCheck gives it the
/// Machine's name and an owner reference to it; a remediation owned by another Machine UID is
/// for an earlier incarnation of that name. One without a Machine owner (made by hand) is taken
/// by name.
pub fn remediation_is_for(remediation: &MaasRemediation, machine: &Machine) -> bool {
    let owners: Vec<_> = remediation
        .owner_references()
        .iter()
        .filter(|o| o.kind == "Machine" && o.api_version.starts_with("cluster.x-k8s.io/"))
        .collect();
    owners.is_empty()
        || owners
            .iter()
            .any(|o| Some(o.uid.as_str()) == machine.metadata.uid.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{host, maas_machine, machine, remediation};
    use capmaas_api::common::ConsumerReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn consumer(uid: &str, namespace: Option<&str>) -> ConsumerReference {
        ConsumerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
            kind: "MaasMachine".into(),
            name: "mm1".into(),
            uid: uid.into(),
            namespace: namespace.map(Into::into),
        }
    }

    #[test]
    fn only_a_host_claimed_by_this_maas_machine_is_its_host() {
        let mut mm = maas_machine();
        mm.metadata.uid = Some("mm-uid".into());
        let mut h = host("h1", "on");
        assert!(!claimed_by(&h, &mm), "an unclaimed host (an intent only)");
        h.spec.consumer_ref = Some(consumer("other-uid", None));
        assert!(!claimed_by(&h, &mm), "another machine's");
        h.spec.consumer_ref = Some(consumer("mm-uid", None));
        assert!(claimed_by(&h, &mm));
        h.metadata.namespace = Some("capmaas-system".into());
        assert!(
            !claimed_by(&h, &mm),
            "same UID written for another namespace cannot be this machine"
        );
        h.spec.consumer_ref = Some(consumer("mm-uid", Some("ns")));
        assert!(claimed_by(&h, &mm), "claimed across namespaces");
        let mut other_kind = consumer("mm-uid", Some("ns"));
        other_kind.kind = "Other".into();
        h.spec.consumer_ref = Some(other_kind);
        assert!(!claimed_by(&h, &mm));
    }

    #[test]
    fn a_remediation_owned_by_another_machine_incarnation_is_not_for_this_one() {
        let mut m = machine();
        m.metadata.uid = Some("machine-2".into());
        let mut r = remediation();
        assert!(remediation_is_for(&r, &m), "made by hand: by name");
        let owner = |uid: &str| OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Machine".into(),
            name: "m1".into(),
            uid: uid.into(),
            ..OwnerReference::default()
        };
        r.metadata.owner_references = Some(vec![owner("machine-1")]);
        assert!(!remediation_is_for(&r, &m));
        r.metadata.owner_references = Some(vec![owner("machine-2")]);
        assert!(remediation_is_for(&r, &m));
    }
}
