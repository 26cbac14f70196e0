//! Well-known finalizers, labels and annotations shared by every controller.
//!
//! Keeping them in one place means a rename is a compile error in every
//! consumer instead of a silent mismatch between two Deployments.

/// Finalizer on `MaasCluster` (CAPMAAS name, kept for drop-in compatibility).
pub const FINALIZER_MAAS_CLUSTER: &str = "maascluster.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasMachine` (CAPMAAS name, kept for drop-in compatibility).
pub const FINALIZER_MAAS_MACHINE: &str = "maasmachine.infrastructure.cluster.x-k8s.io";
/// Finalizer maas-client puts on `MaasHost` while MAAS still holds state for it.
pub const FINALIZER_MAAS_HOST: &str = "maashost.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasInventory`.
pub const FINALIZER_MAAS_INVENTORY: &str = "maasinventory.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasDNSRecord`: the MAAS DNS resource is deleted before the object goes.
pub const FINALIZER_MAAS_DNS_RECORD: &str = "maasdnsrecord.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasDataTemplate`.
pub const FINALIZER_MAAS_DATA_TEMPLATE: &str = "maasdatatemplate.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasDataClaim`.
pub const FINALIZER_MAAS_DATA_CLAIM: &str = "maasdataclaim.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasData`.
pub const FINALIZER_MAAS_DATA: &str = "maasdata.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasIPPool` (data-controller: the pool stays while its addresses exist).
pub const FINALIZER_MAAS_IP_POOL: &str = "maasippool.infrastructure.cluster.x-k8s.io";
/// Finalizer maas-client puts on a `MaasIPPool` with `spec.maasSubnet`: the reserved IP
/// ranges it made in MAAS for the pool are deleted before the pool goes. Separate from
/// [`FINALIZER_MAAS_IP_POOL`], which data-controller holds.
pub const FINALIZER_MAAS_IP_POOL_RANGES: &str =
    "maasippool.infrastructure.cluster.x-k8s.io/maas-reserved-ranges";
/// Finalizer data-controller puts on every CAPI `IPAddressClaim` whose `spec.poolRef` is a
/// `MaasIPPool`: the claim's `IPAddress` is deleted before the claim goes. It is the last
/// finalizer removed: while a consumer's own finalizer is on the claim, the address stays.
pub const FINALIZER_IP_ADDRESS_CLAIM: &str = "ipam.infrastructure.cluster.x-k8s.io/ipaddressclaim";
/// Consumer finalizer data-controller puts on every CAPI `IPAddressClaim` it makes for a
/// MaasDataClaim: deleting the claim by hand does not free a live server's address (an IPAM
/// provider keeps an address while a consumer's finalizer is on its claim, as CAPM3, CAPV and
/// OpenShift's consumers rely on). It goes only when the data claim is released, which
/// machine-controller allows once MAAS has released the server.
pub const FINALIZER_ADDRESS_IN_USE: &str = "maasdataclaim.infrastructure.cluster.x-k8s.io/address";
/// Finalizer data-controller puts on every CAPI `IPAddress` it creates: the address is not
/// released (its name, the allocation lock, stays taken) while its claim is alive; it is
/// removed when the claim is gone or releases it.
pub const FINALIZER_IP_ADDRESS: &str = "ipam.infrastructure.cluster.x-k8s.io/ipaddress";
/// Finalizer data-controller puts on every `MaasIPAddressLock`: a lock deleted by hand keeps
/// holding its address (terminating) until its `IPAddress` is released, so no other claim can
/// take the address meanwhile.
pub const FINALIZER_MAAS_IP_ADDRESS_LOCK: &str =
    "maasipaddresslock.infrastructure.cluster.x-k8s.io";
/// Finalizer on `MaasRemediation`: the host is powered back on before the object goes.
pub const FINALIZER_MAAS_REMEDIATION: &str = "maasremediation.infrastructure.cluster.x-k8s.io";

/// Label CAPI puts on every object of a cluster (list/watch filter).
pub const LABEL_CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
/// Label CAPI puts on control-plane Machines.
pub const LABEL_CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";
/// Label selecting objects for a controller started with `--watch-filter`.
pub const LABEL_WATCH_FILTER: &str = "cluster.x-k8s.io/watch-filter";
/// Label on provider components (`infrastructure-maas`).
pub const LABEL_PROVIDER: &str = "cluster.x-k8s.io/provider";
/// Value of [`LABEL_PROVIDER`] for this provider.
pub const PROVIDER_LABEL_VALUE: &str = "infrastructure-maas";

/// MaasHost annotation, value `"true"`: the host was made by hand, not imported by a
/// MaasInventory, and maas-client may manage its `spec.systemID` (still only if no other
/// MaasHost in the cluster holds that machine). Without it or the inventory label
/// maas-client leaves the host alone.
pub const ANNOTATION_HOST_HAND_MADE: &str = "maas.cluster.x-k8s.io/hand-made";
/// Annotation pausing reconciliation of one object.
pub const ANNOTATION_PAUSED: &str = "cluster.x-k8s.io/paused";
/// Annotation marking an externally managed InfraCluster.
pub const ANNOTATION_MANAGED_BY: &str = "cluster.x-k8s.io/managed-by";
/// Annotation CAPI sets on objects cloned from a template: template name.
pub const ANNOTATION_CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
/// Annotation CAPI sets on objects cloned from a template: template group/kind.
pub const ANNOTATION_CLONED_FROM_GROUP_KIND: &str = "cluster.x-k8s.io/cloned-from-groupkind";
/// Annotation clusterctl honours to hold a move until the object is quiescent.
pub const ANNOTATION_BLOCK_MOVE: &str = "clusterctl.cluster.x-k8s.io/block-move";
/// MaasDNSRecord annotation written by maas-client: `<MAAS DNS resource id>.<proof>`, the
/// resource the record created, signed under the MAAS API key, so that the record still owns
/// it after `clusterctl move` (which does not keep status).
pub const ANNOTATION_DNS_RESOURCE: &str = "maas.cluster.x-k8s.io/dns-resource";
/// Annotation `clusterctl move` puts on every object it is about to delete from the source
/// management cluster: the object lives on in the target, so nothing it holds outside
/// Kubernetes (a MAAS machine, DNS resource or IP range) may be released or cleaned up.
pub const ANNOTATION_DELETE_FOR_MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// MaasHost label: MAAS availability zone of the machine.
pub const LABEL_HOST_ZONE: &str = "maas.cluster.x-k8s.io/zone";
/// MaasHost label: MAAS resource pool of the machine.
pub const LABEL_HOST_POOL: &str = "maas.cluster.x-k8s.io/pool";
/// MaasHost label: machine architecture as MAAS reports it (e.g. `amd64`).
pub const LABEL_HOST_ARCH: &str = "maas.cluster.x-k8s.io/arch";
/// MaasHost label: the `MaasInventory` that imported the host.
pub const LABEL_HOST_INVENTORY: &str = "maas.cluster.x-k8s.io/inventory";
/// Label on the MaasHost of a VM composed for a VM host's `spec.vms`: the name of the VM host's
/// MaasHost (same namespace).
pub const LABEL_COMPOSED_ON: &str = "maas.cluster.x-k8s.io/composed-on";
/// Label on the MaasHost of a VM composed for a VM host's `spec.vms`: the VM's MAAS hostname,
/// the key of its `spec.vms` entry.
pub const LABEL_VM_HOSTNAME: &str = "maas.cluster.x-k8s.io/vm-hostname";
/// MaasInventory label: created by machine-controller because a MaasMachine asked for a pool
/// no inventory imported (`"true"`).
pub const LABEL_INVENTORY_ON_DEMAND: &str = "maas.cluster.x-k8s.io/imported-on-demand";
/// Prefix of one MaasHost label per MAAS tag: `tag.maas.cluster.x-k8s.io/<tag>: "true"`.
pub const LABEL_HOST_TAG_PREFIX: &str = "tag.maas.cluster.x-k8s.io/";
/// MaasHost label carrying a node-reuse reservation: `cp-<name>` or `md-<name>`
/// (the owner UID and expiry live in `spec.reservation`).
pub const LABEL_NODE_REUSE: &str = "infrastructure.cluster.x-k8s.io/node-reuse";
/// MaasHost annotation marking a host that failed remediation; it is not chosen again.
pub const ANNOTATION_HOST_UNHEALTHY: &str = "maas.cluster.x-k8s.io/unhealthy";
/// Prefix of reboot-request annotations on MaasHost:
/// `reboot.maas.cluster.x-k8s.io/<requester>`. maas-client keeps the server
/// powered off while at least one is present and powers it on when the last goes.
pub const ANNOTATION_REBOOT_PREFIX: &str = "reboot.maas.cluster.x-k8s.io/";
/// MaasHost annotation maas-client keeps while it carries out reboot requests: `off` once it
/// took a request (and powers the server off), `on:<unix seconds>` once it powered it on.
/// Written by maas-client only; remediation-controller reads it.
pub const ANNOTATION_REBOOT_STATE: &str = "maas.cluster.x-k8s.io/reboot-state";
/// MaasMachine/MaasHost annotation naming the MaasHost (`<namespace>/<name>`).
pub const ANNOTATION_HOST: &str = "maas.cluster.x-k8s.io/host";
/// MaasRemediation annotation holding a JSON backup of the Node's labels.
pub const ANNOTATION_NODE_LABELS_BACKUP: &str =
    "remediation.maas.cluster.x-k8s.io/node-labels-backup";
/// MaasRemediation annotation holding a JSON backup of the Node's annotations.
pub const ANNOTATION_NODE_ANNOTATIONS_BACKUP: &str =
    "remediation.maas.cluster.x-k8s.io/node-annotations-backup";
/// MaasData and rendered Secret label: the MaasDataTemplate.
pub const LABEL_DATA_TEMPLATE: &str = "maas.cluster.x-k8s.io/data-template";
/// MaasData, IPAddressClaim and rendered Secret label: the MaasDataClaim.
pub const LABEL_DATA_CLAIM: &str = "maas.cluster.x-k8s.io/data-claim";
/// Key of the rendered metadata in its Secret.
pub const META_DATA_SECRET_KEY: &str = "metaData";
/// Key of the rendered network data in its Secret.
pub const NETWORK_DATA_SECRET_KEY: &str = "networkData";
/// Secret type of rendered metadata and network data Secrets.
pub const SECRET_TYPE_RENDERED_DATA: &str = "infrastructure.cluster.x-k8s.io/secret";
/// Key of the bootstrap data in the Machine's bootstrap Secret (CAPI contract).
pub const BOOTSTRAP_SECRET_KEY: &str = "value";

/// Label key for one MAAS tag on a MaasHost, or `None` when the tag cannot be
/// a label name (Kubernetes limits the name part to 63 characters of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric).
pub fn host_tag_label(tag: &str) -> Option<String> {
    is_label_segment(tag).then(|| format!("{LABEL_HOST_TAG_PREFIX}{tag}"))
}

/// Whether `text` may stand as the name part of a label key, or as a non-empty label value:
/// Kubernetes holds both to the same rule, at most 63 of `[A-Za-z0-9._-]`, alphanumeric at
/// both ends.
pub fn is_label_segment(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Annotation key a requester uses to ask for a reboot of a MaasHost.
pub fn reboot_annotation(requester: &str) -> String {
    format!("{ANNOTATION_REBOOT_PREFIX}{requester}")
}

/// Whether an annotation key is a reboot request.
pub fn is_reboot_annotation(key: &str) -> bool {
    key.strip_prefix(ANNOTATION_REBOOT_PREFIX)
        .is_some_and(|rest| !rest.is_empty())
}

/// Whether `meta` is being deleted by `clusterctl move` (it moved to another management
/// cluster): its controllers drop their finalizers and leave MAAS as it is.
pub fn deleted_for_move(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_DELETE_FOR_MOVE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_labels_follow_label_name_rules() {
        assert_eq!(
            host_tag_label("gpu").as_deref(),
            Some("tag.maas.cluster.x-k8s.io/gpu")
        );
        assert_eq!(
            host_tag_label("rack-1.a").as_deref(),
            Some("tag.maas.cluster.x-k8s.io/rack-1.a")
        );
        assert_eq!(host_tag_label(""), None);
        assert_eq!(host_tag_label("has space"), None);
        assert_eq!(host_tag_label("-lead"), None);
        assert_eq!(host_tag_label(&"x".repeat(64)), None);
        assert!(host_tag_label(&"x".repeat(63)).is_some());
    }

    #[test]
    fn reboot_annotations_round_trip() {
        let key = reboot_annotation("maasremediation-worker-0");
        assert!(is_reboot_annotation(&key));
        assert!(!is_reboot_annotation(ANNOTATION_REBOOT_PREFIX));
        assert!(!is_reboot_annotation("maas.cluster.x-k8s.io/zone"));
    }
}
