//! Builders shared by the unit tests: one remediation with its whole world present, and the
//! knobs the tests turn.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::keys::{ANNOTATION_PAUSED, FINALIZER_MAAS_REMEDIATION};
use capmaas_api::remediation::{MaasRemediationSpec, RemediationPhase, RemediationStrategy};
use capmaas_api::{MaasHost, MaasMachine, MaasRemediation, MaasRemediationStatus};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::args::FenceMode;
use crate::keys::{REBOOT_STATE, reboot_key};
use crate::state::{NodeView, State};

pub(crate) const UID: &str = "0f8e4c1a-1b2c-4d5e-8f90-123456789abc";
/// Start of attempt 1 in the tests (seconds since the epoch).
pub(crate) const T0: i64 = 1_700_000_000;

pub(crate) fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

pub(crate) fn time(secs: i64) -> Time {
    Time(t(secs))
}

pub(crate) fn remediation() -> MaasRemediation {
    let mut r = MaasRemediation::new(
        "m1",
        MaasRemediationSpec {
            strategy: RemediationStrategy {
                retry_limit: 2,
                timeout_seconds: 600,
                ..RemediationStrategy::default()
            },
        },
    );
    r.metadata.namespace = Some("ns".into());
    r.metadata.uid = Some(UID.into());
    r.metadata.generation = Some(1);
    r.metadata.resource_version = Some("1".into());
    r.metadata.labels = Some([("cluster.x-k8s.io/cluster-name".into(), "c1".into())].into());
    r.metadata.finalizers = Some(vec![FINALIZER_MAAS_REMEDIATION.into()]);
    r
}

pub(crate) fn machine() -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m1", "namespace": "ns"},
        "spec": {
            "clusterName": "c1",
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": "mm1"}
        },
        "status": {"nodeRef": {"name": "n1"}}
    }))
    .unwrap()
}

pub(crate) fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns"}, "spec": {}
    }))
    .unwrap()
}

pub(crate) fn maas_machine() -> MaasMachine {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
        "metadata": {"name": "mm1", "namespace": "ns"},
        "spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"},
        "status": {"hostRef": {"name": "h1"}}
    }))
    .unwrap()
}

pub(crate) fn host(name: &str, power: &str) -> MaasHost {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"systemID": format!("sys-{name}")},
        "status": {"powerState": power, "provisioningState": "Deployed"}
    }))
    .unwrap()
}

/// A Node created at `created`, Ready since `ready_at` (NotReady when `None`).
pub(crate) fn node(created: i64, ready_at: Option<i64>) -> Node {
    let (status, since) = match ready_at {
        Some(at) => ("True", at),
        None => ("Unknown", created),
    };
    serde_json::from_value(json!({
        "metadata": {
            "name": "n1", "uid": "node-uid", "resourceVersion": "7",
            "creationTimestamp": time(created),
            "labels": {"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""},
            "annotations": {"team": "a"}
        },
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
        "status": {"conditions": [{
            "type": "Ready", "status": status, "lastTransitionTime": time(since)
        }]}
    }))
    .unwrap()
}

/// Everything present: a new remediation (no phase yet), its Node NotReady, the host on.
pub(crate) fn state() -> State {
    State {
        remediation: remediation(),
        machine: Some(machine()),
        owner_remediated: false,
        cluster: Some(cluster()),
        maas_machine: Some(maas_machine()),
        host: Some(host("h1", "on")),
        held: Vec::new(),
        hosts_synced: true,
        node: NodeView::Present(Box::new(node(T0 - 10_000, None))),
        fence: FenceMode::Taint,
        workload_error: None,
    }
}

impl State {
    /// Sets phase, attempt and the start of the attempt.
    pub(crate) fn at(mut self, phase: RemediationPhase, attempt: i32, since: i64) -> Self {
        let status = self
            .remediation
            .status
            .get_or_insert_with(MaasRemediationStatus::default);
        status.phase = Some(phase);
        status.retry_count = Some(attempt);
        status.last_remediated = Some(time(since));
        self
    }

    /// Records a backup of the current Node on the remediation.
    pub(crate) fn backed_up(mut self) -> Self {
        let backup = crate::node::Backup::of(self.node().unwrap())
            .to_annotations("n1")
            .unwrap();
        self.remediation
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(backup);
        self
    }

    pub(crate) fn host_mut(&mut self) -> &mut MaasHost {
        self.host.as_mut().unwrap()
    }

    /// Puts our reboot request on the host.
    pub(crate) fn requested(mut self) -> Self {
        annotate(self.host_mut(), &reboot_key(UID), "ns/m1");
        self
    }

    /// The gateway took the request and holds the server off.
    pub(crate) fn off(mut self) -> Self {
        let host = self.host_mut();
        annotate(host, REBOOT_STATE, capmaas_api::reboot::POWERED_OFF);
        host.status.as_mut().unwrap().power_state = Some(capmaas_api::host::PowerState::Off);
        self
    }

    /// The gateway powered the server on and forgot the reboot.
    pub(crate) fn on(mut self) -> Self {
        let host = self.host_mut();
        if let Some(a) = host.metadata.annotations.as_mut() {
            a.remove(REBOOT_STATE);
        }
        host.status.as_mut().unwrap().power_state = Some(capmaas_api::host::PowerState::On);
        self
    }

    /// Replaces the Node.
    pub(crate) fn with_node(mut self, node: Node) -> Self {
        self.node = NodeView::Present(Box::new(node));
        self
    }

    /// Pauses the remediation by its annotation.
    pub(crate) fn paused(mut self) -> Self {
        self.remediation
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_PAUSED.into(), String::new());
        self
    }

    /// Marks the remediation deleted.
    pub(crate) fn deleting(mut self) -> Self {
        self.remediation.metadata.deletion_timestamp = Some(time(T0 + 5));
        self
    }
}

/// `node` as fencing by remediation `UID` leaves it: the out-of-service taint and the fence
/// annotations, from the same patch the controller sends.
pub(crate) fn tainted(node: &Node) -> Node {
    let patch = crate::node::fence_patch(node, UID);
    let mut value = serde_json::to_value(node).unwrap();
    value["spec"]["taints"] = patch["spec"]["taints"].clone();
    value["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .extend(
            patch["metadata"]["annotations"]
                .as_object()
                .unwrap()
                .clone(),
        );
    serde_json::from_value(value).unwrap()
}

pub(crate) fn annotate(host: &mut MaasHost, key: &str, value: &str) {
    host.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}
