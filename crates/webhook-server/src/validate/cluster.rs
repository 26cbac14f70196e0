//! MaasCluster, MaasClusterTemplate and MaasDNSRecord: names that must resolve.
//!
//! An absent `spec.controlPlaneEndpoint` is never refused nor defaulted here: cluster-controller
//! settles it, or, with a hosted control plane (Kamaji, k0smotron), the control-plane provider
//! sets it once after creation (the CRD's CEL rule allows that first write and refuses any
//! later change).

use std::collections::BTreeMap;

use capmaas_api::cluster::{ANNOTATION_HOSTED_CONTROL_PLANE, MaasClusterSpec};
use capmaas_api::{MaasCluster, MaasClusterTemplate, MaasDNSRecord};
use kube::ResourceExt;

use super::selector::unique;
use super::{Lookups, Request};
use crate::field::{FieldPath, Verdict};
use capmaas_api::names::host_problem;

/// TTLs below this make MAAS's DNS (bind) reload and resolvers ask again almost constantly.
const LOW_TTL_SECONDS: i32 = 30;

/// MaasCluster: the DNS domain and endpoint host must be names a resolver accepts, and the
/// domain one the installation publishes in.
pub(crate) fn maas_cluster(req: &Request<'_, MaasCluster>, lookups: &dyn Lookups) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(cluster) = req.object {
        hosted_annotation(
            cluster.annotations(),
            &FieldPath::root("metadata").child("annotations"),
            &mut v,
        );
        let path = FieldPath::root("spec");
        cluster_spec(&cluster.spec, &path, &mut v);
        allowed_domain(
            &cluster.spec.dns_domain,
            &path.child("dnsDomain"),
            lookups,
            &mut v,
        );
    }
    v
}

/// MaasClusterTemplate: the cluster spec it stamps out.
pub(crate) fn maas_cluster_template(
    req: &Request<'_, MaasClusterTemplate>,
    lookups: &dyn Lookups,
) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(template) = req.object {
        let resource = FieldPath::root("spec").child("template");
        if let Some(annotations) = template
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
        {
            let path = resource.child("metadata").child("annotations");
            hosted_annotation(annotations, &path, &mut v);
        }
        let path = resource.child("spec");
        let spec = &template.spec.template.spec;
        cluster_spec(spec, &path, &mut v);
        allowed_domain(&spec.dns_domain, &path.child("dnsDomain"), lookups, &mut v);
    }
    v
}

/// MaasDNSRecord (written by cluster-controller): a resolvable name in an allowed domain, no
/// address twice.
pub(crate) fn maas_dns_record(req: &Request<'_, MaasDNSRecord>, lookups: &dyn Lookups) -> Verdict {
    let mut v = Verdict::ok();
    let Some(record) = req.object else {
        return v;
    };
    let spec = FieldPath::root("spec");
    if let Some(problem) = host_problem(&record.spec.fqdn()) {
        v.invalid(&spec.child("name"), record.spec.fqdn(), problem);
    }
    allowed_domain(&record.spec.domain, &spec.child("domain"), lookups, &mut v);
    if let Some(addresses) = &record.spec.addresses {
        unique(addresses, &spec.child("addresses"), &mut v);
    }
    if let Some(ttl) = record.spec.ttl.filter(|t| *t < LOW_TTL_SECONDS) {
        v.warn(&spec.child("ttl"), low_ttl(ttl));
    }
    v
}

fn cluster_spec(spec: &MaasClusterSpec, path: &FieldPath, v: &mut Verdict) {
    if let Some(problem) = host_problem(&spec.dns_domain) {
        v.invalid(&path.child("dnsDomain"), &spec.dns_domain, problem);
    }
    if let Some(endpoint) = &spec.control_plane_endpoint
        && !endpoint.host.is_empty()
        && let Some(problem) = host_problem(&endpoint.host)
    {
        v.invalid(
            &path.child("controlPlaneEndpoint").child("host"),
            &endpoint.host,
            problem,
        );
    }
    if let Some(domains) = &spec.failure_domains {
        unique(domains, &path.child("failureDomains"), v);
    }
    if let Some(ttl) = spec.dns_record.as_ref().and_then(|r| r.ttl)
        && ttl < LOW_TTL_SECONDS
    {
        v.warn(&path.child("dnsRecord").child("ttl"), low_ttl(ttl));
    }
}

/// `maas.cluster.x-k8s.io/hosted-control-plane` is `"true"` or `"false"`; cluster-controller
/// would otherwise stop at the MaasCluster with a spec error.
fn hosted_annotation(annotations: &BTreeMap<String, String>, path: &FieldPath, v: &mut Verdict) {
    let Some(value) = annotations.get(ANNOTATION_HOSTED_CONTROL_PLANE) else {
        return;
    };
    if value != "true" && value != "false" {
        v.not_supported(
            &path.key(ANNOTATION_HOSTED_CONTROL_PLANE),
            value,
            "supported values: \"true\" (the control plane is hosted: its provider sets \
             spec.controlPlaneEndpoint), \"false\"",
        );
    }
}

/// A domain outside the installation's `--dns-domains`: whoever may create the object would
/// otherwise have the MAAS key publish a name in any domain it writes.
fn allowed_domain(domain: &str, path: &FieldPath, lookups: &dyn Lookups, v: &mut Verdict) {
    let allowed = lookups.dns_domains();
    if !allowed.allows(domain) {
        v.invalid(
            path,
            domain,
            format!(
                "not a MAAS DNS domain this installation publishes in ({}); ask the platform \
                 team to add it to --dns-domains (clusterctl variable MAAS_DNS_DOMAINS)",
                allowed.describe()
            ),
        );
    }
}

fn low_ttl(ttl: i32) -> String {
    format!(
        "a TTL of {ttl}s makes resolvers query MAAS DNS almost constantly; 30s or more is usual"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::validate::{Operation, StaticLookups};

    fn create<K>(object: &K) -> Request<'_, K> {
        Request::create("ns", "c", object)
    }

    #[test]
    fn endpoint_host_domain_and_failure_domains_are_checked() {
        let spec: MaasClusterSpec = serde_json::from_value(serde_json::json!({
            "dnsDomain": "maas lab",
            "controlPlaneEndpoint": {"host": "https://api", "port": 6443},
            "failureDomains": ["z1", "z2", "z1"],
            "dnsRecord": {"ttl": 5}
        }))
        .unwrap();
        let cluster = MaasCluster::new("c", spec);
        let v = maas_cluster(&create(&cluster), &StaticLookups::default());
        let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.dnsDomain",
                "spec.controlPlaneEndpoint.host",
                "spec.failureDomains[2]"
            ]
        );
        assert_eq!(v.warnings.len(), 1);
        assert!(v.warnings[0].starts_with("spec.dnsRecord.ttl: "));
    }

    #[test]
    fn an_unsettled_endpoint_and_a_plain_domain_pass() {
        let spec: MaasClusterSpec = serde_json::from_value(serde_json::json!({
            "dnsDomain": "maas",
            "controlPlaneEndpoint": {"host": "", "port": 6443}
        }))
        .unwrap();
        let template = MaasClusterTemplate::new(
            "t",
            serde_json::from_value(serde_json::json!({"template": {"spec": spec}})).unwrap(),
        );
        assert_eq!(
            maas_cluster_template(&create(&template), &StaticLookups::default()),
            Verdict::ok()
        );
    }

    /// A hosted control plane's MaasCluster: no endpoint at creation is neither refused nor
    /// defaulted, and the provider's later first write of it passes; the annotation must be a
    /// boolean, and the refusal names it.
    #[test]
    fn a_hosted_control_plane_cluster_without_endpoint_passes() {
        let hosted = |value: &str, spec: serde_json::Value| -> MaasCluster {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasCluster",
                "metadata": {"name": "c", "annotations": {ANNOTATION_HOSTED_CONTROL_PLANE: value}},
                "spec": spec
            }))
            .unwrap()
        };
        let absent = hosted("true", serde_json::json!({"dnsDomain": "maas"}));
        let lookups = StaticLookups::default();
        assert_eq!(maas_cluster(&create(&absent), &lookups), Verdict::ok());
        let set = hosted(
            "true",
            serde_json::json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "10.20.0.5", "port": 6443}}),
        );
        let update = Request {
            operation: Operation::Update,
            namespace: "ns",
            name: "c",
            object: Some(&set),
            old: Some(&absent),
        };
        assert_eq!(maas_cluster(&update, &lookups), Verdict::ok());
        assert_eq!(
            maas_cluster(
                &create(&hosted("false", serde_json::json!({"dnsDomain": "maas"}))),
                &lookups
            ),
            Verdict::ok()
        );

        let refused = maas_cluster(
            &create(&hosted("yes", serde_json::json!({"dnsDomain": "maas"}))),
            &lookups,
        );
        assert_eq!(
            refused.errors[0].path.as_str(),
            "metadata.annotations[maas.cluster.x-k8s.io/hosted-control-plane]"
        );
        assert!(
            refused.errors[0].to_string().contains("\"true\""),
            "{}",
            refused.errors[0]
        );
        let template: MaasClusterTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasClusterTemplate",
            "metadata": {"name": "t"},
            "spec": {"template": {
                "metadata": {"annotations": {ANNOTATION_HOSTED_CONTROL_PLANE: "True"}},
                "spec": {"dnsDomain": "maas"}
            }}
        }))
        .unwrap();
        let refused = maas_cluster_template(&create(&template), &lookups);
        assert_eq!(
            refused.errors[0].path.as_str(),
            "spec.template.metadata.annotations[maas.cluster.x-k8s.io/hosted-control-plane]"
        );
    }

    #[test]
    fn dns_records_list_each_address_once() {
        let record: MaasDNSRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDNSRecord",
            "metadata": {"name": "r"},
            "spec": {"name": "c1", "domain": "maas", "addresses": ["10.0.0.1", "10.0.0.1"]}
        }))
        .unwrap();
        let v = maas_dns_record(&create(&record), &StaticLookups::default());
        assert_eq!(v.errors[0].path.as_str(), "spec.addresses[1]");
    }

    #[test]
    fn a_domain_outside_the_installation_list_is_refused_naming_the_field() {
        let lookups = StaticLookups {
            dns_domains: capmaas_api::dns::AllowedDomains::parse("maas,example.com"),
            ..StaticLookups::default()
        };
        let cluster = |domain: &str| {
            MaasCluster::new(
                "c",
                serde_json::from_value(serde_json::json!({"dnsDomain": domain})).unwrap(),
            )
        };
        assert_eq!(
            maas_cluster(&create(&cluster("Example.com.")), &lookups),
            Verdict::ok()
        );
        let refused = maas_cluster(&create(&cluster("corp")), &lookups);
        assert_eq!(refused.errors[0].path.as_str(), "spec.dnsDomain");
        assert!(
            refused.errors[0].to_string().contains("example.com, maas"),
            "{}",
            refused.errors[0]
        );
        let record: MaasDNSRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDNSRecord",
            "metadata": {"name": "r"},
            "spec": {"name": "www", "domain": "corp", "addresses": ["10.0.0.1"]}
        }))
        .unwrap();
        let v = maas_dns_record(&create(&record), &lookups);
        assert_eq!(v.errors[0].path.as_str(), "spec.domain");
    }
}
