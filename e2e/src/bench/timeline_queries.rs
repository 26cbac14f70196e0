//! What the mass-deletion run ([`crate::bench::deletion`]) asks of the [`Recorder`]: which
//! Machines and claimed hosts there are when it begins, and when each was deleted, withdrawn,
//! freed.

use std::collections::BTreeMap;
use std::time::Instant;

use super::{Kind, Recorder};

impl Recorder {
    /// When object `name` of `kind` (Machine or MaasMachine) was first seen being deleted, at
    /// or after `since`.
    pub(in crate::bench) fn deleting_since(
        &self,
        kind: Kind,
        name: &str,
        since: Instant,
    ) -> Option<Instant> {
        let seen = match kind {
            Kind::Machine => &self.machines_deleting,
            Kind::MaasMachine => &self.maas_machines_deleting,
            Kind::Host | Kind::Node => return None,
        };
        seen.get(name).copied().filter(|at| *at >= since)
    }

    /// Machines not seen deleted, by name.
    pub(in crate::bench) fn present_machines(&self) -> Vec<String> {
        let present = self.machines.iter().filter(|(_, m)| m.deleted.is_none());
        present.map(|(name, _)| name.clone()).collect()
    }

    /// When Machine `name` was seen deleted.
    pub(in crate::bench) fn deleted_at(&self, name: &str) -> Option<Instant> {
        self.machines.get(name)?.deleted
    }

    /// When each Machine first seen at or after `since` (created then) became Running; none
    /// for one not Running yet.
    pub(in crate::bench) fn running_of_created_since(
        &self,
        since: Instant,
    ) -> Vec<Option<Instant>> {
        let created = self.machines.values().filter(|m| m.created >= since);
        created.map(|m| m.running).collect()
    }

    /// Claimed hosts (a `spec.consumerRef`) by name, with their system ids.
    pub(in crate::bench) fn claimed_hosts(&self) -> BTreeMap<String, Option<String>> {
        let claimed = self.hosts.iter().filter(|(_, h)| h.consumer.is_some());
        claimed
            .map(|(name, h)| (name.clone(), h.system_id.clone()))
            .collect()
    }

    /// The first moment at or after `since` that host `name` became free
    /// (`status.provisioningState: Available`).
    pub(in crate::bench) fn freed_since(&self, name: &str, since: Instant) -> Option<Instant> {
        let edges = self.host_edges.get(name)?;
        edges.became_free.iter().copied().find(|at| *at >= since)
    }

    /// The first moment at or after `since` that host `name`'s deployment request
    /// (`spec.provisioning`) was withdrawn: machine-controller's ask for the release.
    pub(in crate::bench) fn withdrawn_since(&self, name: &str, since: Instant) -> Option<Instant> {
        let edges = self.host_edges.get(name)?;
        edges.withdrawn.iter().copied().find(|at| *at >= since)
    }

    /// The MaasMachine claiming host `name` (its latest claim).
    pub(in crate::bench) fn consumer_of(&self, name: &str) -> Option<&str> {
        self.hosts.get(name)?.consumer.as_deref()
    }

    /// The MaasMachine of Machine `name`.
    pub(in crate::bench) fn infra_of(&self, name: &str) -> Option<&str> {
        self.machines.get(name)?.infra.as_deref()
    }
}
