//! MaasCluster, MaasClusterTemplate and MaasDNSRecord: names that must resolve.

use capmaas_api::cluster::MaasClusterSpec;
use capmaas_api::{MaasCluster, MaasClusterTemplate, MaasDNSRecord};

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
        let path = FieldPath::root("spec").child("template").child("spec");
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
    use crate::validate::StaticLookups;

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
