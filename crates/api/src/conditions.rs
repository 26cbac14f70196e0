//! Condition types and reasons (`metav1.Condition` shape, CamelCase reasons).
//!
//! CAPMAAS names are kept where they exist so dashboards and alerts written
//! for CAPMAAS keep working.

/// Summary condition on every kind; mirrored by CAPI into the owner's
/// `InfrastructureReady`.
pub const READY: &str = "Ready";
/// v1beta2 contract: reports whether reconciliation is paused.
pub const PAUSED: &str = "Paused";

/// MaasCluster: the control-plane endpoint DNS record (CAPMAAS `LoadBalancerReady`).
pub const LOAD_BALANCER_READY: &str = "LoadBalancerReady";
/// MaasCluster: the workload API server answers.
pub const API_SERVER_AVAILABLE: &str = "APIServerAvailable";
/// MaasMachine: the MAAS machine is deployed (CAPMAAS `MachineDeployed`).
pub const MACHINE_DEPLOYED: &str = "MachineDeployed";
/// MaasMachine (control plane): its addresses are in the cluster DNS record.
pub const DNS_ATTACHED: &str = "DNSAttached";
/// MaasMachine: a MaasHost has been chosen and claimed.
pub const HOST_ASSOCIATED: &str = "HostAssociated";
/// MaasMachine: rendered metadata / network data are available.
pub const DATA_READY: &str = "DataReady";
/// MaasInventory: the last MAAS sync succeeded.
pub const SYNCED: &str = "Synced";
/// MaasHost: the MAAS machine still exists.
pub const HOST_PRESENT: &str = "HostPresent";
/// MaasHost: provisioning request progress.
pub const PROVISIONED: &str = "Provisioned";
/// MaasDNSRecord: MAAS holds the requested addresses.
pub const DNS_RECORD_SYNCED: &str = "DNSRecordSynced";
/// MaasDataClaim / MaasData: addresses from every referenced pool are allocated.
pub const ADDRESSES_ALLOCATED: &str = "AddressesAllocated";
/// MaasIPPool: the pool definition is valid and allocations fit.
pub const POOL_VALID: &str = "PoolValid";
/// MaasIPPool: every address in use lies where the pool's layout hands addresses out. False
/// (reason `AddressesStranded`) after an edit that cut ranges or excluded addresses in use.
pub const ADDRESSES_IN_POOL: &str = "AddressesInPool";
/// MaasIPPool with `spec.maasSubnet` (maas-client): the pool's ranges are reserved in MAAS.
pub const MAAS_RANGES_RESERVED: &str = "MAASRangesReserved";
/// MaasRemediation: the reboot attempt state.
pub const REMEDIATION_IN_PROGRESS: &str = "RemediationInProgress";
/// MaasInventory: the gateway reaches MAAS over TLS. False (reason `PlainHTTP`) when the
/// operator accepted an `http://` endpoint: the MAAS key and every answer travel in clear.
/// Informational: it does not make the inventory un-Ready.
pub const MAAS_CONNECTION_SECURE: &str = "MAASConnectionSecure";
/// MaasHost of a VM host: every entry of `spec.vms` is composed (maas-client); False names the
/// hostname MAAS refused and why.
pub const VMS_COMPOSED: &str = "VMsComposed";

/// Reasons, CamelCase words a human can search for.
pub mod reasons {
    /// Waiting for the owner Cluster's infrastructure to be provisioned.
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructure";
    /// Waiting for the Machine's bootstrap data Secret.
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
    /// The MAAS machine recorded for this object does not exist.
    pub const MACHINE_NOT_FOUND: &str = "MachineNotFound";
    /// Deployment was requested (CAPMAAS name).
    pub const MACHINE_DEPLOY_STARTED: &str = "MachineDeployStartedReason";
    /// MAAS is deploying the machine.
    pub const MACHINE_DEPLOYING: &str = "MachineDeploying";
    /// MAAS reported a failed deployment.
    pub const MACHINE_DEPLOY_FAILED: &str = "MachineDeployFailed";
    /// The MAAS machine was released or terminated.
    pub const MACHINE_TERMINATED: &str = "MachineTerminatedReason";
    /// The deployed machine is powered off.
    pub const MACHINE_POWERED_OFF: &str = "MachinePoweredOff";
    /// The machine is deployed.
    pub const MACHINE_DEPLOYED: &str = "MachineDeployed";
    /// MAAS reports a state this provider does not act on.
    pub const MACHINE_STATE_UNDEFINED: &str = "MachineStateUndefined";
    /// No free MaasHost satisfies the machine's constraints.
    pub const NO_HOST_AVAILABLE: &str = "NoHostAvailable";
    /// `spec.lxd.enabled`: no VM host can take the machine's VM (pool, zone, parent, free
    /// resources).
    pub const NO_VM_HOST_AVAILABLE: &str = "NoVMHostAvailable";
    /// `spec.lxd.enabled`: the VM is asked for on a VM host and not composed (or not ready to
    /// claim) yet.
    pub const WAITING_FOR_VM: &str = "WaitingForVM";
    /// Event: the machine's VM was asked for on a VM host (a `spec.vms` entry added).
    pub const VM_REQUESTED: &str = "VMRequested";
    /// Event: the machine's `spec.vms` entry was removed (the machine is deleted).
    pub const VM_REQUEST_WITHDRAWN: &str = "VMRequestWithdrawn";
    /// No free MaasHost in the requested failure domain.
    pub const NO_CAPACITY_IN_FAILURE_DOMAIN: &str = "NoCapacityInFailureDomain";
    /// A MaasHost was claimed for this machine.
    pub const HOST_CLAIMED: &str = "HostClaimed";
    /// A reserved host was reused (node reuse).
    pub const HOST_REUSED: &str = "HostReused";
    /// Waiting for the data claim to be rendered.
    pub const WAITING_FOR_DATA: &str = "WaitingForData";
    /// DNS attach pending (CAPMAAS name).
    pub const DNS_ATTACH_PENDING: &str = "DNSAttachPending";
    /// DNS detach pending (CAPMAAS name).
    pub const DNS_DETACH_PENDING: &str = "DNSDetachPending";
    /// The DNS record is not available yet (CAPMAAS name).
    pub const WAIT_FOR_DNS_NAME: &str = "WaitForDNSName";
    /// Creating or updating the DNS record failed (CAPMAAS name).
    pub const LOAD_BALANCER_FAILED: &str = "LoadBalancerFailed";
    /// Another MaasDNSRecord (older) holds the same FQDN; this one waits.
    pub const DNS_NAME_CONFLICT: &str = "DNSNameConflict";
    /// MAAS has a DNS resource of this FQDN that this provider did not create; it is left
    /// alone.
    pub const DNS_NAME_TAKEN: &str = "DNSNameTaken";
    /// The record's domain is not among the installation's `--dns-domains`; nothing is
    /// published in MAAS.
    pub const DNS_DOMAIN_NOT_ALLOWED: &str = "DNSDomainNotAllowed";
    /// The workload API server does not answer yet (CAPMAAS name).
    pub const API_SERVER_NOT_READY: &str = "APIServerNotReady";
    /// Reconciliation is paused by the Cluster or an annotation.
    pub const PAUSED: &str = "Paused";
    /// Reconciliation is not paused.
    pub const NOT_PAUSED: &str = "NotPaused";
    /// The MAAS API could not be reached or answered with an error.
    pub const MAAS_UNAVAILABLE: &str = "MaasUnavailable";
    /// The MAAS machine disappeared from MAAS.
    pub const HOST_MISSING: &str = "HostMissing";
    /// Every address claim of the data has an address.
    pub const ADDRESSES_ALLOCATED: &str = "AddressesAllocated";
    /// An address pool has no free address; retried when one is released.
    pub const POOL_EXHAUSTED: &str = "PoolExhausted";
    /// An address could not be allocated for another reason.
    pub const ALLOCATION_FAILED: &str = "AllocationFailed";
    /// The pool definition is invalid (overlaps, gateway outside subnet, ...).
    pub const INVALID_POOL: &str = "InvalidPool";
    /// Addresses in use lie outside the pool's ranges or in its exclusions.
    pub const ADDRESSES_STRANDED: &str = "AddressesStranded";
    /// Remediation is waiting for the server to power off.
    pub const WAITING_FOR_POWER_OFF: &str = "WaitingForPowerOff";
    /// Remediation is waiting for the Node to come back.
    pub const WAITING_FOR_NODE: &str = "WaitingForNode";
    /// Remediation gave up; the Machine is handed to its owner for replacement.
    pub const REMEDIATION_FAILED: &str = "RemediationFailed";
    /// The last reconcile succeeded.
    pub const RECONCILED: &str = "Reconciled";
    /// The MAAS endpoint is `https://` (certificate verified).
    pub const TLS: &str = "TLS";
    /// The MAAS endpoint is `http://`, accepted with `--maas-allow-insecure-http`.
    pub const PLAIN_HTTP: &str = "PlainHTTP";
    /// MAAS refused a reserved range of a pool (overlap with a dynamic or foreign range...).
    pub const MAAS_RANGE_REFUSED: &str = "MAASRangeRefused";
    /// `spec.maasSubnet` names no MAAS subnet, or a range lies outside it.
    pub const MAAS_SUBNET_MISMATCH: &str = "MAASSubnetMismatch";
}
