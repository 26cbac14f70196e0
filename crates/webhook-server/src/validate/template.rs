//! A template's `spec.template` is immutable (the Cluster API contract: change a template by
//! creating a new one), with the one exception the contract makes: ClusterClass's topology
//! controller finds out whether a template would change by a server-side-apply *dry run* of
//! the changed spec over the stored template, marked with [`TOPOLOGY_DRY_RUN_ANNOTATION`], and
//! rotates to a new template when it would. Refusing that dry run would stop every ClusterClass
//! change (a new image, a new variable value) with an error, so this rule lives here and not in
//! CEL, which cannot see the request's dry-run flag.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::field::{FieldPath, Verdict};

/// The annotation Cluster API's topology controller puts on the objects of its dry runs.
pub(crate) const TOPOLOGY_DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";

/// Whether an update of a template may change `spec.template`: only in a dry run of the
/// topology controller.
pub(crate) fn template_frozen(
    dry_run: bool,
    annotations: Option<&BTreeMap<String, String>>,
    old_spec: &Value,
    new_spec: &Value,
) -> Verdict {
    let mut v = Verdict::ok();
    let topology_dry_run =
        dry_run && annotations.is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN_ANNOTATION));
    if !topology_dry_run && old_spec.get("template") != new_spec.get("template") {
        v.forbidden(
            &FieldPath::root("spec").child("template"),
            "spec.template is immutable: create a new template and point its users at it",
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn annotated() -> BTreeMap<String, String> {
        BTreeMap::from([(TOPOLOGY_DRY_RUN_ANNOTATION.to_owned(), String::new())])
    }

    #[test]
    fn a_changed_template_is_refused_with_the_field_named() {
        let old = json!({"template": {"spec": {"image": "a"}}, "nodeReuse": false});
        let new = json!({"template": {"spec": {"image": "b"}}, "nodeReuse": false});
        let verdict = template_frozen(false, None, &old, &new);
        assert!(!verdict.allowed());
        assert_eq!(
            verdict.errors[0].to_string(),
            "spec.template: Forbidden: spec.template is immutable: create a new template and point its users at it"
        );
    }

    #[test]
    fn fields_beside_the_template_may_change() {
        let old = json!({"template": {"spec": {"image": "a"}}, "nodeReuse": false});
        let new = json!({"template": {"spec": {"image": "a"}}, "nodeReuse": true});
        assert!(template_frozen(false, None, &old, &new).allowed());
    }

    #[test]
    fn only_the_topology_controllers_dry_run_may_change_it() {
        let old = json!({"template": {"spec": {"image": "a"}}});
        let new = json!({"template": {"spec": {"image": "b"}}});
        assert!(template_frozen(true, Some(&annotated()), &old, &new).allowed());
        // A dry run without the annotation (kubectl --dry-run=server) is judged as the real
        // update would be, and so is the annotation outside a dry run.
        assert!(!template_frozen(true, None, &old, &new).allowed());
        assert!(!template_frozen(false, Some(&annotated()), &old, &new).allowed());
    }
}
