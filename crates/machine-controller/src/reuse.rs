//! Node reuse: who a machine's host is kept for, and whether its template asks for it.
//!
//! The owner is the MachineDeployment (through the Machine's MachineSet) or the control plane
//! object. The intent is read once, at delete time, from the owner's *current* template
//! (MachineDeployment `spec.template.spec.infrastructureRef`, control plane
//! `spec.machineTemplate.spec.infrastructureRef`), falling back to the MachineSet's template
//! and then to the `cloned-from` annotations, which CAPI does not always set.

use capmaas_api::capi::{
    CAPI_GROUP, Machine, MachineDeployment, MachineSet, api_group, is_capi_owner,
};
use capmaas_api::host::{HostReservation, ReservationOwner};
use capmaas_api::machine::MaasMachineTemplate;
use capmaas_api::{MaasMachine, keys};
use capmaas_runtime::error::failed;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::warn;

use crate::error::Result;

/// `groupkind` value of the `cloned-from` annotation for our template kind.
pub const TEMPLATE_GROUP_KIND: &str = "MaasMachineTemplate.infrastructure.cluster.x-k8s.io";

/// The owner a host can be reserved for, and the template naming the intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReuseTarget {
    /// MachineDeployment, MachineSet (without a deployment) or control plane.
    pub owner: ReservationOwner,
    /// MaasMachineTemplate names to read `nodeReuse` from, in order of preference.
    pub templates: Vec<String>,
}

fn controller_owner(refs: &[OwnerReference]) -> Option<&OwnerReference> {
    refs.iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| refs.first())
}

fn owner_from_ref(r: &OwnerReference) -> ReservationOwner {
    ReservationOwner {
        api_version: Some(r.api_version.clone()),
        kind: r.kind.clone(),
        name: r.name.clone(),
        uid: r.uid.clone(),
    }
}

fn template_ref(kind: &str, name: &str) -> Option<String> {
    (kind == MaasMachineTemplate::kind(&()) && !name.is_empty()).then(|| name.to_owned())
}

/// Resolves the reuse owner of `machine` (and the templates to read), walking owner references.
pub async fn resolve(
    client: &Client,
    mm: &MaasMachine,
    machine: &Machine,
) -> Result<Option<ReuseTarget>> {
    let namespace = machine.namespace().unwrap_or_default();
    let Some(owner) = controller_owner(machine.owner_references()) else {
        return Ok(None);
    };
    let mut templates = Vec::new();
    let target_owner;
    if is_capi_owner(owner, "MachineSet") {
        let sets: Api<MachineSet> = Api::namespaced(client.clone(), &namespace);
        let Some(set) = sets
            .get_opt(&owner.name)
            .await
            .map_err(failed(format!("reading MachineSet {}", owner.name)))?
        else {
            return Ok(None);
        };
        let set_template = template_ref(
            &set.spec.template.spec.infrastructure_ref.kind,
            &set.spec.template.spec.infrastructure_ref.name,
        );
        match controller_owner(set.owner_references())
            .filter(|o| is_capi_owner(o, "MachineDeployment"))
        {
            Some(md_ref) => {
                let deployments: Api<MachineDeployment> =
                    Api::namespaced(client.clone(), &namespace);
                if let Some(md) = deployments
                    .get_opt(&md_ref.name)
                    .await
                    .map_err(failed(format!("reading MachineDeployment {}", md_ref.name)))?
                {
                    templates.extend(template_ref(
                        &md.spec.template.spec.infrastructure_ref.kind,
                        &md.spec.template.spec.infrastructure_ref.name,
                    ));
                }
                target_owner = owner_from_ref(md_ref);
            }
            None => target_owner = owner_from_ref(owner),
        }
        templates.extend(set_template);
    } else if api_group(&owner.api_version) == CAPI_GROUP {
        // A Machine owned directly by another CAPI core kind (e.g. a MachinePool) has no
        // template we can reuse for.
        return Ok(None);
    } else {
        // A control plane provider's object: read its machine template generically.
        target_owner = owner_from_ref(owner);
        templates.extend(control_plane_template(client, &namespace, owner).await?);
    }
    let annotations = mm.annotations();
    if annotations
        .get(keys::ANNOTATION_CLONED_FROM_GROUP_KIND)
        .map(String::as_str)
        == Some(TEMPLATE_GROUP_KIND)
        && let Some(name) = annotations.get(keys::ANNOTATION_CLONED_FROM_NAME)
    {
        templates.push(name.clone());
    }
    templates.dedup();
    Ok(Some(ReuseTarget {
        owner: target_owner,
        templates,
    }))
}

async fn control_plane_template(
    client: &Client,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Option<String>> {
    let (group, version) = owner
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", owner.api_version.as_str()));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &owner.kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let object = match api.get_opt(&owner.name).await {
        Ok(o) => o,
        // The kind may not be served under the guessed plural (404), or be a control plane
        // our RBAC does not name (403): the cloned-from annotations still name the template,
        // so neither may keep the machine from being released.
        Err(kube::Error::Api(s)) if s.code == 404 => None,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            warn!(
                kind = %owner.kind, name = %owner.name, api_version = %owner.api_version,
                "cannot read the control plane (403): node reuse falls back to the MaasMachine's cloned-from annotations; grant machine-controller get on this kind to read its current template"
            );
            None
        }
        Err(e) => {
            return Err(failed(format!("reading {} {}", owner.kind, owner.name))(e).into());
        }
    };
    let Some(object) = object else {
        return Ok(None);
    };
    let spec = object.data.get("spec");
    // v1beta2 nests the reference under spec.machineTemplate.spec, v1beta1 under spec.machineTemplate.
    let reference = spec
        .and_then(|s| s.pointer("/machineTemplate/spec/infrastructureRef"))
        .or_else(|| spec.and_then(|s| s.pointer("/machineTemplate/infrastructureRef")));
    Ok(reference.and_then(|r| {
        template_ref(
            r.get("kind").and_then(|k| k.as_str()).unwrap_or_default(),
            r.get("name").and_then(|n| n.as_str()).unwrap_or_default(),
        )
    }))
}

/// The reservation TTL when the first existing template of `target` has `nodeReuse` on.
pub async fn reuse_ttl(
    client: &Client,
    namespace: &str,
    target: &ReuseTarget,
) -> Result<Option<i64>> {
    let api: Api<MaasMachineTemplate> = Api::namespaced(client.clone(), namespace);
    for name in &target.templates {
        if let Some(template) = api
            .get_opt(name)
            .await
            .map_err(failed(format!("reading MaasMachineTemplate {name}")))?
        {
            return Ok(template
                .spec
                .node_reuse
                .then_some(i64::from(template.spec.node_reuse_ttl_seconds)));
        }
    }
    Ok(None)
}

/// A reservation for `owner` lasting `ttl_seconds` from `now`.
pub fn reservation(
    owner: ReservationOwner,
    now: jiff::Timestamp,
    ttl_seconds: i64,
) -> HostReservation {
    HostReservation {
        owner,
        expires_at: Time(now + jiff::SignedDuration::from_secs(ttl_seconds.max(0))),
    }
}

/// Value of the node-reuse label: `md-<name>` for deployments, `cp-<name>` for control
/// planes, or `None` when it would not be a valid label value (the reservation in spec is what
/// counts; the label only helps `kubectl get -l`).
pub fn reuse_label_value(owner: &ReservationOwner) -> Option<String> {
    let prefix = if owner.kind == "MachineDeployment" || owner.kind == "MachineSet" {
        "md"
    } else {
        "cp"
    };
    let value = format!("{prefix}-{}", owner.name);
    let valid = value.len() <= 63
        && value.ends_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    valid.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(kind: &str, name: &str) -> ReservationOwner {
        ReservationOwner {
            api_version: None,
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
        }
    }

    #[test]
    fn label_values() {
        assert_eq!(
            reuse_label_value(&owner("MachineDeployment", "workers")).as_deref(),
            Some("md-workers")
        );
        assert_eq!(
            reuse_label_value(&owner("KubeadmControlPlane", "cp")).as_deref(),
            Some("cp-cp")
        );
        assert_eq!(
            reuse_label_value(&owner("MachineDeployment", &"x".repeat(61))),
            None
        );
    }

    #[test]
    fn reservation_expiry() {
        let now = jiff::Timestamp::from_second(1_000).unwrap();
        let r = reservation(owner("MachineDeployment", "w"), now, 3600);
        assert_eq!(r.expires_at.0.as_second(), 4600);
        assert_eq!(reservation(owner("X", "y"), now, -5).expires_at.0, now);
    }

    #[test]
    fn controller_owner_preferred() {
        let refs = vec![
            OwnerReference {
                name: "a".into(),
                ..OwnerReference::default()
            },
            OwnerReference {
                name: "b".into(),
                controller: Some(true),
                ..OwnerReference::default()
            },
        ];
        assert_eq!(controller_owner(&refs).unwrap().name, "b");
        assert_eq!(controller_owner(&refs[..1]).unwrap().name, "a");
        assert!(controller_owner(&[]).is_none());
        assert_eq!(
            template_ref("MaasMachineTemplate", "t").as_deref(),
            Some("t")
        );
        assert_eq!(template_ref("Other", "t"), None);
    }
}
