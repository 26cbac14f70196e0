//! Node status numbers, names and the legal transitions (`maascommon/enums/node.py`,
//! `node_status.py::NODE_TRANSITIONS`).

use serde::{Deserialize, Serialize};

/// A MAAS node status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// 0
    New,
    /// 1
    Commissioning,
    /// 2
    FailedCommissioning,
    /// 3
    Missing,
    /// 4
    Ready,
    /// 5
    Reserved,
    /// 6
    Deployed,
    /// 7
    Retired,
    /// 8
    Broken,
    /// 9
    Deploying,
    /// 10
    Allocated,
    /// 11
    FailedDeployment,
    /// 12
    Releasing,
    /// 13
    FailedReleasing,
    /// 14
    DiskErasing,
    /// 15
    FailedDiskErasing,
    /// 16
    RescueMode,
    /// 17
    EnteringRescueMode,
    /// 18
    FailedEnteringRescueMode,
    /// 19
    ExitingRescueMode,
    /// 20
    FailedExitingRescueMode,
    /// 21
    Testing,
    /// 22
    FailedTesting,
}

use NodeStatus as S;

/// Every status, in numeric order.
pub(crate) const ALL_STATUSES: [NodeStatus; 23] = [
    S::New,
    S::Commissioning,
    S::FailedCommissioning,
    S::Missing,
    S::Ready,
    S::Reserved,
    S::Deployed,
    S::Retired,
    S::Broken,
    S::Deploying,
    S::Allocated,
    S::FailedDeployment,
    S::Releasing,
    S::FailedReleasing,
    S::DiskErasing,
    S::FailedDiskErasing,
    S::RescueMode,
    S::EnteringRescueMode,
    S::FailedEnteringRescueMode,
    S::ExitingRescueMode,
    S::FailedExitingRescueMode,
    S::Testing,
    S::FailedTesting,
];

impl NodeStatus {
    /// The number MAAS puts in `status`.
    pub fn number(self) -> u8 {
        match self {
            S::New => 0,
            S::Commissioning => 1,
            S::FailedCommissioning => 2,
            S::Missing => 3,
            S::Ready => 4,
            S::Reserved => 5,
            S::Deployed => 6,
            S::Retired => 7,
            S::Broken => 8,
            S::Deploying => 9,
            S::Allocated => 10,
            S::FailedDeployment => 11,
            S::Releasing => 12,
            S::FailedReleasing => 13,
            S::DiskErasing => 14,
            S::FailedDiskErasing => 15,
            S::RescueMode => 16,
            S::EnteringRescueMode => 17,
            S::FailedEnteringRescueMode => 18,
            S::ExitingRescueMode => 19,
            S::FailedExitingRescueMode => 20,
            S::Testing => 21,
            S::FailedTesting => 22,
        }
    }

    /// The label MAAS puts in `status_name`.
    pub fn name(self) -> &'static str {
        match self {
            S::New => "New",
            S::Commissioning => "Commissioning",
            S::FailedCommissioning => "Failed commissioning",
            S::Missing => "Missing",
            S::Ready => "Ready",
            S::Reserved => "Reserved",
            S::Deployed => "Deployed",
            S::Retired => "Retired",
            S::Broken => "Broken",
            S::Deploying => "Deploying",
            S::Allocated => "Allocated",
            S::FailedDeployment => "Failed deployment",
            S::Releasing => "Releasing",
            S::FailedReleasing => "Releasing failed",
            S::DiskErasing => "Disk erasing",
            S::FailedDiskErasing => "Failed disk erasing",
            S::RescueMode => "Rescue mode",
            S::EnteringRescueMode => "Entering rescue mode",
            S::FailedEnteringRescueMode => "Failed to enter rescue mode",
            S::ExitingRescueMode => "Exiting rescue mode",
            S::FailedExitingRescueMode => "Failed to exit rescue mode",
            S::Testing => "Testing",
            S::FailedTesting => "Failed testing",
        }
    }

    /// The lower-case constant used by the `status` list filter (`ready`, `failed_deployment`).
    pub fn constant(self) -> &'static str {
        match self {
            S::New => "new",
            S::Commissioning => "commissioning",
            S::FailedCommissioning => "failed_commissioning",
            S::Missing => "missing",
            S::Ready => "ready",
            S::Reserved => "reserved",
            S::Deployed => "deployed",
            S::Retired => "retired",
            S::Broken => "broken",
            S::Deploying => "deploying",
            S::Allocated => "allocated",
            S::FailedDeployment => "failed_deployment",
            S::Releasing => "releasing",
            S::FailedReleasing => "failed_releasing",
            S::DiskErasing => "disk_erasing",
            S::FailedDiskErasing => "failed_disk_erasing",
            S::RescueMode => "rescue_mode",
            S::EnteringRescueMode => "entering_rescue_mode",
            S::FailedEnteringRescueMode => "failed_entering_rescue_mode",
            S::ExitingRescueMode => "exiting_rescue_mode",
            S::FailedExitingRescueMode => "failed_exiting_rescue_mode",
            S::Testing => "testing",
            S::FailedTesting => "failed_testing",
        }
    }

    /// Parses a filter constant (`ready`) or a number (`4`).
    pub fn from_filter(value: &str) -> Option<Self> {
        let v = value.trim().to_ascii_lowercase();
        ALL_STATUSES
            .iter()
            .copied()
            .find(|s| s.constant() == v || s.number().to_string() == v)
    }

    /// The statuses this one may move to (MAAS `NODE_TRANSITIONS`).
    pub fn successors(self) -> &'static [NodeStatus] {
        match self {
            S::New => &[
                S::Commissioning,
                S::Missing,
                S::Ready,
                S::Retired,
                S::Broken,
                S::Testing,
            ],
            S::Commissioning => &[
                S::FailedCommissioning,
                S::Ready,
                S::Testing,
                S::New,
                S::Broken,
            ],
            S::FailedCommissioning => &[
                S::Commissioning,
                S::Missing,
                S::Retired,
                S::Testing,
                S::Broken,
            ],
            S::Missing => &[S::New, S::Ready, S::Allocated, S::Broken],
            S::Ready => &[
                S::Commissioning,
                S::Allocated,
                S::Reserved,
                S::Retired,
                S::Missing,
                S::Broken,
                S::Deploying,
                S::Testing,
                S::EnteringRescueMode,
                S::DiskErasing,
            ],
            S::Reserved => &[
                S::Allocated,
                S::Ready,
                S::Releasing,
                S::Broken,
                S::DiskErasing,
            ],
            S::Allocated => &[
                S::Ready,
                S::Deploying,
                S::Releasing,
                S::DiskErasing,
                S::Broken,
                S::Missing,
                S::Testing,
                S::EnteringRescueMode,
            ],
            S::Deploying => &[
                S::Deployed,
                S::FailedDeployment,
                S::Allocated,
                S::Ready,
                S::Releasing,
                S::DiskErasing,
                S::Broken,
                S::Missing,
            ],
            S::Deployed => &[
                S::Releasing,
                S::DiskErasing,
                S::Broken,
                S::Allocated,
                S::Ready,
                S::Testing,
                S::EnteringRescueMode,
                S::Missing,
            ],
            S::FailedDeployment => &[
                S::Releasing,
                S::DiskErasing,
                S::Allocated,
                S::Ready,
                S::Broken,
                S::Testing,
                S::EnteringRescueMode,
            ],
            S::Releasing => &[
                S::Ready,
                S::FailedReleasing,
                S::DiskErasing,
                S::Broken,
                S::Missing,
                S::New,
            ],
            S::FailedReleasing => &[S::Releasing, S::Ready, S::Broken, S::DiskErasing],
            S::DiskErasing => &[
                S::FailedDiskErasing,
                S::Ready,
                S::New,
                S::Broken,
                S::Missing,
            ],
            S::FailedDiskErasing => &[S::DiskErasing, S::Ready, S::Broken, S::Releasing],
            S::Broken => &[
                S::Commissioning,
                S::Ready,
                S::Deployed,
                S::Releasing,
                S::DiskErasing,
                S::Testing,
                S::EnteringRescueMode,
            ],
            S::Retired => &[S::New, S::Ready, S::Broken, S::Missing],
            S::Testing => &[
                S::FailedTesting,
                S::Ready,
                S::Deployed,
                S::Allocated,
                S::Broken,
                S::Missing,
            ],
            S::FailedTesting => &[
                S::Testing,
                S::Ready,
                S::Commissioning,
                S::Broken,
                S::Releasing,
                S::DiskErasing,
            ],
            S::EnteringRescueMode => &[
                S::RescueMode,
                S::FailedEnteringRescueMode,
                S::ExitingRescueMode,
                S::Broken,
            ],
            S::RescueMode => &[S::ExitingRescueMode, S::Broken],
            S::FailedEnteringRescueMode => {
                &[S::EnteringRescueMode, S::ExitingRescueMode, S::Broken]
            }
            S::ExitingRescueMode => &[S::Ready, S::Deployed, S::Broken, S::FailedExitingRescueMode],
            S::FailedExitingRescueMode => &[S::EnteringRescueMode, S::ExitingRescueMode, S::Broken],
        }
    }

    /// Whether MAAS allows moving from `self` to `to`.
    pub fn can_move_to(self, to: NodeStatus) -> bool {
        self == to || self.successors().contains(&to)
    }

    /// States from which `release` does real work (others are a no-op or a 409).
    pub fn is_releasable(self) -> bool {
        matches!(
            self,
            S::Allocated
                | S::Reserved
                | S::Broken
                | S::Deploying
                | S::Deployed
                | S::FailedDeployment
                | S::FailedDiskErasing
                | S::FailedReleasing
        )
    }

    /// States from which `abort` is accepted.
    pub fn is_abortable(self) -> bool {
        matches!(
            self,
            S::DiskErasing | S::Commissioning | S::Deploying | S::Testing
        )
    }

    /// MAAS's `simple_status` grouping (used by the `simple_status` filter).
    pub fn simple(self) -> &'static str {
        match self {
            S::Ready => "ready",
            S::Allocated | S::Reserved => "allocated",
            S::Deployed => "deployed",
            S::Deploying | S::Commissioning | S::Testing | S::DiskErasing | S::Releasing => {
                "in_progress"
            }
            S::FailedCommissioning
            | S::FailedDeployment
            | S::FailedReleasing
            | S::FailedDiskErasing
            | S::FailedTesting
            | S::FailedEnteringRescueMode
            | S::FailedExitingRescueMode
            | S::Broken => "failed",
            _ => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_maas_values() {
        for (i, s) in ALL_STATUSES.iter().enumerate() {
            assert_eq!(usize::from(s.number()), i);
            assert_eq!(NodeStatus::from_filter(s.constant()), Some(*s));
        }
        assert_eq!(S::FailedReleasing.name(), "Releasing failed");
        assert_eq!(S::Allocated.number(), 10);
        assert_eq!(S::FailedDeployment.constant(), "failed_deployment");
        assert_eq!(NodeStatus::from_filter("11"), Some(S::FailedDeployment));
        assert_eq!(NodeStatus::from_filter("nope"), None);
    }

    #[test]
    fn transition_table_covers_the_capi_paths() {
        let legal = [
            (S::Ready, S::Allocated),
            (S::Ready, S::Deploying),
            (S::Allocated, S::Deploying),
            (S::Deploying, S::Deployed),
            (S::Deploying, S::FailedDeployment),
            (S::Deploying, S::Allocated),
            (S::Deployed, S::Releasing),
            (S::Deployed, S::DiskErasing),
            (S::Releasing, S::Ready),
            (S::Releasing, S::FailedReleasing),
            (S::DiskErasing, S::Ready),
            (S::DiskErasing, S::FailedDiskErasing),
            (S::Broken, S::Ready),
            (S::Broken, S::Deployed),
            (S::FailedDeployment, S::Releasing),
        ];
        for (from, to) in legal {
            assert!(from.can_move_to(to), "{from:?} -> {to:?}");
        }
        let illegal = [
            (S::Ready, S::Deployed),
            (S::Allocated, S::Deployed),
            (S::FailedDeployment, S::Deploying),
            (S::Deployed, S::Deploying),
            (S::Releasing, S::Deployed),
            (S::New, S::Allocated),
        ];
        for (from, to) in illegal {
            assert!(!from.can_move_to(to), "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn release_and_abort_sets() {
        assert!(S::Deployed.is_releasable());
        assert!(S::FailedDeployment.is_releasable());
        assert!(!S::Ready.is_releasable());
        assert!(!S::Releasing.is_releasable());
        assert!(S::Deploying.is_abortable());
        assert!(!S::Deployed.is_abortable());
    }
}
