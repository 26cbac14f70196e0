//! The reboot-state annotation of a MaasHost ([`ANNOTATION_REBOOT_STATE`]), a contract between
//! two Deployments: maas-client writes it while it carries out a reboot request (`off` once it
//! holds the server off, `on:<unix seconds>` once it sent the power-on) and removes it when the
//! cycle is done; remediation-controller reads it to know that the server is off before it
//! fences the Node.

use std::time::Duration;

pub use crate::keys::ANNOTATION_REBOOT_STATE;

/// [`ANNOTATION_REBOOT_STATE`] while the server is held off.
pub const POWERED_OFF: &str = "off";

/// Progress of a reboot request, as [`ANNOTATION_REBOOT_STATE`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebootState {
    /// No reboot in progress.
    Idle,
    /// Power-off requested (or about to be); the host stays off while a request exists.
    PoweringOff,
    /// Power-on sent; `since` is how long ago.
    PoweringOn {
        /// Time since the power-on was sent.
        since: Duration,
    },
}

/// Reads the reboot progress at `now` (unix seconds). An unreadable value counts as
/// `PoweringOff`: finishing a cycle is safer than forgetting that one started.
pub fn reboot_state(value: Option<&str>, now: i64) -> RebootState {
    match value {
        None => RebootState::Idle,
        Some(v) => match v.strip_prefix("on:").map(str::parse::<i64>) {
            Some(Ok(sent)) => RebootState::PoweringOn {
                since: Duration::from_secs(u64::try_from(now.saturating_sub(sent)).unwrap_or(0)),
            },
            _ => RebootState::PoweringOff,
        },
    }
}

/// The annotation value for a power-on sent at `now`.
pub fn powering_on(now: i64) -> String {
    format!("on:{now}")
}

/// Whether the annotation says the gateway holds the server off (a power-on not yet sent).
pub fn is_powered_off(value: Option<&str>) -> bool {
    value == Some(POWERED_OFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reboot_state_round_trip() {
        assert_eq!(reboot_state(None, 100), RebootState::Idle);
        assert_eq!(
            reboot_state(Some(POWERED_OFF), 100),
            RebootState::PoweringOff
        );
        assert_eq!(reboot_state(Some("garbage"), 100), RebootState::PoweringOff);
        assert_eq!(
            reboot_state(Some(&powering_on(40)), 100),
            RebootState::PoweringOn {
                since: Duration::from_secs(60)
            }
        );
        assert!(is_powered_off(Some(POWERED_OFF)));
        assert!(!is_powered_off(Some(&powering_on(40))));
        assert!(!is_powered_off(None));
    }
}
