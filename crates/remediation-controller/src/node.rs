//! The workload Node, as pure functions: its backup, the fence, the restore, and whether it is
//! back. `act` and the step modules turn these into writes.

use std::collections::BTreeMap;

use capmaas_api::keys::{ANNOTATION_NODE_ANNOTATIONS_BACKUP, ANNOTATION_NODE_LABELS_BACKUP};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use crate::args::FenceMode;
use crate::keys::{
    ANNOTATION_FENCED_BY, ANNOTATION_NODE_NAME_BACKUP, TAINT_OUT_OF_SERVICE,
    TAINT_OUT_OF_SERVICE_EFFECT, TAINT_OUT_OF_SERVICE_VALUE,
};

/// The Node's labels and annotations as they were before remediation touched it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backup {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations (our fence marker excluded).
    pub annotations: BTreeMap<String, String>,
}

impl Backup {
    /// The backup of `node` now.
    pub fn of(node: &Node) -> Self {
        let mut annotations = node.annotations().clone();
        annotations.remove(ANNOTATION_FENCED_BY);
        Self {
            labels: node.labels().clone(),
            annotations,
        }
    }

    /// The MaasRemediation annotations that hold this backup of Node `node`.
    pub fn to_annotations(
        &self,
        node: &str,
    ) -> Result<BTreeMap<String, String>, serde_json::Error> {
        Ok(BTreeMap::from([
            (
                ANNOTATION_NODE_LABELS_BACKUP.to_owned(),
                serde_json::to_string(&self.labels)?,
            ),
            (
                ANNOTATION_NODE_ANNOTATIONS_BACKUP.to_owned(),
                serde_json::to_string(&self.annotations)?,
            ),
            (ANNOTATION_NODE_NAME_BACKUP.to_owned(), node.to_owned()),
        ]))
    }

    /// The backup recorded in a MaasRemediation's annotations; `None` when none was taken. A
    /// value that does not decode (edited by hand) counts as empty: a backup was taken, and a
    /// second one now would record the fenced Node.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Self> {
        let labels = annotations.get(ANNOTATION_NODE_LABELS_BACKUP)?;
        let decode = |text: Option<&String>| {
            text.and_then(|t| serde_json::from_str::<BTreeMap<String, String>>(t).ok())
                .unwrap_or_default()
        };
        Some(Self {
            labels: decode(Some(labels)),
            annotations: decode(annotations.get(ANNOTATION_NODE_ANNOTATIONS_BACKUP)),
        })
    }
}

/// Whether the Node carries the out-of-service taint (ours or an operator's).
pub fn has_out_of_service_taint(node: &Node) -> bool {
    taints(node).iter().any(is_out_of_service)
}

/// Whether the out-of-service taint on the Node is ours (the marker names `uid`).
pub fn fenced_by(node: &Node, uid: &str) -> bool {
    node.annotations()
        .get(ANNOTATION_FENCED_BY)
        .map(String::as_str)
        == Some(uid)
}

/// Whether the Node must still be fenced in the attempt that started at `since`.
pub fn needs_fence(node: &Node, mode: FenceMode, since: Timestamp) -> bool {
    match mode {
        FenceMode::Taint => !has_out_of_service_taint(node),
        // A Node registered after the attempt started is the kubelet's new one: deleting it
        // again would only lose what it just set.
        FenceMode::Delete => created(node).is_none_or(|c| c < since),
        FenceMode::None => false,
    }
}

/// Merge patch adding the out-of-service taint and our marker, guarded by the Node's
/// resourceVersion (the taint list is replaced whole).
pub fn fence_patch(node: &Node, uid: &str) -> Value {
    let mut list = taints(node).to_vec();
    list.push(Taint {
        key: TAINT_OUT_OF_SERVICE.to_owned(),
        value: Some(TAINT_OUT_OF_SERVICE_VALUE.to_owned()),
        effect: TAINT_OUT_OF_SERVICE_EFFECT.to_owned(),
        time_added: None,
    });
    json!({
        "metadata": {
            "resourceVersion": node.resource_version(),
            "annotations": {ANNOTATION_FENCED_BY: uid},
        },
        "spec": {"taints": list},
    })
}

/// Merge patch putting back what the backup holds and the Node lacks (what the kubelet set
/// since wins), and taking our fence away; `None` when there is nothing to do.
pub fn restore_patch(node: &Node, backup: Option<&Backup>, uid: &str) -> Option<Value> {
    let missing = |saved: &BTreeMap<String, String>, now: &BTreeMap<String, String>| {
        saved
            .iter()
            .filter(|(k, _)| !now.contains_key(*k) && k.as_str() != ANNOTATION_FENCED_BY)
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<String, Value>>()
    };
    let (labels, mut annotations) = backup.map_or_else(Default::default, |b| {
        (
            missing(&b.labels, node.labels()),
            missing(&b.annotations, node.annotations()),
        )
    });
    let ours = fenced_by(node, uid);
    let untaint = ours && has_out_of_service_taint(node);
    if ours {
        annotations.insert(ANNOTATION_FENCED_BY.to_owned(), Value::Null);
    }
    if labels.is_empty() && annotations.is_empty() {
        return None;
    }
    let mut patch = json!({
        "metadata": {
            "resourceVersion": node.resource_version(),
            "labels": labels,
            "annotations": annotations,
        }
    });
    if untaint {
        let kept: Vec<Taint> = taints(node)
            .iter()
            .filter(|t| !is_out_of_service(t))
            .cloned()
            .collect();
        patch["spec"] = json!({ "taints": kept });
    }
    Some(patch)
}

/// Whether the Node is back: `Ready=True` that turned true at or after `since`, or a Node the
/// kubelet registered at or after `since` that is Ready.
pub fn ready_since(node: &Node, since: Timestamp) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready.filter(|c| c.status == "True") else {
        return false;
    };
    let turned_ready = ready.last_transition_time.as_ref().map(|t| t.0);
    turned_ready.is_some_and(|t| t >= since) || created(node).is_some_and(|c| c >= since)
}

fn created(node: &Node) -> Option<Timestamp> {
    node.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

fn is_out_of_service(taint: &Taint) -> bool {
    taint.key == TAINT_OUT_OF_SERVICE && taint.effect == TAINT_OUT_OF_SERVICE_EFFECT
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
