//! MaasCluster, MaasClusterTemplate and MaasDNSRecord: names that must resolve.

use capmaas_api::cluster::MaasClusterSpec;
use capmaas_api::{MaasCluster, MaasClusterTemplate, MaasDNSRecord};

use super::Request;
use super::selector::unique;
use crate::field::{FieldPath, Verdict};
use capmaas_api::names::host_problem;

/// TTLs below this make MAAS's DNS (bind) reload and resolvers ask again almost constantly.
const LOW_TTL_SECONDS: i32 = 30;

/// MaasCluster: the DNS domain and endpoint host must be names a resolver accepts.
pub(crate) fn maas_cluster(req: &Request<'_, MaasCluster>) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(cluster) = req.object {
        cluster_spec(&cluster.spec, &FieldPath::root("spec"), &mut v);
    }
    v
}

/// MaasClusterTemplate: the cluster spec it stamps out.
pub(crate) fn maas_cluster_template(req: &Request<'_, MaasClusterTemplate>) -> Verdict {
    let mut v = Verdict::ok();
    if let Some(template) = req.object {
        let path = FieldPath::root("spec").child("template").child("spec");
        cluster_spec(&template.spec.template.spec, &path, &mut v);
    }
    v
}

/// MaasDNSRecord (written by cluster-controller): a resolvable name, no address twice.
pub(crate) fn maas_dns_record(req: &Request<'_, MaasDNSRecord>) -> Verdict {
    let mut v = Verdict::ok();
    let Some(record) = req.object else {
        return v;
    };
    let spec = FieldPath::root("spec");
    if let Some(problem) = host_problem(&record.spec.fqdn()) {
        v.invalid(&spec.child("name"), record.spec.fqdn(), problem);
    }
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

fn low_ttl(ttl: i32) -> String {
    format!(
        "a TTL of {ttl}s makes resolvers query MAAS DNS almost constantly; 30s or more is usual"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::validate::Operation;

    fn create<K>(object: &K) -> Request<'_, K> {
        Request {
            operation: Operation::Create,
            namespace: "ns",
            name: "c",
            object: Some(object),
            old: None,
        }
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
        let v = maas_cluster(&create(&cluster));
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
        assert_eq!(maas_cluster_template(&create(&template)), Verdict::ok());
    }

    #[test]
    fn dns_records_list_each_address_once() {
        let record: MaasDNSRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDNSRecord",
            "metadata": {"name": "r"},
            "spec": {"name": "c1", "domain": "maas", "addresses": ["10.0.0.1", "10.0.0.1"]}
        }))
        .unwrap();
        let v = maas_dns_record(&create(&record));
        assert_eq!(v.errors[0].path.as_str(), "spec.addresses[1]");
    }
}
