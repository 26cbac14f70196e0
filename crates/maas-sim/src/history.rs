//! Each machine's status history: when MAAS moved it to which status, at the simulator clock.
//!
//! Real MAAS keeps this in its event log; tests and benchmarks need it to tell how long a
//! client took to notice a change (e.g. from Deployed to the Kubernetes Machine running).
//! Kept in memory only: the timestamps are of this process's clock, meaningless after a
//! reload from the state file.

use std::collections::VecDeque;
use std::time::Instant;

use crate::status::NodeStatus;

/// At most this many changes are kept per machine, the oldest dropped first, so a simulator
/// that runs for days of deploy/release cycles does not grow without bound.
const KEPT: usize = 64;

/// One status change of a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusChange {
    /// The status the machine moved to.
    pub status: NodeStatus,
    /// When: for time-driven transitions the moment they were due (a Deployed reached between
    /// two requests is dated when it happened, not when it was next looked at); for calls, the
    /// moment the call took effect.
    pub at: Instant,
}

/// A change at the simulator clock (milliseconds since start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) status: NodeStatus,
    pub(crate) at_ms: u64,
}

/// The changes of one machine. `last` is the status last noted: the first note only sets it
/// (the status the machine started with is not a change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatusHistory {
    last: Option<NodeStatus>,
    changes: VecDeque<Change>,
}

impl StatusHistory {
    /// Records `status` at `at_ms` when it differs from the status last noted.
    pub(crate) fn note(&mut self, status: NodeStatus, at_ms: u64) {
        match self.last {
            Some(last) if last == status => return,
            Some(_) => {
                if self.changes.len() == KEPT {
                    self.changes.pop_front();
                }
                self.changes.push_back(Change { status, at_ms });
            }
            None => {}
        }
        self.last = Some(status);
    }

    /// The changes, oldest first.
    pub(crate) fn changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_status_is_a_baseline_and_repeats_are_not_changes() {
        let mut history = StatusHistory::default();
        history.note(NodeStatus::Ready, 0);
        history.note(NodeStatus::Ready, 5);
        history.note(NodeStatus::Allocated, 10);
        history.note(NodeStatus::Allocated, 11);
        history.note(NodeStatus::Deploying, 20);
        let changes: Vec<(NodeStatus, u64)> =
            history.changes().map(|c| (c.status, c.at_ms)).collect();
        assert_eq!(
            changes,
            [(NodeStatus::Allocated, 10), (NodeStatus::Deploying, 20)]
        );
    }

    #[test]
    fn only_the_latest_changes_are_kept() {
        let mut history = StatusHistory::default();
        history.note(NodeStatus::Ready, 0);
        for i in 0..200u64 {
            let status = if i % 2 == 0 {
                NodeStatus::Deployed
            } else {
                NodeStatus::Ready
            };
            history.note(status, i + 1);
        }
        assert_eq!(history.changes().count(), KEPT);
        assert_eq!(history.changes().last().map(|c| c.at_ms), Some(200));
    }
}
