//! MaasMachine and MaasMachineTemplate.
//!
//! `image`, `minCPU`, `minMemory` and `providerID` are immutable by CEL (as CAPMAAS's webhook
//! made them); a template's `spec.template` is immutable as the CAPI contract asks, judged in
//! `template.rs` (ClusterClass's dry runs may change it).
//! What CEL cannot see is the machine's status: once a host is claimed, the fields that chose it
//! must not change either, or the machine would run on a host its spec no longer describes.

use capmaas_api::common::EraseMode;
use capmaas_api::{MaasMachine, MaasMachineSpec, MaasMachineTemplate};

use super::selector::{host_selector, unique};
use super::{Operation, Request};
use crate::field::{FieldPath, Verdict};

/// MaasMachine: spec syntax; once a host is claimed, the host-choosing fields are frozen.
pub(crate) fn maas_machine(req: &Request<'_, MaasMachine>) -> Verdict {
    let mut v = Verdict::ok();
    let Some(machine) = req.object else {
        return v;
    };
    let spec = FieldPath::root("spec");
    machine_spec(&machine.spec, &spec, &mut v);
    if let (Operation::Update, Some(old)) = (req.operation, req.old)
        && let Some(host) = claimed_host(old)
    {
        frozen_after_claim(&old.spec, &machine.spec, &spec, &host, &mut v);
    }
    v
}

/// What an explicit or implied `erase: None` means, said where a person writes the policy.
const NO_ERASE_ASKED: &str = "no disk erase is asked for at release: MAAS erases only if its \
    'Erase nodes' disks prior to releasing' setting is on, otherwise the next user of the server \
    can read what this machine wrote";

/// MaasMachineTemplate: the machine spec it stamps out. A template without a release policy is
/// where a person decides for every machine, so the default is said there (not on each machine
/// CAPI stamps out).
pub(crate) fn maas_machine_template(req: &Request<'_, MaasMachineTemplate>) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(template) = req.object {
        let spec = FieldPath::root("spec").child("template").child("spec");
        machine_spec(&template.spec.template.spec, &spec, &mut v);
        if template.spec.template.spec.release_policy.is_none() {
            v.warn(&spec.child("releasePolicy"), NO_ERASE_ASKED);
        }
    }
    v
}

/// The host a machine has claimed: `status.hostRef`, else the system id the controller wrote.
fn claimed_host(machine: &MaasMachine) -> Option<String> {
    let from_status = machine
        .status
        .as_ref()
        .and_then(|s| s.host_ref.as_ref())
        .map(|r| format!("MaasHost {}", r.name));
    let from_spec = machine
        .spec
        .system_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .map(|id| format!("MAAS machine {id}"));
    from_status.or(from_spec)
}

fn machine_spec(spec: &MaasMachineSpec, path: &FieldPath, v: &mut Verdict) {
    if let Some(kernel) = &spec.hwe_kernel
        && !is_kernel_name(kernel)
    {
        v.invalid(
            &path.child("hweKernel"),
            kernel,
            "a MAAS kernel name is lower-case letters, digits, '.' and '-', starting with a \
             letter or digit, e.g. hwe-22.04, ga-22.04 or hwe-22.04-lowlatency",
        );
    }
    if let Some(selector) = &spec.host_selector {
        host_selector(selector, &path.child("hostSelector"), v);
    }
    if let Some(tags) = &spec.tags {
        unique(tags, &path.child("tags"), v);
    }
    if let Some(policy) = &spec.release_policy {
        if policy.erase == EraseMode::None {
            v.warn(&path.child("releasePolicy").child("erase"), NO_ERASE_ASKED);
        }
        if policy.force {
            v.warn(
                &path.child("releasePolicy").child("force"),
                "the server is released even while MAAS reports it busy",
            );
        }
    }
}

/// MAAS's kernel names (`hwe-22.04`, `ga-22.04`, `hwe-22.04-lowlatency`, `hwe-22.04-edge`).
fn is_kernel_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
}

/// The fields that decided which host was claimed, and what deploys on it.
fn frozen_after_claim(
    old: &MaasMachineSpec,
    new: &MaasMachineSpec,
    path: &FieldPath,
    host: &str,
    v: &mut Verdict,
) {
    let detail =
        || format!("immutable once a host is claimed ({host}); create a new machine instead");
    let mut check = |changed: bool, field: &str| {
        if changed {
            v.forbidden(&path.child(field), detail());
        }
    };
    check(old.host_selector != new.host_selector, "hostSelector");
    check(old.tags != new.tags, "tags");
    check(old.resource_pool != new.resource_pool, "resourcePool");
    check(old.failure_domain != new.failure_domain, "failureDomain");
    check(old.min_disk_size != new.min_disk_size, "minDiskSize");
    check(
        old.deploy_in_memory != new.deploy_in_memory,
        "deployInMemory",
    );
    check(old.data_template != new.data_template, "dataTemplate");
    check(old.hwe_kernel != new.hwe_kernel, "hweKernel");
    // Whether the host is a composed VM (and where, and how big) is chosen with it.
    check(old.lxd != new.lxd, "lxd");
    check(old.parent != new.parent, "parent");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use capmaas_api::common::{LocalObjectReference, ReleasePolicy};
    use capmaas_api::machine::MaasMachineStatus;

    fn machine() -> MaasMachine {
        let spec: MaasMachineSpec = serde_json::from_value(serde_json::json!({
            "minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy", "tags": ["gpu"]
        }))
        .unwrap();
        MaasMachine::new("m", spec)
    }

    fn create(new: &MaasMachine) -> Request<'_, MaasMachine> {
        Request {
            operation: Operation::Create,
            namespace: "ns",
            name: "m",
            object: Some(new),
            old: None,
        }
    }

    fn update<'a>(old: &'a MaasMachine, new: &'a MaasMachine) -> Request<'a, MaasMachine> {
        Request {
            operation: Operation::Update,
            namespace: "ns",
            name: "m",
            object: Some(new),
            old: Some(old),
        }
    }

    #[test]
    fn host_choosing_fields_are_frozen_once_a_host_is_claimed() {
        let mut old = machine();
        let mut new = old.clone();
        new.spec.tags = Some(vec!["ssd".into()]);
        new.spec.data_template = Some(LocalObjectReference { name: "t".into() });
        new.spec.hwe_kernel = Some("hwe-22.04".into());
        new.spec.lxd = Some(serde_json::from_value(serde_json::json!({"enabled": true})).unwrap());
        new.spec.parent = Some("abc123".into());
        // Before a claim, anything the CEL rules allow may change.
        assert!(maas_machine(&update(&old, &new)).allowed());

        old.status = Some(MaasMachineStatus {
            host_ref: Some(capmaas_api::common::HostReference {
                name: "host-7".into(),
                namespace: None,
            }),
            ..MaasMachineStatus::default()
        });
        let v = maas_machine(&update(&old, &new));
        let errors: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.tags: Forbidden: immutable once a host is claimed (MaasHost host-7); create a new machine instead",
                "spec.dataTemplate: Forbidden: immutable once a host is claimed (MaasHost host-7); create a new machine instead",
                "spec.hweKernel: Forbidden: immutable once a host is claimed (MaasHost host-7); create a new machine instead",
                "spec.lxd: Forbidden: immutable once a host is claimed (MaasHost host-7); create a new machine instead",
                "spec.parent: Forbidden: immutable once a host is claimed (MaasHost host-7); create a new machine instead",
            ]
        );
    }

    #[test]
    fn a_kernel_name_that_maas_cannot_know_is_refused_by_field() {
        let mut m = machine();
        for good in ["hwe-22.04", "ga-22.04", "hwe-22.04-lowlatency", "5.15"] {
            m.spec.hwe_kernel = Some(good.into());
            assert!(maas_machine(&create(&m)).allowed(), "{good}");
        }
        m.spec.hwe_kernel = Some("HWE 22.04".into());
        let v = maas_machine(&create(&m));
        let errors: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .starts_with("spec.hweKernel: Invalid value: \"HWE 22.04\": a MAAS kernel name"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_system_id_counts_as_a_claim_and_the_controllers_own_writes_pass() {
        let mut old = machine();
        old.spec.system_id = Some("abc123".into());
        let mut new = old.clone();
        new.spec.provider_id = Some("maas:///z1/abc123".into());
        assert!(maas_machine(&update(&old, &new)).allowed());
        new.spec.resource_pool = Some("other".into());
        let v = maas_machine(&update(&old, &new));
        assert_eq!(v.errors[0].path.as_str(), "spec.resourcePool");
        assert!(v.errors[0].detail.contains("MAAS machine abc123"));
    }

    #[test]
    fn duplicate_tags_are_rejected_and_no_erase_is_a_warning() {
        let mut m = machine();
        m.spec.tags = Some(vec!["gpu".into(), "gpu".into()]);
        m.spec.release_policy = Some(ReleasePolicy {
            erase: EraseMode::None,
            force: false,
        });
        let req = Request::create("ns", "m", &m);
        let v = maas_machine(&req);
        assert_eq!(v.errors[0].path.as_str(), "spec.tags[1]");
        assert_eq!(v.warnings.len(), 1);
        assert!(v.warnings[0].starts_with("spec.releasePolicy.erase: "));
    }

    #[test]
    fn a_template_without_a_release_policy_says_what_maas_will_do() {
        let spec = machine().spec;
        let template: MaasMachineTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasMachineTemplate",
            "metadata": {"name": "t"},
            "spec": {"template": {"spec": spec}}
        }))
        .unwrap();
        let req = Request::create("ns", "t", &template);
        let v = maas_machine_template(&req);
        assert!(v.allowed());
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        assert!(
            v.warnings[0].starts_with("spec.template.spec.releasePolicy: no disk erase"),
            "{}",
            v.warnings[0]
        );
        let mut erased = template.clone();
        erased.spec.template.spec.release_policy = Some(ReleasePolicy {
            erase: EraseMode::Quick,
            force: false,
        });
        let req = Request {
            object: Some(&erased),
            ..req
        };
        assert!(maas_machine_template(&req).warnings.is_empty());
    }
}
