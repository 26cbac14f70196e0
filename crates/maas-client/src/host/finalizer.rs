//! The MaasHost finalizer (`maashost.infrastructure.cluster.x-k8s.io`): a host that is claimed
//! or holds an allocation of ours is not deleted before its server is given back.
//!
//! Without it a deleted host left its MAAS machine deployed until the orphan sweep noticed it
//! (after `--orphan-grace-period`), with nothing in the API saying so meanwhile. With it the
//! deletion itself is the release: the host stays, terminating, while the gateway releases the
//! machine with the erase recorded on it and undoes what it linked (static addresses, hostname),
//! and goes only then. `clusterctl move` deletes nothing this way: a host deleted for a move keeps
//! its server for the copy in the target cluster.
//!
//! machine-controller puts it on in the claim's own write (no write of its own per machine);
//! [`before_steps`] adds it to a claimed host that lacks it (claimed by an earlier version).

use capmaas_api::{MaasHost, keys};
use capmaas_runtime::controller::finalizer;

use super::decide::{HostFacts, Wait};

/// What the finalizer needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Put it on: the host is claimed or holds an allocation of ours.
    Add,
    /// Take it off: nothing of ours is left to give back, or the host leaves for a move.
    Remove,
    /// Leave it as it is.
    Keep,
}

/// Whether the host is being deleted, and whether by `clusterctl move`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The deletion carries `clusterctl.cluster.x-k8s.io/delete-for-move`.
    pub for_move: bool,
}

impl Deletion {
    /// Read from the host.
    pub fn of(host: &MaasHost) -> Self {
        Self {
            deleting: host.metadata.deletion_timestamp.is_some(),
            for_move: keys::deleted_for_move(&host.metadata),
        }
    }
}

/// Whether `host` carries the finalizer.
pub fn present(host: &MaasHost) -> bool {
    finalizer::has(host, keys::FINALIZER_MAAS_HOST)
}

/// Before any step: added to a claimed or allocated host before anything is asked of MAAS for
/// it; taken off at once when the host is deleted for a move.
pub fn before_steps(present: bool, deletion: Deletion, facts: &HostFacts) -> Change {
    match (deletion.deleting, present) {
        (true, true) if deletion.for_move => Change::Remove,
        (false, false) if facts.consumed || facts.allocation_known => Change::Add,
        _ => Change::Keep,
    }
}

/// After the steps, with the wait they ended on: taken off once nothing of ours is left on the
/// machine and nobody claims the host (a deleted host is claimed by nobody any more).
pub fn after_steps(present: bool, deletion: Deletion, facts: &HostFacts, ended: Wait) -> Change {
    let let_go = deletion.deleting || !facts.consumed;
    if present && let_go && nothing_left(ended) {
        Change::Remove
    } else {
        Change::Keep
    }
}

/// The waits that mean the machine is back in MAAS's hands (released and cleaned up, someone
/// else's, gone) or was never this host's to release (`Unclaimed`).
fn nothing_left(ended: Wait) -> bool {
    matches!(
        ended,
        Wait::Idle
            | Wait::Unavailable
            | Wait::HeldByOther
            | Wait::Broken
            | Wait::Missing
            | Wait::Unclaimed
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::annotations::RebootState;
    use std::collections::BTreeMap;

    fn facts(consumed: bool, allocation_known: bool) -> HostFacts {
        HostFacts {
            consumed,
            provisioning: consumed,
            allocation_recorded: allocation_known,
            allocated_for_other_consumer: false,
            allocation_known,
            reboot_requested: false,
            reboot: RebootState::Idle,
            deploy_failures: 0,
            max_deploy_retries: 2,
            hostname: None,
            original_hostname: None,
            unclaimed_for: None,
            release_unclaimed_after: None,
            annotations: BTreeMap::new(),
            annotate: false,
            maas_busy: false,
            recorded_release: None,
            identified: false,
            finalizer: false,
            static_addresses: None,
            keep_powered_on: true,
            vm_host_guests: Vec::new(),
        }
    }

    const LIVE: Deletion = Deletion {
        deleting: false,
        for_move: false,
    };
    const DELETED: Deletion = Deletion {
        deleting: true,
        for_move: false,
    };
    const MOVED: Deletion = Deletion {
        deleting: true,
        for_move: true,
    };

    #[test]
    fn added_when_claimed_or_allocated_before_anything_is_asked_of_maas() {
        assert_eq!(before_steps(false, LIVE, &facts(true, false)), Change::Add);
        assert_eq!(before_steps(false, LIVE, &facts(false, true)), Change::Add);
        assert_eq!(
            before_steps(false, LIVE, &facts(false, false)),
            Change::Keep
        );
        assert_eq!(before_steps(true, LIVE, &facts(true, true)), Change::Keep);
        assert_eq!(
            before_steps(false, DELETED, &facts(true, true)),
            Change::Keep,
            "never added to a host on its way out"
        );
    }

    #[test]
    fn a_move_takes_it_off_at_once_a_deletion_only_once_the_server_is_back() {
        assert_eq!(
            before_steps(true, MOVED, &facts(true, true)),
            Change::Remove
        );
        assert_eq!(
            before_steps(true, DELETED, &facts(true, true)),
            Change::Keep
        );
        for still_ours in [
            Wait::Releasing,
            Wait::ReleaseFailed,
            Wait::Deployed,
            Wait::Deploying,
        ] {
            assert_eq!(
                after_steps(true, DELETED, &facts(false, true), still_ours),
                Change::Keep,
                "{still_ours:?}"
            );
        }
        for back in [
            Wait::Idle,
            Wait::Missing,
            Wait::HeldByOther,
            Wait::Unclaimed,
        ] {
            assert_eq!(
                after_steps(true, DELETED, &facts(false, true), back),
                Change::Remove,
                "{back:?}"
            );
        }
    }

    #[test]
    fn a_live_host_keeps_it_while_claimed_and_drops_it_once_released() {
        assert_eq!(
            after_steps(true, LIVE, &facts(true, true), Wait::Idle),
            Change::Keep,
            "claimed, not deployed yet"
        );
        assert_eq!(
            after_steps(true, LIVE, &facts(false, true), Wait::Releasing),
            Change::Keep
        );
        assert_eq!(
            after_steps(true, LIVE, &facts(false, false), Wait::Idle),
            Change::Remove
        );
        assert_eq!(
            after_steps(false, LIVE, &facts(false, false), Wait::Idle),
            Change::Keep,
            "no write when it is not there"
        );
    }
}
