//! The record of what happened to VM hosts, kept by the world for tests ("composed exactly
//! once") and the control API.

use serde::Serialize;

/// What happened to a VM host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VmHostEventKind {
    /// Registered: `POST /vm-hosts/`, a deployment with `register_vmhost`/`install_kvm`
    /// finishing, or the control API.
    Registered,
    /// A machine was composed on it (`op=compose`).
    Composed,
    /// Updated with `PUT /vm-hosts/{id}/`.
    Updated,
    /// A composed machine was deleted (released, or deleted with its VM host).
    Decomposed,
    /// The VM host was deleted (`DELETE`, or the release of the machine it runs on).
    Deleted,
}

/// One event of a VM host, oldest first in [`crate::SimHandle::vm_host_events`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmHostEvent {
    /// What happened.
    pub kind: VmHostEventKind,
    /// VM host id.
    pub vm_host_id: u64,
    /// VM host name at the time.
    pub vm_host_name: String,
    /// The machine concerned: the composed or decomposed machine, or the host machine of a
    /// registration.
    pub system_id: Option<String>,
}
