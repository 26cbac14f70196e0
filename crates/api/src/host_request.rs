//! What a MaasMachine asks of a MaasHost, a contract between Deployments: the consumer
//! reference by which machine-controller claims a host (and which remediation-controller
//! checks before it power-cycles one), and the provisioning request maas-client carries out.

use kube::Resource;

use crate::common::{ConsumerReference, LocalObjectReference, SecretKeyReference};
use crate::data::MaasData;
use crate::host::HostProvisioning;
use crate::host::MaasHost;
use crate::keys;
use crate::machine::MaasMachine;

/// The consumer reference naming `mm` (needs its UID) on a host in `host_namespace`: the
/// machine's namespace is written when it is not the host's.
pub fn consumer_ref(mm: &MaasMachine, host_namespace: &str) -> Option<ConsumerReference> {
    let own = mm.metadata.namespace.as_deref().unwrap_or(host_namespace);
    Some(ConsumerReference {
        api_version: MaasMachine::api_version(&()).into_owned(),
        kind: MaasMachine::kind(&()).into_owned(),
        name: mm.metadata.name.clone()?,
        uid: mm.metadata.uid.clone()?,
        namespace: (own != host_namespace).then(|| own.to_owned()),
    })
}

/// Whether `host` is claimed by `mm`: its `consumerRef` names that MaasMachine incarnation
/// (same UID: a re-created machine with the same name is someone else), in the machine's
/// namespace. A host's `status.hostRef` on the machine is only an intent; this is the claim.
pub fn claimed_by(host: &MaasHost, mm: &MaasMachine) -> bool {
    let host_namespace = host.metadata.namespace.as_deref().unwrap_or_default();
    host.spec.consumer_ref.as_ref().is_some_and(|c| {
        c.kind == MaasMachine::kind(&())
            && Some(c.uid.as_str()) == mm.metadata.uid.as_deref()
            && Some(c.namespace_or(host_namespace)) == mm.metadata.namespace.as_deref()
    })
}

/// The deployment request for `host`.
///
/// The hostname is the host's MAAS hostname, not the Machine name: MAAS hostnames are unique
/// in the whole MAAS region while Machine names are unique only per namespace, so renaming
/// could collide between tenants; CAPMAAS keeps MAAS hostnames too, so Node names stay the same
/// for its users. The kubelet registers the Node under this name and it is found by it.
///
/// With rendered data (`spec.dataTemplate`), the network data and metadata Secrets go with the
/// request, and a hostname the metadata names replaces the MAAS one.
///
/// `vm_hosts`: the machine's MaasCluster has `spec.lxdConfig.enabled`, so the host is deployed
/// with MAAS's `register_vmhost` and becomes an LXD VM host, as CAPMAAS makes every node of such
/// a cluster one. Not for a deployment to memory (MAAS refuses it; the schema forbids it).
pub fn provisioning_request(
    mm: &MaasMachine,
    user_data: SecretKeyReference,
    host: &MaasHost,
    data: Option<&MaasData>,
    vm_hosts: bool,
) -> HostProvisioning {
    let secret = |r: Option<&LocalObjectReference>, key: &str| {
        r.map(|r| SecretKeyReference {
            name: r.name.clone(),
            key: key.to_owned(),
        })
    };
    let rendered_hostname = data
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.hostname.clone())
        .filter(|h| is_dns_label(h));
    HostProvisioning {
        image: mm.spec.image.clone(),
        user_data_secret_ref: Some(user_data),
        network_data_secret_ref: secret(
            data.and_then(|d| d.spec.network_data.as_ref()),
            keys::NETWORK_DATA_SECRET_KEY,
        ),
        meta_data_secret_ref: secret(
            data.and_then(|d| d.spec.meta_data.as_ref()),
            keys::META_DATA_SECRET_KEY,
        ),
        hostname: rendered_hostname.or_else(|| {
            host.status
                .as_ref()
                .and_then(|s| s.hostname.clone())
                .filter(|h| is_dns_label(h))
        }),
        deploy_in_memory: mm.spec.deploy_in_memory,
        hwe_kernel: mm.spec.hwe_kernel.clone(),
        release_policy: mm.spec.release_policy.clone(),
        adopt_allocation: (mm.spec.system_id.as_deref() == Some(host.spec.system_id.as_str()))
            .then_some(true),
        keep_powered_on: mm.spec.keep_powered_on,
        register_vm_host: (vm_hosts && !mm.spec.deploy_in_memory).then_some(true),
    }
}

/// A valid MAAS hostname: one lowercase DNS label (webhook-server refuses anything else).
fn is_dns_label(s: &str) -> bool {
    crate::names::dns_label_problem(s).is_none()
}
