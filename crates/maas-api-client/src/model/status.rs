//! Machine status numbers and power states.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A MAAS node status (maas-api.md section 6). Unknown numbers are kept, never rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MachineStatus {
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
    /// A number this client does not know.
    Unknown(i64),
}

/// (number, variant, list-filter constant). One table so the three mappings cannot drift.
const STATUS_TABLE: [(i64, MachineStatus, &str); 23] = [
    (0, MachineStatus::New, "new"),
    (1, MachineStatus::Commissioning, "commissioning"),
    (
        2,
        MachineStatus::FailedCommissioning,
        "failed_commissioning",
    ),
    (3, MachineStatus::Missing, "missing"),
    (4, MachineStatus::Ready, "ready"),
    (5, MachineStatus::Reserved, "reserved"),
    (6, MachineStatus::Deployed, "deployed"),
    (7, MachineStatus::Retired, "retired"),
    (8, MachineStatus::Broken, "broken"),
    (9, MachineStatus::Deploying, "deploying"),
    (10, MachineStatus::Allocated, "allocated"),
    (11, MachineStatus::FailedDeployment, "failed_deployment"),
    (12, MachineStatus::Releasing, "releasing"),
    (13, MachineStatus::FailedReleasing, "failed_releasing"),
    (14, MachineStatus::DiskErasing, "disk_erasing"),
    (15, MachineStatus::FailedDiskErasing, "failed_disk_erasing"),
    (16, MachineStatus::RescueMode, "rescue_mode"),
    (
        17,
        MachineStatus::EnteringRescueMode,
        "entering_rescue_mode",
    ),
    (
        18,
        MachineStatus::FailedEnteringRescueMode,
        "failed_entering_rescue_mode",
    ),
    (19, MachineStatus::ExitingRescueMode, "exiting_rescue_mode"),
    (
        20,
        MachineStatus::FailedExitingRescueMode,
        "failed_exiting_rescue_mode",
    ),
    (21, MachineStatus::Testing, "testing"),
    (22, MachineStatus::FailedTesting, "failed_testing"),
];

impl MachineStatus {
    /// Maps a MAAS status number.
    pub fn from_number(n: i64) -> Self {
        STATUS_TABLE
            .iter()
            .find(|(num, _, _)| *num == n)
            .map_or(Self::Unknown(n), |(_, status, _)| *status)
    }

    /// The MAAS status number.
    pub fn number(self) -> i64 {
        if let Self::Unknown(n) = self {
            return n;
        }
        STATUS_TABLE
            .iter()
            .find(|(_, status, _)| *status == self)
            .map_or(-1, |(num, _, _)| *num)
    }

    /// The lower-case constant used by the `status` list filter (`ready`, `failed_deployment`).
    pub fn filter_name(self) -> Option<&'static str> {
        STATUS_TABLE
            .iter()
            .find(|(_, status, _)| *status == self)
            .map(|(_, _, name)| *name)
    }

    /// Failure states a provisioning flow cannot leave by waiting (maas-api.md 7.3).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Self::FailedCommissioning
                | Self::FailedDeployment
                | Self::FailedReleasing
                | Self::FailedDiskErasing
                | Self::FailedEnteringRescueMode
                | Self::FailedExitingRescueMode
                | Self::FailedTesting
                | Self::Broken
        )
    }

    /// States that change on their own (poll again later).
    pub fn is_transitional(self) -> bool {
        matches!(
            self,
            Self::Commissioning
                | Self::Deploying
                | Self::Releasing
                | Self::DiskErasing
                | Self::EnteringRescueMode
                | Self::ExitingRescueMode
                | Self::Testing
        )
    }
}

impl fmt::Display for MachineStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.filter_name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown({})", self.number()),
        }
    }
}

impl Serialize for MachineStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i64(self.number())
    }
}

impl<'de> Deserialize<'de> for MachineStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        i64::deserialize(deserializer).map(Self::from_number)
    }
}

/// A machine's power state as MAAS reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum PowerState {
    /// `on`
    On,
    /// `off`
    Off,
    /// `unknown`: MAAS cannot tell. Never power on in this state (IPMI power-cycles).
    #[default]
    Unknown,
    /// `error`: the BMC query failed. Never power on in this state.
    Error,
    /// Any other string.
    Other(String),
}

impl PowerState {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Unknown => "unknown",
            Self::Error => "error",
            Self::Other(s) => s,
        }
    }

    fn from_wire(s: &str) -> Self {
        match s {
            "on" => Self::On,
            "off" => Self::Off,
            "unknown" => Self::Unknown,
            "error" => Self::Error,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

serialize_as_str!(PowerState);

impl<'de> Deserialize<'de> for PowerState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(deserializer)?;
        Ok(s.map_or(Self::Unknown, |s| Self::from_wire(&s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_documented_number_both_ways() {
        for n in 0..=22 {
            let status = MachineStatus::from_number(n);
            assert!(!matches!(status, MachineStatus::Unknown(_)), "{n}");
            assert_eq!(status.number(), n);
            assert!(status.filter_name().is_some());
        }
        assert_eq!(MachineStatus::from_number(4), MachineStatus::Ready);
        assert_eq!(MachineStatus::from_number(6), MachineStatus::Deployed);
        assert_eq!(MachineStatus::from_number(9), MachineStatus::Deploying);
        assert_eq!(MachineStatus::from_number(10), MachineStatus::Allocated);
        assert_eq!(
            MachineStatus::from_number(11),
            MachineStatus::FailedDeployment
        );
        assert_eq!(
            MachineStatus::from_number(13),
            MachineStatus::FailedReleasing
        );
        assert_eq!(
            MachineStatus::FailedDeployment.filter_name(),
            Some("failed_deployment")
        );
    }

    #[test]
    fn keeps_unknown_numbers() {
        let status = MachineStatus::from_number(99);
        assert_eq!(status, MachineStatus::Unknown(99));
        assert_eq!(status.number(), 99);
        assert_eq!(status.filter_name(), None);
        assert_eq!(status.to_string(), "unknown(99)");
        assert_eq!(MachineStatus::from_number(-1), MachineStatus::Unknown(-1));
    }

    #[test]
    fn classifies_states() {
        assert!(MachineStatus::FailedDeployment.is_failure());
        assert!(MachineStatus::Broken.is_failure());
        assert!(!MachineStatus::Ready.is_failure());
        assert!(MachineStatus::Deploying.is_transitional());
        assert!(!MachineStatus::Deployed.is_transitional());
    }

    #[test]
    fn serde_round_trips() {
        let status: MachineStatus = serde_json::from_str("12").unwrap();
        assert_eq!(status, MachineStatus::Releasing);
        assert_eq!(serde_json::to_string(&status).unwrap(), "12");
        assert!(serde_json::from_str::<MachineStatus>("\"ready\"").is_err());
        let power: PowerState = serde_json::from_str("\"off\"").unwrap();
        assert_eq!(power, PowerState::Off);
        let power: PowerState = serde_json::from_str("null").unwrap();
        assert_eq!(power, PowerState::Unknown);
        let power: PowerState = serde_json::from_str("\"flaky\"").unwrap();
        assert_eq!(power.as_str(), "flaky");
    }
}
